"""The layout's promises: no import circle inside the library, one owner of the export format."""

import ast
import subprocess
from pathlib import Path

from conftest import REPO

PACKAGES = ("lightning_metrics", "data_gen")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Project modules imported anywhere in the file (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def test_no_import_circle():
    files = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    graph = {m: {d for d in _imports(p, set(files)) if d != m and not m.startswith(d + ".")} for m, p in files.items()}
    # a package's __init__ re-exporting its own modules is not a circle
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_one_module_owns_the_export_format():
    hits = subprocess.run(
        ["grep", "-rln", "metric.json", *PACKAGES, "--include=*.py"], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    assert hits == ["lightning_metrics/artifact.py"]


def _layer_imports(package: str) -> dict[str, set[str]]:
    """Project modules each module of ``package`` imports (function-level imports included)."""
    files = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    return {m: _imports(p, set(files)) for m, p in files.items() if m == package or m.startswith(package + ".")}


def test_data_never_imports_models():
    reaching = {
        m: sorted(d for d in deps if d.startswith("lightning_metrics.models"))
        for m, deps in _layer_imports("lightning_metrics.data").items()
    }
    assert not {m: d for m, d in reaching.items() if d}


def test_models_never_import_metrics_or_the_export_format():
    banned = ("lightning_metrics.metrics", "lightning_metrics.artifact")
    reaching = {
        m: sorted(d for d in deps if d.startswith(banned))
        for m, deps in _layer_imports("lightning_metrics.models").items()
    }
    assert not {m: d for m, d in reaching.items() if d}
