"""Every page of docs/results is generated from the JSON beside it by the benchmark that measured it:
the test renders each JSON again and compares, so a number edited by hand (or a page with no JSON)
fails."""

from __future__ import annotations

import shutil
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from results_doc import RESULTS, publish, stale_pages  # noqa: E402


def test_every_results_page_equals_its_json_rendering():
    assert sorted(RESULTS.glob("*.json")), "docs/results holds no generated result"
    assert stale_pages() == []


def test_a_hand_edited_number_or_a_page_without_json_is_named(tmp_path):
    for name in ("feature-cache.json", "feature-cache.md"):
        shutil.copy(RESULTS / name, tmp_path / name)
    assert stale_pages(tmp_path) == []
    page = tmp_path / "feature-cache.md"
    text = page.read_text(encoding="utf-8")
    seconds = text.split("| cached, warm | ")[1].split(" |")[0]  # the warm fit's seconds, e.g. 19.1
    page.write_text(text.replace(f"| cached, warm | {seconds} |", f"| cached, warm | {float(seconds) + 1:.1f} |"))
    (tmp_path / "typed.md").write_text("# A result\n\n| x | 0.5 |\n", encoding="utf-8")
    problems = stale_pages(tmp_path)
    assert problems == [
        "feature-cache.md: differs from what feature-cache.json renders (edited by hand?)",
        "typed.md: no typed.json beside it, so no script produced its numbers",
    ]


def test_publish_writes_the_json_and_the_page_it_renders(tmp_path):
    import json

    payload = json.loads((RESULTS / "meta-eval-parity.json").read_text(encoding="utf-8"))
    payload["max_diff"] = 2.5e-13
    page = publish("parity", payload, "meta_eval_parity.py", folder=tmp_path)
    assert json.loads((tmp_path / "parity.json").read_text())["max_diff"] == 2.5e-13
    assert "**2.5e-13**" in page.read_text(encoding="utf-8") and stale_pages(tmp_path) == []
