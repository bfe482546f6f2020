"""The README's error-span walk as a user types it, on a tiny model: ``fit --config
configs/recipes/error-spans.yaml`` on MQM annotations -> ``export`` -> ``score --spans --json --html`` ->
``evaluate``; and the HTML page rendered by a real headless Chromium, its highlights found in the pixels."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import REPO
from scipy.stats import kendalltau
from test_spans import mqm_file
from test_workflow import lm, ok

from lightning_metrics.data.mqm import read_mqm
from lightning_metrics.evaluation.span_report import COLOURS, html_report
from lightning_metrics.metrics import load_metric
from lightning_metrics.metrics.base import ScoreResult

WORDS = ["cat", "dog", "mat", "train", "window", "museum", "library", "weather"]


def annotation_rows() -> list[tuple]:
    """Four talks of three systems' outputs: one with a major error, one with a minor error, one clean."""
    rows = []
    for i, w in enumerate(WORDS):
        talk, src = f"talk.{i % 4}", f"the {w} is here"
        rows.append(("sysA", talk, i, "r1", src, f"the <v>bad</v> {w} is here", "Accuracy/Mistranslation", "Major"))
        rows.append(("sysB", talk, i, "r1", src, f"the {w} <v>odd</v> now", "Style/Awkward", "Minor"))
        rows.append(("sysC", talk, i, "r1", src, f"the {w} is here", "No-error", "No-error"))
    return rows


def test_fit_export_score_spans_evaluate(tmp_path, tiny_encoder):
    mqm_file(tmp_path / "mqm_ted_ende.tsv", annotation_rows())
    (tmp_path / "mt.txt").write_text("the bad cat is here\nthe dog odd now\n", encoding="utf-8")
    (tmp_path / "src.txt").write_text("the cat is here\nthe dog is here\n", encoding="utf-8")
    fitted = lm(
        tmp_path,
        "fit",
        "--config",
        REPO / "configs/recipes/error-spans.yaml",
        "--model.init_args.encoder",
        tiny_encoder,
        "--data.init_args.train",
        '[{"path": "mqm_ted_ende.tsv", "name": "ted"}]',
        "--data.init_args.split.fraction",
        "0.25",
        "--data.init_args.batches.batch_size",
        "6",
        "--trainer.max_steps",
        "4",
        "--trainer.val_check_interval",
        "2",
        "--trainer.accelerator",
        "cpu",
    )
    assert "exported" in ok(fitted)
    logged = (tmp_path / "runs/error-spans/lightning_logs/version_0/metrics.csv").read_text().splitlines()[0]
    assert {"val_kendall", "val_token_f1"} <= set(logged.split(","))
    assert "-> checkpoints/spans" in ok(
        lm(
            tmp_path,
            "export",
            "runs/error-spans/lightning_logs/version_0/checkpoints/last.ckpt",
            "--out",
            "checkpoints/spans",
        )
    )
    printed = ok(
        lm(
            tmp_path,
            "score",
            "--model",
            "checkpoints/spans",
            "-t",
            "mt.txt",
            "-s",
            "src.txt",
            "--spans",
            "--json",
            "scores.json",
            "--html",
            "report.html",
        )
    )
    scored = json.loads((tmp_path / "scores.json").read_text())["systems"]["mt.txt"]
    assert len(scored["scores"]) == 2 and len(scored["spans"]) == 2
    shown = re.findall(r"^\s+(\d)\s+(-?\d+\.\d{4})\s+(.*)$", printed, re.M)  # number, score, marked text
    assert "== mt.txt" in printed and [n for n, _, _ in shown] == ["1", "2"]
    for (_, score, marked), value, text, spans in zip(
        shown, scored["scores"], ["the bad cat is here", "the dog odd now"], scored["spans"]
    ):
        assert score == f"{value:.4f}" and re.sub(r"\[([^\]]*)\]\{[^}]*\}", r"\1", marked) == text
        assert re.findall(r"\[([^\]]*)\]\{(\w+)", marked) == [
            (text[x["start"] : x["end"]], x["severity"]) for x in spans
        ]
    page = (tmp_path / "report.html").read_text()
    assert "the dog" in page and 'class="legend"' in page and "wrote report.html" in printed

    table = ok(
        lm(tmp_path, "evaluate", "--data", "mqm_ted_ende.tsv", "--metrics", "checkpoints/spans", "--bootstrap", "20")
    )
    data = read_mqm(str(tmp_path / "mqm_ted_ende.tsv")).columns  # segment Kendall, computed here
    metric = load_metric(str(tmp_path / "checkpoints" / "spans"))
    tau = kendalltau(metric.score(**{f: data[f] for f in metric.inputs}).scores, data["score"], variant="b")[0]
    assert re.search(rf"^checkpoints/spans\s+all\s+{tau:.4f} \[", table, re.M)
    assert re.search(r"^\(mark nothing\)\s+all\s+0\.0000", table, re.M)
    # every word minor marks the non-space characters; each gold span here is one word (3 characters),
    # so recall is 1 severity ignored, and 1/2 with severity (only the minor half of the spans match)
    marked = sum(len(t.replace(" ", "")) for t in data["mt"])
    gold = sum(s["end"] - s["start"] for spans in data["spans"] for s in spans)
    minor = sum(s["end"] - s["start"] for spans in data["spans"] for s in spans if s["severity"] == "minor")
    f1 = lambda p, r: 2 * p * r / (p + r)  # noqa: E731
    p_all, p_minor = gold / marked, minor / marked
    cells = rf"{f1(p_all, 1.0):.4f} \[.*\]\s+{p_all:.4f}\s+1\.0000\s+{f1(p_minor, minor / gold):.4f} \[.*\]"
    assert re.search(rf"^\(every word minor\)\s+all\s+{cells}\s+{p_minor:.4f}\s+{minor / gold:.4f}", table, re.M)
    assert re.search(r"^checkpoints/spans\s+all\s+[01]\.\d{4} \[", table.split("\nspans ")[1], re.M)


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="Debian's chromium is not installed (make setup installs it)"
)
def test_html_report_renders_highlights_in_chromium(tmp_path):
    from PIL import Image

    mt = {"system-1": ["The bad cat is here.", "A dog ran fast."], "system-2": ["The critical error here."]}
    spans = {
        "system-1": [
            [{"start": 4, "end": 7, "severity": "major", "confidence": 0.9}],
            [{"start": 6, "end": 9, "severity": "minor", "confidence": 0.6}],
        ],
        "system-2": [[{"start": 4, "end": 18, "severity": "critical", "confidence": 0.8}]],
    }
    results = {n: ScoreResult([-5.0, -1.0][: len(mt[n])], -3.0, "sig", {"spans": spans[n]}) for n in mt}
    page = tmp_path / "report.html"
    page.write_text(html_report(results, mt, title="Error spans"), encoding="utf-8")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=900,700",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    for severity, colour in COLOURS.items():
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
        # the legend and at least one span in the text: a few hundred pixels of the severity's colour
        assert (np.abs(pixels - rgb).sum(axis=1) <= 6).sum() > 300, severity


