"""The one owner of ``docs/results/``: every result there is a JSON file written by the benchmark that
measured it, and the Markdown page beside it is generated from that JSON by the benchmark's ``render``.
Nothing in a page is typed by hand, and ``tests/test_results_docs.py`` rebuilds every page from its JSON.

    .venv/bin/python benchmarks/results_doc.py          # regenerate every page from its JSON
    .venv/bin/python benchmarks/results_doc.py --check  # name each page that differs (exit 1)

A JSON file names its ``generator`` (``benchmarks/NAME.py``, importable with ``benchmarks/`` on the path).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from lightning_metrics.atomic import write_json, write_text

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"
UNGENERATED = {"README.md"}  # the index: it links the pages and quotes no measurement


def machine() -> str:
    """The CPU's model name and core count (what every timing here depends on)."""
    names = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line
    ]
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} cores"


def publish(name: str, payload: dict, generator: str, folder: Path = RESULTS) -> Path:
    """Write ``NAME.json`` (the payload, with its generator) and ``NAME.md`` rendered from it; returns the page."""
    payload = {"generator": f"benchmarks/{Path(generator).name}", **payload}
    write_json(folder / f"{name}.json", payload)
    return write_text(folder / f"{name}.md", render_page(payload))


def render_page(payload: dict) -> str:
    """The page its generator renders from ``payload``."""
    if str(Path(__file__).parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).parent))
    return importlib.import_module(Path(payload["generator"]).stem).render(payload)


def stale_pages(folder: Path = RESULTS) -> list[str]:
    """One line for each page with no JSON beside it, or whose text differs from its JSON's rendering."""
    problems = []
    for page in sorted(folder.glob("*.md")):
        source = page.with_suffix(".json")
        if page.name in UNGENERATED:
            continue
        if not source.is_file():
            problems.append(f"{page.name}: no {source.name} beside it, so no script produced its numbers")
        elif render_page(json.loads(source.read_text(encoding="utf-8"))) != page.read_text(encoding="utf-8"):
            problems.append(f"{page.name}: differs from what {source.name} renders (edited by hand?)")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only name the pages that differ")
    args = parser.parse_args()
    if args.check:
        problems = stale_pages()
        print("\n".join(problems) or "every page equals its JSON's rendering")
        raise SystemExit(1 if problems else 0)
    for source in sorted(RESULTS.glob("*.json")):
        write_text(source.with_suffix(".md"), render_page(json.loads(source.read_text(encoding="utf-8"))))
        print(f"wrote {source.with_suffix('.md').relative_to(REPO)}")


if __name__ == "__main__":
    main()
