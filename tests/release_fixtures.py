"""Small public releases made by hand, each in its real format and as a real git repository, for the
rating-source builder (``benchmarks/ratings/build.py``): what the tests feed it, and what they expect."""

from __future__ import annotations

import io
import pickle
import subprocess
import tarfile
from pathlib import Path

TSV_HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n"


def git_repo(root: Path, files: dict[str, bytes | str], bare_copy: bool = False) -> Path:
    """A git repository with ``files`` committed; ``bare_copy``: also a bare clone at ``root/repo``
    (the layout ``fetch`` brings), the work tree moved aside so only the git directory is read."""
    work = root / "work" if bare_copy else root
    for path, data in files.items():
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run([*git[:-2], "init", "-q", str(work)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "release"], check=True)
    if bare_copy:
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(root / "repo")], check=True)
        subprocess.run(["rm", "-rf", str(work)], check=True)
    return root


def tarball(members: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def mqm_line(system, doc, position, seg, rater, source, target, category, severity) -> str:
    return "\t".join(map(str, (system, doc, position, seg, rater, source, target, category, severity))) + "\n"


# newstest2020 en-de: one document of two segments, Human-A.0 (the reference), Human-B.0 and one system.
# rater2's row of segment 1 repeats the text inside its target (as rows of the real files do): its
# major error counts in the score, its span does not.
SYS = "OPPO.1535"
NEWS2020_ENDE = TSV_HEADER + "".join(
    [
        mqm_line("Human-A.0", "d1", 1, 1, "rater1", "Hello world.", "Hallo Welt.", "No-error", "No-error"),
        mqm_line("Human-A.0", "d1", 2, 2, "rater1", "Good day.", "Guten Tag.", "No-error", "No-error"),
        mqm_line("Human-B.0", "d1", 1, 1, "rater1", "Hello world.", "Hallo, Welt.", "No-error", "No-error"),
        mqm_line(SYS, "d1", 1, 1, "rater1", "Hello world.", "Hallo <v>Erde</v>.", "Accuracy/Mistranslation", "Major"),
        mqm_line(
            SYS, "d1", 1, 1, "rater2", "Hello world.", "Hallo Erde.<v>Hallo Erde.</v>", "Fluency/Grammar", "Major"
        ),
        mqm_line(SYS, "d1", 1, 1, "rater3", "Hello world.", "Hallo Erde.", "No-error", "No-error"),
        mqm_line(SYS, "d1", 2, 2, "rater1", "Good day.", "Guten Tag<v></v>.", "Fluency/Punctuation", "Minor"),
        mqm_line(SYS, "d1", 2, 2, "rater2", "Good day.", "Guten Tag.", "No-error", "No-error"),
    ]
)
NEWS2020_ENDE_SCORES = {1: -10 / 3, 2: -0.05}  # segment 1: (5 + 5 + 0) / 3 raters; segment 2: (0.1 + 0) / 2

# newstest2021 en-ru: fields quoted as CSV quotes them, segments without global ids (-1), the rater
# file's texts without the thousands separator the release has; document "b" is found in the
# release's source file at lines 3-4, document "gone" nowhere.
NEWS2021_ENRU = TSV_HEADER + "".join(
    [
        mqm_line("ref.A", "b", 1, -1, "rater1", '"A ""big"" day"', "Большой день", "No-error", "No-error"),
        mqm_line("ref.A", "b", 2, -1, "rater1", "It cost 6000 euros.", "Это стоило 6000 евро.", "No-error", "No-error"),
        mqm_line(
            "Online-B", "b", 1, -1, "rater1", '"A ""big"" day"', '"<v>Большой</v> день"', "Lexical Selection", "major"
        ),
        mqm_line("Online-B", "b", 2, -1, "rater1", "It cost 6000 euros.", "Стоило 6000 евро.", "No-error", "No-error"),
        mqm_line("Online-B", "gone", 1, -1, "rater1", "Nowhere.", "Нигде.", "No-error", "No-error"),
    ]
)
WMT21_ENRU_SOURCES = 'First line.\nSecond line.\nA "big" day\nIt cost 6,000 euros.\n'
WMT21_ENRU_REFS = "Первая.\nВторая.\nБольшой день\nЭто стоило 6,000 евро.\n"

# WMT21 is-en DA: the XML lists document "zeta" (2 segments) before "alpha" (1 segment); DA ids number
# segments with the documents sorted by id: id 1 is alpha's (line 3), ids 2-3 are zeta's (lines 1-2).
IS_EN_XML = """<?xml version='1.0' encoding='utf-8'?>
<dataset id="newstest2021">
  <doc origlang="is" id="zeta"><src lang="is"><p><seg id="1">z1</seg><seg id="2">z2</seg></p></src></doc>
  <doc origlang="is" testsuite="ts" id="suite"><src lang="is"><p><seg id="1">t1</seg></p></src></doc>
  <doc origlang="is" id="alpha"><src lang="is"><p><seg id="1">a1</seg></p></src></doc>
</dataset>
"""
IS_EN_SRC, IS_EN_REF, IS_EN_MT = "z1\nz2\na1\n", "zeta one\nzeta two\nalpha one\n", "zeta 1\nzeta 2\nalpha 1\n"
IS_EN_SCORES = "SYS SID RAW.SCR Z.SCR N\nSysX.3 1 90 0.9 2\nSysX.3 3 20 -1.2 1\nHUMAN.0 2 99 1.5 1\n"
HIT_HEADER = "HITId\tWorkerId\tInput.src\tInput.trg\tInput.item\thit\tsys_id\trid\ttype\tsid\tscore\ttime\n"


def hit_runs(runs: list[tuple[str, list[int]]]) -> str:
    lines = [
        f"H{i}\tW\tis\ten\tad\t1\tSysX.3\t{run}\tSYSTEM\t{sid}\t0.1\t1"
        for i, (run, sids) in enumerate(runs)
        for sid in sids
    ]
    return HIT_HEADER + "\n".join(lines) + "\n"


def releases(root: Path, runs_whole: bool = True) -> Path:
    """Every release the builder reads, under ``root`` as ``fetch`` lays them out (the QE data as a bare
    git directory, the rest as clones); returns ``root``."""
    runs = [("r1", [1]), ("r2", [2, 3])] if runs_whole else [("r1", [1, 2]), ("r2", [3])]  # ids 1-2 cross a boundary
    git_repo(root / "WMT-QE-Task+wmt-qe-2022-data", {
        "train-dev_data/task1_word-level/train/en-de_mqm/en-de-train-2020.tar.gz":
            tarball({"en-de-train-2020/mqm_newstest2020_ende.tsv": NEWS2020_ENDE}),
        "train-dev_data/task1_word-level/train/en-ru_mqm/en-ru-train-2021-news.tar.gz":
            tarball({"en-ru-train-2021-news/mqm-newstest2021_enru.tsv": NEWS2021_ENRU}),
    }, bare_copy=True)  # fmt: skip
    git_repo(root / "google+wmt-mqm-human-evaluation", {
        "newstest2020/ende/mqm_newstest2020_ende.avg_seg_scores.tsv":
            f"system mqm_avg_score seg_id\n{SYS}\t-3.333333 1\n{SYS}\t-0.050000 2\nHuman-B.0\t-0.000000 1\n",
    })  # fmt: skip
    git_repo(root / "wmt-conference+wmt21-news-systems", {
        "txt/sources/newstest2021.en-ru.src.en": WMT21_ENRU_SOURCES,
        "txt/references/newstest2021.en-ru.ref.A.ru": WMT21_ENRU_REFS,
        "xml/newstest2021.is-en.all.xml": IS_EN_XML,
        "txt/sources/newstest2021.is-en.src.is": IS_EN_SRC,
        "txt/references/newstest2021.is-en.ref.A.en": IS_EN_REF,
        "txt/system-outputs/newstest2021.is-en.hyp.SysX.en": IS_EN_MT,
        "humaneval/newstest2021-toen/ad-seg-scores-is-en.csv": IS_EN_SCORES,
        "humaneval/newstest2021-toen/ad-isen-good-stnd.csv": hit_runs(runs),
        "humaneval/newstest2021-toen/ad-seg-scores-de-en.csv": "SYS SID RAW.SCR Z.SCR N\n",
    })  # fmt: skip
    git_repo(root / "WMT-Metrics-task+wmt20-metrics", {
        "manual-evaluation/DA/metrics-ad-seg-scores-en-de.csv": (
            "SYS SEGID RAW.SCR Z.SCR N SID\n"
            f"{SYS} d1::2 70.0 0.3 2 2\n{SYS} d1::1 40.0 -0.8 1 1\n"
            "Human-B.0 d1::1 95.0 1.1 1 1\nOnline-A.1574 d1::1 50 0 1 1\n"
        ),
        "input/details/en-de.txt": "1\tnewstest2020\ten-de\td1\t1\n2\tnewstest2020\ten-de\td1\t2\n",
    })  # fmt: skip
    git_repo(root / "AIPHES+ACL20-Reference-Free-MT-Evaluation", {
        "WMT17/DA-seglevel.csv":
            "LP DATA SYSTEM SID HUMAN\nde-en newstest2017 sysA.1 2 0.5\nde-en newstest2017 sysB.2 1 -0.1\n",
        "WMT17/source/newstest2017-deen-src.de": "Eins.\nZwei.\n",
        "WMT17/references/newstest2017-deen-ref.en": "One.\nTwo.\n",
        "WMT17/system-outputs/de-en/newstest2017.sysA.1.de-en": "One!\nTwo!\n",
    })  # fmt: skip
    mlqe_tsv = (
        "index\toriginal\ttranslation\tscores\tmean\tz_scores\tz_mean\tmodel_scores\n"
        "0\tSursa.\tThe source.\t[80, 60]\t70.0\t[0.5, -0.1]\t0.2\t-0.3\n"
        "1\tAlta.\tOther.\t[10, 120]\t65.0\t[0.0, 0.0]\t0.0\t-0.3\n"
    )
    git_repo(root / "sheffieldnlp+mlqe-pe", {
        "data/direct-assessments/train/ro-en-train.tar.gz":
            tarball({"ro-en-train/train.roen.df.short.tsv": mlqe_tsv,
                     "ro-en-train/train.doc_ids": "doc_id\nCluj\nCluj\n"}),
    })  # fmt: skip
    darr = {
        "0": {"src": "s", "ref": "r", "better": {"sys_name": "A", "sys": "good", "scores": {}},
              "worse": {"sys_name": "B", "sys": "bad", "scores": {}}},
        "1": {"src": "s", "ref": "r", "better": {"sys_name": "A", "sys": "same", "scores": {}},
              "worse": {"sys_name": "B", "sys": "same", "scores": {}}},
    }  # fmt: skip
    git_repo(root / "neulab+BARTScore", {"WMT/kk-en/data.pkl": pickle.dumps(darr)})
    return root
