"""The kind of path each output option names, checked after parsing and before any work: a file
option that names a folder, or a folder option that names a file, is one line naming the option.

Inputs are checked where they are read (:mod:`lightning_metrics.data.readers`); every write also goes
through :mod:`lightning_metrics.atomic`, which refuses the same mistakes as a last guard.
"""

from __future__ import annotations

from pathlib import Path

FILE, FOLDER = "file", "folder"
OUTPUTS = {  # (command, option dest) -> what the option must name
    ("score", "json"): FILE,
    ("compare", "json"): FILE,
    ("rerank", "json"): FILE,
    ("rerank", "out"): FILE,
    ("evaluate", "json"): FILE,
    ("evaluate", "plot"): FOLDER,
    ("bertscore-baseline", "out"): FILE,
    ("generate", "out"): FOLDER,
    ("export", "out"): FOLDER,
    ("import", "out"): FOLDER,
    ("interpolate", "out"): FOLDER,
    ("quickstart", "out"): FOLDER,
    ("quickstart", "checkpoints"): FOLDER,
    ("plot-run", "out"): FOLDER,
}


def path_problem(command: str, options) -> str | None:
    """The one-line error for the first output option of ``command`` that names the wrong kind of path."""
    values = options.as_dict() if hasattr(options, "as_dict") else vars(options)
    for (name, dest), kind in OUTPUTS.items():
        value = values.get(dest) if name == command else None
        if not value:
            continue
        path = Path(str(value)).expanduser()
        flag = f"--{dest.replace('_', '-')}"
        if kind == FILE and path.is_dir():
            return f"{flag} {value}: is a folder, but a file is written there; give a file path"
        if kind == FOLDER and path.exists() and not path.is_dir():
            return f"{flag} {value}: is a file, but a folder is written there; give a folder path"
        blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            return f"{flag} {value}: {blocked} is a file, so nothing can be written inside it"
    return None
