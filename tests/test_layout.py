"""The layout's promises, on the import graph of every module: imports inside functions count, an
import of a parent package counts (``from lightning_metrics.metrics import x`` runs
``metrics/__init__``), and so do indirect imports (what a module reaches through others).

- no import loop anywhere;
- an explicit layer order: a module reaches only modules of its own group or of a lower layer,
  never a higher layer and never another group of its own layer (``data`` and ``models`` never
  reach each other);
- one module owns the export format.

The checker runs on a planted package too, so a test shows it fails where it should.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from conftest import REPO

PACKAGES = ("lightning_metrics", "data_gen")

# lowest first; each inner tuple is one layer, each name in it one group (a module or a package)
LAYERS = (
    ("lightning_metrics.errors", "lightning_metrics.version"),
    (
        "lightning_metrics.atomic",
        "lightning_metrics.tables",
        "lightning_metrics.parallel",
        "lightning_metrics.spans",
        "lightning_metrics.signature",
    ),
    ("lightning_metrics.correlation",),  # correlations, bootstrap intervals
    ("lightning_metrics.storage",),  # the export folder and Lightning checkpoints
    ("lightning_metrics.encoders",),  # loading, precision, batches, token sequences
    ("lightning_metrics.baselines",),  # BLEU, chrF, ROUGE, BERTScore, signals
    ("lightning_metrics.data", "lightning_metrics.models"),  # never reach each other
    ("lightning_metrics.training",),  # LightningCLI, config checks, export of checkpoints
    ("lightning_metrics.metrics", "lightning_metrics.importers"),  # scoring; import of peers
    ("lightning_metrics.evaluation", "data_gen", "lightning_metrics.integrations"),  # integrations: torchmetrics
    ("lightning_metrics.cli", "lightning_metrics.resources"),
    ("lightning_metrics",),  # the package root: load_metric
)


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, own: str, modules: set[str]) -> set[str]:
    """Project modules that the file of module ``own`` imports, at any depth of the file: ``from P
    import N`` imports ``P`` and, where ``P.N`` is a module, that module too; relative imports count."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = own.split(".")
                package = parts[: len(parts) - node.level + (path.name == "__init__.py")]
                base = ".".join([*package, *([base] if base else [])])
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of ``packages`` under ``root`` -> the project modules it imports directly."""
    files = {module_name(root, p): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    return {m: imported_modules(p, m, set(files)) - {m} for m, p in files.items()}


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import loop found by a depth-first walk (each as the modules around it)."""
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                found.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def group_of(module: str, layers) -> tuple[int, str] | None:
    """``(layer, group)`` of a module: the longest group name it is, or lies inside."""
    best = None
    for level, groups in enumerate(layers):
        for group in groups:
            if (module == group or module.startswith(group + ".")) and (best is None or len(group) > len(best[1])):
                best = (level, group)
    return best


def layer_violations(graph: dict[str, set[str]], layers) -> list[str]:
    """``A reaches B`` for each module A that reaches, directly or not, a module B of a higher layer or
    of another group of its own layer; and each module no layer names."""
    problems = []
    for module in sorted(graph):
        mine = group_of(module, layers)
        if mine is None:
            problems.append(f"{module} is in no layer")
            continue
        for other in sorted(reached(graph, module)):
            theirs = group_of(other, layers)
            if theirs is not None and (theirs[0] > mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1])):
                problems.append(f"{module} ({mine[1]}) reaches {other} ({theirs[1]})")
    return problems


def test_no_import_loop():
    found = loops(import_graph(REPO, PACKAGES))
    assert not found, "import loops: " + "; ".join(" -> ".join(c) for c in found)


def test_layers_hold():
    problems = layer_violations(import_graph(REPO, PACKAGES), LAYERS)
    assert not problems, "\n".join(problems[:20])


def test_one_module_owns_the_export_format():
    hits = subprocess.run(
        ["grep", "-rln", "metric.json", *PACKAGES, "--include=*.py"], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    assert hits == ["lightning_metrics/storage/artifact.py"]


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_checker_finds_planted_loops(tmp_path):
    """A loop through an import inside a function, and one through a parent package's __init__."""
    _plant(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.child import thing\n",
            "pkg/child.py": "def thing():\n    from pkg import other\n",
            "pkg/other.py": "",
            "pkg/a.py": "import os\n\ndef f():\n    import pkg.b\n",
            "pkg/b.py": "from pkg.a import f\n",
        },
    )
    found = {tuple(c) for c in loops(import_graph(tmp_path, ("pkg",)))}
    assert ("pkg", "pkg.child", "pkg") in found or ("pkg.child", "pkg", "pkg.child") in found
    assert ("pkg.a", "pkg.b", "pkg.a") in found


def test_checker_finds_an_indirect_climb(tmp_path):
    """low -> mid is allowed; mid -> high is the violation, and low reaches high through mid."""
    _plant(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "from pkg.mid import x\n",
            "pkg/mid.py": "from pkg.high import y\nx = 1\n",
            "pkg/high.py": "y = 2\n",
            "pkg/peer.py": "",
        },
    )
    layers = (("pkg.low", "pkg.mid"), ("pkg.high", "pkg.peer"), ("pkg",))
    problems = layer_violations(import_graph(tmp_path, ("pkg",)), layers)
    assert "pkg.mid (pkg.mid) reaches pkg.high (pkg.high)" in problems
    assert "pkg.low (pkg.low) reaches pkg.mid (pkg.mid)" in problems  # another group of its own layer
    assert "pkg.low (pkg.low) reaches pkg.high (pkg.high)" in problems  # indirect
