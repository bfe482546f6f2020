"""benchmarks/in_house_report.py: the in-house benchmark's tables and trade-off plot, written from a
results file of the benchmark's shape (two domains, two sizes, every method)."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from in_house_report import ORDER, report  # noqa: E402


def cell(kendall: float, change: float) -> dict:
    return {
        "kendall": kendall,
        "ci": [kendall - 0.04, kendall + 0.04],
        "change": change,
        "change_ci": [change - 0.02, change + 0.02],
    }


def domain(shift: float) -> dict:
    general = {"in_domain_dev": 0.10, "in_domain_test": 0.18, "general_dev": 0.19, "general_test": 0.20}
    sizes = {}
    for n, rows in (("250", 260), ("1000", 1027)):
        methods = {
            m: {
                "in_domain_dev": 0.1 + i / 100,
                "general_dev": 0.19 - i / 200,
                "in_domain_test": cell(0.2, shift + i / 100),
                "general_test": cell(0.2, -i / 100),
            }
            for i, m in enumerate(ORDER)
        }
        grid = {str(a): {"in_domain_dev": 0.1 + a / 10, "general_dev": 0.19 - a / 100} for a in (0.0, 0.2, 0.4, 1.0)}
        sizes[n] = {"rows": rows, "methods": methods, "alphas": {"interpolated": {"alpha": 0.4, "grid": grid}}}
    baselines = {"bertscore": cell(0.17, -0.01), "chrf": cell(0.16, -0.02)}
    return {"general": general, "sizes": sizes, "baselines": baselines, "chosen": "interpolated"}


def test_the_report_has_every_method_and_the_plot_is_written(tmp_path):
    report({"domains": {"ted-zh-en": domain(0.0), "ted-en-de": domain(0.01)}}, tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert text.count("Chosen on dev at 1,000 rows: **interpolated**") == 2
    assert (
        "| 1000 (1027) | interpolated, alpha 0.4 (chosen) | 0.2000 | +0.0200 [+0.000, +0.040] | "
        "-0.0200 [-0.040, +0.000] |" in text
    )
    assert "| 250 | interpolated, alpha 0.2 | 0.1200 | 0.1880 | yes |" in text  # 0.188 >= 0.19 - 0.005
    assert "| 250 | head-only | 0.1400 | 0.1700 | no |" in text
    png = (tmp_path / "in_house_tradeoff.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000


def test_the_recipe_rule_keeps_what_every_domain_keeps_and_takes_the_best_mean_dev_gain():
    from in_house import choose_across

    def result(start_dev: float, dev: dict) -> dict:
        general = {"in_domain_dev": start_dev, "general_dev": 0.20}
        methods = {m: {"in_domain_dev": d, "general_dev": g} for m, (d, g) in dev.items()}
        return {"general": general, "sizes": {"1000": {"methods": methods}}}

    first = result(0.10, {"a": (0.20, 0.199), "b": (0.15, 0.196), "c": (0.14, 0.2), "from the encoder": (0.3, 0.2)})
    second = result(0.30, {"a": (0.40, 0.194), "b": (0.31, 0.2), "c": (0.33, 0.199), "from the encoder": (0.5, 0.2)})
    # a: not kept in the second (0.194 < 0.195); b: mean gain (0.05 + 0.01) / 2 = 0.03; c: (0.04 + 0.03) / 2 = 0.035
    assert choose_across({"one": first, "two": second}) == "c"
    assert choose_across({"one": first}) == "a"
    assert choose_across({"one": result(0.1, {"a": (0.2, 0.1)})}) is None
