"""The GPU benchmark's figures from its timings: per side and setting, rows/s (median, min, max), the
shares of the measured and the rated bf16 rate, the score difference to the peer's fp32 scores and the
dev Kendall after training; the ratios at equal precision class and at each side's best; the targets;
and the markdown table.
"""

from __future__ import annotations

import numpy as np

from lightning_metrics.correlation import kendall

# the peer's settings in the half-precision class (scoring, BERTScore, training)
HALF = ("fp16", "bf16 (autocast)", "fp16 (autocast)", "16-mixed", "bf16-mixed")
# equal precision classes: (name, our setting, the peer's settings in that class)
CLASSES = {
    "scoring": [
        ("bf16 vs fp16/bf16", "bf16", HALF),
        ("fp32+tf32", "fp32+tf32", ("fp32+tf32",)),
        ("fp32", "fp32", ("fp32",)),
    ],
    "training": [("bf16 vs fp16/bf16", "bf16-mixed", HALF), ("fp32+tf32", "32-true", ("32",))],
}
CLASSES["BERTScore"] = CLASSES["scoring"]
HEADLINE = "bf16 vs fp16/bf16"


def summarise(work: str, shape: str, layout: str, res: dict, rate: float | None, rated: float | None) -> dict:
    """One row of the results: every side's figures, the ratios, and the FLOP count they rest on."""
    reference = (res["peer"].get("fp32") or res["peer"].get("32") or {}).get("scores")
    sides = {}
    for side, settings in (("ours", res["ours"]), ("peer", res["peer"])):
        for setting, timing in settings.items():
            sides[f"{side} {setting}"] = _side(timing, res["flops"], rate, rated, reference, res.get("human"))
    row = {"work": work, "shape": shape, "layout": layout, "rows": _rows(res), "gflop": res["flops"] / 1e9}
    return {**row, "peer_name": res["peer_name"], "sides": sides, "ratios": ratios(work, res)}


def _rows(res: dict) -> int:
    return next(t["rows"] for t in res["ours"].values())


def _side(timing: dict, flops: float, rate, rated, reference, human) -> dict:
    seconds = timing["seconds"]
    out = {k: timing[k] for k in ("seconds", "min", "max", "runs", "rows") if k in timing}
    out["rows_per_s"] = timing["rows"] / seconds
    out["share_measured"] = flops / seconds / rate if rate else None
    out["share_rated"] = flops / seconds / rated if rated else None
    out.update({k: timing[k] for k in ("batch", "sweep", "dtype", "steps") if k in timing})
    if reference is not None and "scores" in timing:
        out["max_abs_diff_to_peer"] = float(np.max(np.abs(np.asarray(timing["scores"]) - np.asarray(reference))))
    if human is not None and timing.get("dev_scores") is not None:
        out["dev_kendall"] = kendall(timing["dev_scores"], human)
    return out


def ratios(work: str, res: dict) -> dict:
    """Peer seconds over ours per equal precision class (the peer's fastest setting in the class), and
    each side at its best; a class either side lacks is left out."""
    out = {}
    for name, ours, peer_class in CLASSES[work]:
        peer = {k: v for k, v in res["peer"].items() if k in peer_class}
        if ours in res["ours"] and peer:
            fastest = min(peer, key=lambda k: peer[k]["seconds"])
            out[name] = _ratio(ours, res["ours"][ours], fastest, peer[fastest])
    if res["peer"]:
        ours = min(res["ours"], key=lambda k: res["ours"][k]["seconds"])
        peer = min(res["peer"], key=lambda k: res["peer"][k]["seconds"])
        out["each at its best"] = _ratio(ours, res["ours"][ours], peer, res["peer"][peer])
    return out


def _ratio(ours: str, our_timing: dict, peer: str, peer_timing: dict) -> dict:
    return {"ours": ours, "peer": peer, "ratio": peer_timing["seconds"] / our_timing["seconds"]}


# -- targets --------------------------------------------------------------------------------------
def targets(table: list[dict]) -> list[tuple[str, float | None, float, bool | None]]:
    """(target, measured, threshold, met) for each of the GPU-speed targets found in ``table``."""
    rows = {(r["work"], r["shape"], r["layout"]): r for r in table if "error" not in r}
    out = []
    for layout, threshold in (("wmt", 3.0), ("distinct", 1.5)):
        row = rows.get(("scoring", "large", layout))
        out.append(_target(f"scoring, large, {layout}, {HEADLINE}", _get(row, HEADLINE), threshold))
    row = rows.get(("scoring", "large", "wmt"))
    share = row["sides"].get("ours bf16", {}).get("share_measured") if row else None
    out.append(_target("scoring, large, share of the measured bf16 rate", share, 0.25))
    for shape in ("minilm", "large"):
        for layout in ("wmt", "distinct"):
            row = rows.get(("BERTScore", shape, layout))
            out.append(_target(f"BERTScore, {shape}, {layout}, each at its best", _get(row, "each at its best"), 2.0))
        row = rows.get(("training", shape, "wmt"))
        out.append(_target(f"training, {shape}, each at its best", _get(row, "each at its best"), 2.0))
    for work in ("scoring", "BERTScore", "training"):
        row = rows.get((work, "large", "wmt"))
        out.append(_target(f"{work}, large: bf16 over fp32 speed", _bf16_gain(row, work), 1.0))
    return out


