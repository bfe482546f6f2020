"""mt-metrics-eval side of the meta-evaluation parity benchmark; runs ONLY in its own venv (``.venv-mtme``,
made by ``benchmarks/meta_eval_parity.py`` from a local snapshot of google-research/mt-metrics-eval).

    .venv-mtme/bin/python benchmarks/peers/mtme_peer.py INPUT.json

INPUT holds, per test set: ``human`` and ``metrics`` as systems x items matrices (null where a system
has no rating of an item, flattened system by system as mt-metrics-eval packs them), ``num_sys``, the
global acc_eq's ``sample_rate`` and ``seed``, and the permutation test's ``k`` and ``seed``. Prints one
JSON line with every measure as mt-metrics-eval computes it.
"""

import json
import sys

import numpy as np
from mt_metrics_eval import stats


def measures(test: dict) -> dict:
    gold, num_sys = test["human"], test["num_sys"]
    out = {}
    for name, metric in test["metrics"].items():
        corr = stats.Correlation(num_sys, gold, metric)
        acc, eps, _ = stats.KendallWithTiesOpt(gold, metric, "acc23", num_sys, "item", 1.0)
        np.random.seed(test["seed"])
        flat_gold, flat_metric = stats.filter_gold_nones(gold, metric)
        acc_all, eps_all, _ = stats.KendallWithTiesOpt(flat_gold, flat_metric, "acc23", 1, "none", test["sample_rate"])
        row = {
            "acc_eq_item": acc,
            "epsilon_item": eps,
            "acc_eq_none": acc_all,
            "epsilon_none": eps_all,
            "kendall_b": stats.KendallVariants(flat_gold, flat_metric, "b")[0],
            "kendall_b_item": corr.Kendall(average_by="item", variant="b")[0],
            "acc23_eps0_item": corr.KendallVariants(average_by="item", variant="acc23")[0],
        }
        if test.get("complete"):
            row["spa"] = corr.PairwiseConfidenceError()[0]
        out[name] = row
    names = list(test["metrics"])
    if len(names) >= 2:
        a, b = (stats.Correlation(num_sys, gold, test["metrics"][n]) for n in names[:2])
        np.random.seed(test["perm_seed"])
        p, delta, k, _ = stats.PairwisePermutationSigDiff(b, a, "acc23", "item", test["k"])
        out["_permutation"] = {"p": p, "delta": delta, "k": k, "better": names[0], "worse": names[1]}
    size = test["num_items"]
    rows = lambda values, s: values[s * size : (s + 1) * size]  # noqa: E731
    sys_gold = [np.mean([v for v in rows(gold, s) if v is not None]) for s in range(num_sys)]
    for name, metric in test["metrics"].items():
        sys_metric = [
            np.mean([m for m, g in zip(rows(metric, s), rows(gold, s)) if g is not None]) for s in range(num_sys)
        ]
        agree, pairs = stats.Agreement(sys_gold, sys_metric)
        out[name]["sys_accuracy"] = agree / pairs
    return out


def main() -> None:
    tests = json.loads(open(sys.argv[1], encoding="utf-8").read())
    print(json.dumps({name: measures(test) for name, test in tests.items()}, default=float))


if __name__ == "__main__":
    main()
