"""The in-house benchmark's report: tables per domain and the trade-off plot (``in_house.py`` measures).

.venv/bin/python benchmarks/in_house.py --stages report   # from runs/in_house/results.json
"""

from __future__ import annotations

from pathlib import Path

from lightning_metrics.evaluation.alpha_rule import TOLERANCE, within_tolerance

ORDER = (
    "guarded",
    "unguarded",
    "interpolated",
    "adapters",
    "head-only",
    "adapters, frozen head",
    "adapters, frozen head, interpolated",
    "adapters, frozen head, lr 1e-3",
    "adapters, frozen head, lr 1e-3, interpolated",
    "from the encoder",
)
MARKERS = dict(zip(ORDER, ("v", "o", "*", "s", "D", "P", "X", "p", "h", "x"), strict=True))  # and colours, in order
TARGET_GAIN = 0.03


def interval(low: float, high: float) -> str:
    return f"[{low:+.3f}, {high:+.3f}]"


def test_table(result: dict) -> list[str]:
    """In-domain test Kendall and gain, and general test change (forgetting), per size and method."""
    general = result["general"]
    lines = [
        "| rows | method | in-domain test | gain over the general metric | general test change |",
        "|---|---|---|---|---|",
        f"| | general metric (start) | {general['in_domain_test']:.4f} | | ({general['general_test']:.4f}) |",
    ]
    for name, base in result["baselines"].items():
        lines.append(f"| | {name} | {base['kendall']:.4f} | {base['change']:+.4f} {interval(*base['change_ci'])} | |")
    for n, size in result["sizes"].items():
        for method in (m for m in ORDER if m in size["methods"]):
            test, general_test = size["methods"][method]["in_domain_test"], size["methods"][method]["general_test"]
            mark = " (chosen)" if method == result.get("chosen") and n == "1000" else ""
            chosen = size.get("alphas", {}).get(method)
            alpha = f", alpha {chosen['alpha']}" if chosen else ""
            lines.append(
                f"| {n} ({size['rows']}) | {method}{alpha}{mark} | {test['kendall']:.4f} | "
                f"{test['change']:+.4f} {interval(*test['change_ci'])} | "
                f"{general_test['change']:+.4f} {interval(*general_test['change_ci'])} |"
            )
    return lines


def dev_table(result: dict) -> list[str]:
    """What the rule saw: dev Kendall of every method and interpolation step."""
    general = result["general"]
    lines = [
        "| rows | setting | in-domain dev | general dev | within 0.005 |",
        "|---|---|---|---|---|",
        f"| | general metric | {general['in_domain_dev']:.4f} | {general['general_dev']:.4f} | |",
    ]
    for n, size in result["sizes"].items():
        alphas = size.get("alphas", {})
        rows = [(m, size["methods"][m]) for m in ORDER if m in size["methods"] and m not in alphas]
        for method, chosen in alphas.items():
            rows += [(f"{method}, alpha {a}", r) for a, r in chosen["grid"].items() if a not in ("0.0", "1.0")]
        for name, r in rows:
            keep = "yes" if within_tolerance(r["general_dev"], general["general_dev"]) else "no"
            lines.append(f"| {n} | {name} | {r['in_domain_dev']:.4f} | {r['general_dev']:.4f} | {keep} |")
    return lines


def report(state: dict, out: Path) -> None:
    """``results.md`` and ``in_house_tradeoff.png`` under ``out``; the tables are printed too."""
    lines = [
        f"Chosen for the recipe (kept in every domain, best mean in-house dev gain, 1,000 rows): "
        f"**{state.get('chosen_for_recipe')}**",
        "",
    ]
    for domain, result in state.get("domains", {}).items():
        lines += [f"## {domain}", "", f"Chosen on dev at 1,000 rows: **{result.get('chosen')}**", ""]
        lines += test_table(result) + ["", "What the rule saw (dev sets only):", ""] + dev_table(result) + [""]
    (out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    if state.get("domains"):
        plot(state["domains"], out / "in_house_tradeoff.png")


def plot(domains: dict, path: Path) -> None:
    """In-domain test gain against general test change, one point per method and size, per domain."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(domains), figsize=(6.4 * len(domains), 5.8), squeeze=False)
    for ax, (domain, result) in zip(axes[0], domains.items()):
        for colour, (method, marker) in enumerate(MARKERS.items()):
            points = [(s["methods"][method], n) for n, s in result["sizes"].items() if method in s.get("methods", {})]
            if not points:
                continue
            x = [p["general_test"]["change"] for p, _ in points]
            y = [p["in_domain_test"]["change"] for p, _ in points]
            sizes = [20 + 25 * i for i in range(len(points))]
            ax.scatter(x, y, s=sizes, marker=marker, color=f"C{colour}", label=method, alpha=0.85)
            for xi, yi, (_, n) in zip(x, y, points):
                ax.annotate(n, (xi, yi), fontsize=6, xytext=(3, 3), textcoords="offset points")
        chosen = result.get("chosen")
        picked = result["sizes"].get("1000", {}).get("methods", {}).get(chosen)
        if picked:
            ax.scatter(
                [picked["general_test"]["change"]],
                [picked["in_domain_test"]["change"]],
                s=260,
                facecolors="none",
                edgecolors="red",
                linewidths=1.5,
                label="chosen on dev (1000 rows)",
            )
        ax.axvline(-TOLERANCE, color="grey", linestyle=":", linewidth=1, label="forgetting 0.005")
        ax.axhline(TARGET_GAIN, color="grey", linestyle="--", linewidth=1, label="target gain +0.03")
        ax.axhline(0.0, color="black", linewidth=0.5)
        ax.set_title(f"{domain}: in-house test against general test (rows annotated)", fontsize=9)
        ax.set_xlabel("general test Kendall change (forgetting to the left)")
        ax.set_ylabel("in-house test Kendall gain over the general metric")
    legend = {}  # one legend for every panel, below them: a method absent from one domain still shows
    for ax in axes[0]:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