CHECK_MARKS = """<script>
// each <mark>: is the character just before it and its own first one both inside a word, or its last one
// and the one just after it? (what a person sees as a highlight that cuts a word)
const word = /[\\p{L}\\p{N}\\p{M}]/u;
const cut = [];
for (const mark of document.querySelectorAll("td mark")) {  // the segments, not the legend
  const before = (mark.previousSibling && mark.previousSibling.textContent) || "";
  const after = (mark.nextSibling && mark.nextSibling.textContent) || "";
  const text = mark.textContent;
  if ((word.test(before.slice(-1)) && word.test(text[0])) || (word.test(text.slice(-1)) && word.test(after[0])))
    cut.push(before.slice(-3) + "|" + text + "|" + after.slice(0, 3));
}
document.body.insertAdjacentHTML("beforeend", `<pre id="marks-checked">${document.querySelectorAll("td mark").length}
${cut.join("\\n")}</pre>`);
</script>"""


def marks_cutting_words(page, tmp_path) -> tuple[int, list[str]]:
    """The page rendered by headless Chromium: how many highlights it shows, and each one that starts or
    ends inside a word (a script added to a copy reads the rendered text around every ``<mark>``)."""
    probe = tmp_path / f"checked-{page.name}"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", CHECK_MARKS + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probe.as_uri()],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    found = re.search(r'<pre id="marks-checked">(\d+)\n(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return int(found.group(1)), [line for line in found.group(2).splitlines() if line]


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="Debian's chromium is not installed (make setup installs it)"
)
def test_no_highlight_starts_or_ends_inside_a_word_in_chromium(tmp_path, tiny_encoder):
    """An imported word-level COMET model (random tagger) on words the tiny vocabulary cuts into pieces:
    ``score --html`` highlights whole words; imported with ``--raw-spans`` (COMET's token spans) the same
    page cuts words, so the check can fail."""
    from test_import_unified import CASES, COMMON, SPLIT, write_unified

    write_unified(tmp_path / "comet", tiny_encoder, {**COMMON, **CASES["unified-full-word-level"]})
    rows = [SPLIT, {k: v.replace("Orchideen", "Sonnenblumen") for k, v in SPLIT.items()}]
    for field, name in (("mt", "mt.txt"), ("src", "src.txt"), ("ref", "ref.txt")):
        (tmp_path / name).write_text("".join(r[field] + "\n" for r in rows), encoding="utf-8")
    shown = {}
    for name, flags in (("words", []), ("raw", ["--raw-spans"])):
        ok(lm(tmp_path, "import", "comet", "--out", f"checkpoints/{name}", *flags))
        ok(lm(tmp_path, "score", "--model", f"checkpoints/{name}", "-t", "mt.txt", "-s", "src.txt", "-r", "ref.txt",
              "--html", f"{name}.html"))  # fmt: skip
        shown[name] = marks_cutting_words(tmp_path / f"{name}.html", tmp_path)
    highlights, cut = shown["words"]
    assert highlights > 0 and cut == [], cut  # spans shown, none cutting a word
    assert shown["raw"][1], "COMET's raw token spans should cut a word here, or the check proves nothing"
