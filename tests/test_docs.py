"""Every `lightning-metrics` command that the README and the guides show is parsed by the real parser,
so no guide shows an option, a metric spec, a config key or a config file that does not exist; and
every relative link of them points at a file that does. (The workflows themselves run for real in
test_workflow.py, test_import.py and test_configs.py, on tiny models.)"""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import REPO

from lightning_metrics.cli.main import COMMANDS, LIGHTNING_COMMANDS, build_parser, main
from lightning_metrics.cli.paths import path_problem
from lightning_metrics.cli.ranges import range_problem

GUIDES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PROGRAM = re.compile(r"(?:^|\s)(?:\S*/)?lightning-metrics\s|-m lightning_metrics\.cli\s")


def shown_commands() -> list[tuple[str, list[str]]]:
    """``(guide, argv)`` for each command line of a bash block that runs lightning-metrics."""
    found = []
    for guide in GUIDES:
        for block in re.findall(r"```bash\n(.*?)```", guide.read_text(encoding="utf-8"), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0].strip()
                match = PROGRAM.search(line)
                unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", line[match.end() :] if match else "")
                if not match or line.startswith("#") or "[" in unquoted:
                    continue  # a comment, or a synopsis with [optional] parts (a quoted list is a value)
                found.append((guide.name, shlex.split(line[match.end() :])))
    return found


COMMANDS_SHOWN = shown_commands()


def test_the_guides_show_commands():
    shown = {argv[0] for _, argv in COMMANDS_SHOWN}
    assert {"score", "evaluate", "fit", "export", "import", "compare", "rerank", "probe", "generate"} <= shown


@pytest.mark.parametrize("guide, argv", COMMANDS_SHOWN, ids=[" ".join(a)[:80] for _, a in COMMANDS_SHOWN])
def test_every_shown_command_parses(guide, argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the commands are written for the repository root
    if argv[0] in LIGHTNING_COMMANDS:
        with pytest.raises(SystemExit) as done:  # parses every key and type of the config, builds nothing
            main([*argv, "--print_config"])
        assert done.value.code in (0, None), f"{guide}: {' '.join(argv)}\n{capsys.readouterr().err[-2000:]}"
        return
    assert argv[0] in COMMANDS, f"{guide}: unknown command {argv[0]}"
    cfg = build_parser().parse_args(argv)
    options = getattr(cfg, cfg.command)
    assert range_problem(cfg.command, options) is None and path_problem(cfg.command, options) is None
    from lightning_metrics.metrics import parse_spec

    for spec in [*(getattr(options, k, None) or [] for k in ("metrics", "ensemble"))]:
        for text in spec:
            if not any(
                text.endswith(p) for p in ("/quickstart", "/my-metric", "/wmt22-comet-da", "/mine", "/error-spans")
            ):
                parse_spec(text)  # built-in specs are real specs; folders are the user's
    for key in ("model", "metric") if cfg.command != "bertscore-baseline" else ():  # its --model is an encoder
        text = getattr(options, key, None)
        if isinstance(text, str) and "/" not in text.split("=")[-1]:
            parse_spec(text)


def test_relative_links_point_at_files():
    missing = []
    for guide in [*GUIDES, *sorted((REPO / "docs" / "results").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", guide.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://")) and not (guide.parent / target).exists():
                missing.append(f"{guide.relative_to(REPO)} -> {target}")
    assert not missing, missing