def _get(row: dict | None, name: str) -> float | None:
    return row["ratios"].get(name, {}).get("ratio") if row else None


def _bf16_gain(row: dict | None, work: str) -> float | None:
    if not row:
        return None
    fast, slow = ("ours bf16-mixed", "ours 32-true") if work == "training" else ("ours bf16", "ours fp32")
    if fast not in row["sides"] or slow not in row["sides"]:
        return None
    return row["sides"][slow]["seconds"] / row["sides"][fast]["seconds"]


def _target(name: str, measured: float | None, threshold: float) -> tuple:
    return name, measured, threshold, None if measured is None else measured >= threshold


# -- markdown -------------------------------------------------------------------------------------
def markdown(table: list[dict], meta: dict) -> str:
    """The results as markdown: the run, the headline ratios, the targets, then every side's figures."""
    rate = f"{meta['bf16_tflops']:.0f}" if meta.get("bf16_tflops") else "n/a"
    rated = f"{meta['rated_bf16_tflops']:.0f}" if meta.get("rated_bf16_tflops") else "n/a"
    lines = [
        f"# GPU benchmark, {meta['date']}, {meta['device']}, torch {meta['torch']}",
        "",
        f"bf16 matrix-product rate: measured {rate} TFLOP/s, rated (dense) {rated} TFLOP/s. Each time is the median "
        f"of {meta['repeats']} timed passes (min and max beside it), after a warm-up of {meta['warmup']} rows "
        "through the same API on both sides. Ratios are the peer's seconds over ours on the same rows.",
        "",
        "## Ratios",
        "",
        "| work | shape | layout | rows | " + " | ".join(_ratio_names()) + " |",
        "|---|---|---|---|" + "---|" * len(_ratio_names()),
    ]
    lines += [_ratio_line(r) for r in table]
    lines += ["", "## Targets", "", "| target | measured | needs | met |", "|---|---|---|---|"]
    for name, measured, threshold, met in targets(table):
        shown = "not measured" if measured is None else _number(measured, name)
        lines.append(f"| {name} | {shown} | {_number(threshold, name)} | {_met(met)} |")
    lines += ["", "## Every side", "", "| " + " | ".join(SIDE_COLUMNS) + " |", "|---" * len(SIDE_COLUMNS) + "|"]
    for row in table:
        lines += _side_lines(row)
    sweeps = [line for row in table for line in _sweep_lines(row)]
    if sweeps:
        lines += ["", "## The peers' batch-size sweeps (seconds per pass)", "", *sweeps]
    return "\n".join(lines) + "\n"


SIDE_COLUMNS = ("work", "shape", "layout", "rows", "side", "batch", "seconds (min-max)", "rows/s",
                "% measured bf16", "% rated bf16", "max abs diff to peer fp32", "steps", "dev Kendall")  # fmt: skip


def _ratio_names() -> list[str]:
    names = [name for classes in CLASSES.values() for name, _, _ in classes]
    return list(dict.fromkeys(names)) + ["each at its best"]


def _ratio_line(row: dict) -> str:
    head = f"| {row['work']} | {row['shape']} | {row['layout']} | {row.get('rows', '')} |"
    if "error" in row:
        return head + f" failed: {row['error'][:200]} |" + " |" * (len(_ratio_names()) - 1)
    cells = []
    for name in _ratio_names():
        r = row["ratios"].get(name)
        cells.append(f"{r['ratio']:.2f}× ({r['ours']} / {r['peer']})" if r else "")
    return head + " " + " | ".join(cells) + " |"


def _side_lines(row: dict) -> list[str]:
    if "error" in row:
        return []
    lines = []
    peer = row["peer_name"].split(" ")[0]
    for label, s in row["sides"].items():
        side, setting = label.split(" ", 1)
        who = f"lightning-metrics {setting}" if side == "ours" else f"{peer} {setting}"
        cells = [row["work"], row["shape"], row["layout"], str(s["rows"]), who, str(s.get("batch", "")),
                 f"{s['seconds']:.3f} ({s['min']:.3f}-{s['max']:.3f})", f"{s['rows_per_s']:,.0f}",
                 _percent(s["share_measured"]), _percent(s["share_rated"]), _diff(s.get("max_abs_diff_to_peer")),
                 str(s.get("steps", "")), f"{s['dev_kendall']:.3f}" if "dev_kendall" in s else ""]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _sweep_lines(row: dict) -> list[str]:
    lines = []
    for label, s in row.get("sides", {}).items():
        if s.get("sweep"):
            sweep = ", ".join(f"{batch}: {seconds:.3f}" for batch, seconds in s["sweep"].items())
            where = f"{row['work']}, {row['shape']}, {row['layout']}"
            lines.append(
                f"- {where}, {row['peer_name'].split(' ')[0]} {label.split(' ', 1)[1]}: {sweep} (chosen: {s['batch']})"
            )
    return lines


def _percent(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.2f}%"


def _diff(x: float | None) -> str:
    return "" if x is None else f"{x:.1e}"


def _number(x: float, name: str) -> str:
    return f"{100 * x:.1f}%" if "share" in name else f"{x:.2f}×"


def _met(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: ""}[met]
