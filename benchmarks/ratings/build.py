"""Rating sources from public releases, built by one command into the columns the readers load.

    .venv/bin/python benchmarks/ratings/build.py MIRRORS OUT [--sources NAME ...]

``MIRRORS`` holds the releases' snapshots as the session's ``fetch`` lays them out
(``owner+name/repo``, a git directory) or as clones (``owner+name/`` or ``owner/name/``). ``OUT``
receives one file per source and ``MANIFEST.json`` (rows, sha256, rows dropped by reason, parts left
out, the checks each join passed, the files read at their commits). The data stays out of git; the
manifest of the last build is committed beside this script.

Every row has ``lp, src, mt, ref, score, system, doc_id, seg_id, year, domain`` (``ref`` is empty for
MLQE-PE; the ranks have ``src, ref, pos, neg`` instead). DA sources add ``raw`` and ``annotators``; MQM
sources are JSON lines with ``raters`` and ``spans``. Nothing of 2022 or later is read: WMT22 is the
cross-year test, and later years are reserved too.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402,F401  (the offline environment)
import da_sources  # noqa: E402
import mqm_sources  # noqa: E402
import qe_sources  # noqa: E402
from built import Built  # noqa: E402
from snapshot import find_snapshot  # noqa: E402

from lightning_metrics.atomic import atomic_path, write_json  # noqa: E402
from lightning_metrics.errors import LightningMetricsError  # noqa: E402

REPOS = {
    "qe": mqm_sources.QE_REPO,
    "google": mqm_sources.GOOGLE_REPO,
    "wmt21": mqm_sources.WMT21_REPO,
    "wmt20": "WMT-Metrics-task/wmt20-metrics",
    "wmt17": "AIPHES/ACL20-Reference-Free-MT-Evaluation",
    "mlqe": "sheffieldnlp/mlqe-pe",
    "darr": "neulab/BARTScore",
}
# each source: the snapshots it needs (the first one is required) and how it is built
SOURCES = {
    "mqm_newstest2020": ("qe", "google"),
    "mqm_newstest2021": ("qe", "wmt21", "google"),
    "mqm_ted2021": ("qe", "google"),
    "da_wmt21": ("wmt21",),
    "da_wmt20": ("wmt20", "qe", "google"),
    "da_wmt17": ("wmt17",),
    "da_mlqe_pe": ("mlqe",),
    "ranks_wmt19_darr": ("darr",),
}


def build_source(name: str, snaps: dict, cache: dict) -> Built:
    """One source from the snapshots (``cache`` keeps newstest2020's MQM segments for the WMT20 DA join)."""
    if name in ("mqm_newstest2020", "da_wmt20") and "newstest2020" not in cache and snaps["qe"] is not None:
        cache["newstest2020"] = mqm_sources.newstest2020(snaps["qe"], snaps["google"])
    if name == "mqm_newstest2020":
        return cache["newstest2020"][0]
    if name == "da_wmt20":
        segments = cache["newstest2020"][1] if "newstest2020" in cache else {}
        return da_sources.wmt20(snaps["wmt20"], segments)
    builders = {
        "mqm_newstest2021": lambda: mqm_sources.newstest2021(snaps["qe"], snaps["wmt21"], snaps["google"]),
        "mqm_ted2021": lambda: mqm_sources.ted2021(snaps["qe"], snaps["google"]),
        "da_wmt21": lambda: da_sources.wmt21(snaps["wmt21"]),
        "da_wmt17": lambda: da_sources.wmt17(snaps["wmt17"]),
        "da_mlqe_pe": lambda: qe_sources.mlqe_pe(snaps["mlqe"]),
        "ranks_wmt19_darr": lambda: qe_sources.wmt19_darr(snaps["darr"]),
    }
    return builders[name]()


def serialise(built: Built) -> bytes:
    """The source's file: CSV, or JSON lines where a column holds lists."""
    columns = built.columns()
    if built.fmt == "jsonl":
        return "".join(
            json.dumps({c: row.get(c) for c in columns}, ensure_ascii=False) + "\n" for row in built.rows
        ).encode()
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({c: "" if row.get(c) is None else row.get(c) for c in columns} for row in built.rows)
    return out.getvalue().encode()


def write_source(built: Built, out: Path) -> dict:
    """Writes the source's file atomically; its manifest entry."""
    path = out / f"{built.name}.{built.fmt}"
    data = serialise(built)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    pairs: dict[str, int] = {}
    for row in built.rows:
        pairs[row["lp"]] = pairs.get(row["lp"], 0) + 1
    return {
        "file": path.name, "kind": built.kind, "rows": len(built.rows), "sha256": hashlib.sha256(data).hexdigest(),
        "pairs": pairs, "dropped": dict(built.dropped.most_common()), "left_out": built.left_out,
        "checks": built.checks, "read": sorted(set(built.read)),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mirrors", type=Path, help="folder of the releases' snapshots")
    parser.add_argument("out", type=Path, help="folder for the built sources and MANIFEST.json")
    parser.add_argument("--sources", nargs="+", choices=sorted(SOURCES), default=list(SOURCES))
    args = parser.parse_args(argv)
    if not args.mirrors.is_dir():
        print(f"error: {args.mirrors}: no such folder of snapshots", file=sys.stderr)
        return 2
    snaps = {key: find_snapshot(args.mirrors, repo) for key, repo in REPOS.items()}
    previous = args.out / "MANIFEST.json"  # a partial build (--sources) keeps the other sources' entries
    manifest = json.loads(previous.read_text()) if previous.is_file() else {"sources": {}}
    cache: dict = {}
    try:
        for name in args.sources:
            required = SOURCES[name][0]
            if snaps[required] is None:
                print(f"{name}: left out whole: {REPOS[required]} is not under {args.mirrors}")
                continue
            built = build_source(name, snaps, cache)
            print(built.summary(), flush=True)
            manifest["sources"][name] = write_source(built, args.out)
    except LightningMetricsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    manifest["snapshots"] = {repo: (s.commit() if s else None) for repo, s in ((REPOS[k], snaps[k]) for k in REPOS)}
    write_json(args.out / "MANIFEST.json", manifest, ensure_ascii=False)
    print(f"wrote {len(manifest['sources'])} sources and MANIFEST.json to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
