#!/usr/bin/env python3
"""The advisor's acceptance model against the real draft: predicted vs measured for settings it never saw.

For each way of choosing what the advisor is told (SGLang's own start 3/1/4 alone; one deep chain; every
chain; every launch but one, for each launch), it fits specdash's acceptance model
(:func:`specdash.advisor.acceptance.fit_acceptance`: α, d, β with the measured per-position counts as data)
on those launches only, then predicts every launch it was NOT given — accept length with its 95 % interval
(400 posterior draws) and, for chains, the conditional acceptance of each draft position — and prints the
error.  Past the deepest position the given launches reached, the model keeps the last measured rate and
widens its interval (``specdash/advisor/acceptance.py``, "Past the deepest measured position").  Inputs: a real results folder's
run directories (``summary.json`` RUNs under ``runs/`` and ``tunes/``, one folder down or two: the RUNs at
``--concurrency``, default 1; a setting measured on several machines counts once, its first run).

``--tree-model rank`` puts a candidate tree model beside the advisor's on the same splits (the evidence for its
next model change, issue 21): SGLang's own tree built node by node, the target's token by draft rank
(:mod:`specdash.sglang.tree`), with the told chains' pooled per-position acceptance and one parameter ρ fitted on
the told trees (:data:`RANK_PRIOR_RHO` when none is told).

Usage::

    python3 benchmarks/real/advisor_check.py benchmarks/results/real-2026-12-02 [--json]
    python3 benchmarks/real/advisor_check.py benchmarks/results/real-2026-12-03 --concurrency 4 --json
    python3 benchmarks/real/advisor_check.py benchmarks/results/real-2026-12-03 --concurrency 4 --tree-model rank
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def load(folder: Path, concurrency: int = 1) -> list[dict]:
    runs, seen = [], set()
    for s in sorted([*folder.glob("runs/**/summary.json"), *folder.glob("tunes/**/summary.json")]):
        for r in json.loads(s.read_text())["runs"]:
            if ((r.get("effective") or {}).get("speculative_algorithm") == "EAGLE3" and r.get("accept_histogram")
                    and r.get("concurrency", 1) == concurrency and not r.get("tiers") and label(r) not in seen):
                seen.add(label(r))
                runs.append(r)
    return runs


def label(r: dict) -> str:
    e = r["effective"]
    return f"{e['speculative_num_steps']}/{e['speculative_eagle_topk']}/{e['speculative_num_draft_tokens']}"


def predict(train: list[dict], test: list[dict]) -> list[dict]:
    from specdash.advisor.acceptance import (
        expected_accept_length,
        fit_acceptance,
        position_counts,
        tree_branching,
    )
    from specdash.advisor.measurement import Measurement

    fit = fit_acceptance([Measurement.from_run(r) for r in train])
    rng = np.random.default_rng(0)
    a, d, b = fit.draws(400, rng)
    p_draws = fit.prob_draws(a, d, 16, rng)
    out = []
    for r in test:
        m = Measurement.from_run(r)
        st = m.settings
        p = fit.probs(st.steps)
        br = tree_branching(p, st, fit.beta)
        tau = expected_accept_length(p, br, fit.beta)
        q = 1.0 - (1.0 - p_draws[:, :len(br)]) ** (np.asarray(br, float)[None, :] ** b[:, None])
        lo, hi = np.percentile(1.0 + np.cumprod(q, axis=1).sum(axis=1), [2.5, 97.5])
        row = {"setting": label(r), "measured_accept_length": round(r["accept_length"], 3),
               "predicted_accept_length": round(float(tau), 3),
               "predicted_ci95": [round(float(lo), 3), round(float(hi), 3)],
               "error": round(float(tau) - r["accept_length"], 3),
               "measured_depth": fit.depth}
        if st.topk == 1 and r.get("accept_histogram"):
            meas = [round(s / n, 3) if n else None for s, n in position_counts(r["accept_histogram"], st.steps)]
            row["measured_by_position"] = meas
            row["predicted_by_position"] = [round(float(x), 3) for x in p]
        out.append(row)
    return out


RANK_PRIOR_RHO = 0.6


def predict_rank(train: list[dict], test: list[dict]) -> list[dict]:
    """The rank model's predictions for ``test`` from ``train`` (rows as :func:`predict`, no interval)."""
    from scipy.optimize import minimize_scalar

    from specdash.advisor.acceptance import chain_position_counts
    from specdash.advisor.measurement import Measurement
    from specdash.sglang.tree import accept_length as rank_tree_accept_length

    counts = chain_position_counts([Measurement.from_run(r) for r in train])
    if not counts:
        return []
    p = [s / n for s, n in counts]
    p += [p[-1]] * 16  # past the deepest told position the last rate is kept (the advisor's rule where d >= 1)

    def shape(r: dict) -> tuple[int, int, int]:
        e = r["effective"]
        return e["speculative_num_steps"], e["speculative_eagle_topk"], e["speculative_num_draft_tokens"]
    trees = [r for r in train if shape(r)[1] > 1]
    rho = RANK_PRIOR_RHO
    if trees:
        rho = float(minimize_scalar(lambda x: sum((rank_tree_accept_length(*shape(r), p, x) - r["accept_length"]) ** 2
                                                  for r in trees), bounds=(0.01, 0.99), method="bounded").x)
    out = []
    for r in test:
        tau = rank_tree_accept_length(*shape(r), p, rho)
        out.append({"setting": label(r), "measured_accept_length": round(r["accept_length"], 3),
                    "predicted_accept_length": round(tau, 3), "error": round(tau - r["accept_length"], 3),
                    "rho": round(rho, 3), "rho_fitted": bool(trees)})
    return out


def _errors(rows: list[dict]) -> str:
    """The trees' rms and worst error of accept length in ``rows``."""
    e = [r["error"] for r in rows if r["setting"].split("/")[1] != "1"]
    return f"trees: rms error {float(np.sqrt(np.mean(np.square(e)))):.3f}, worst {max(e, key=abs):+.3f}" if e else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--no-leave-one-out", action="store_true", help="only the told-some plans")
    ap.add_argument("--tree-model", choices=("advisor", "rank"), default="advisor",
                    help="rank: the candidate tree model beside the advisor's (module docstring)")
    a = ap.parse_args(argv)
    runs = load(a.folder, a.concurrency)
    by = {label(r): r for r in runs}
    plans = {
        "told 3/1/4 (SGLang's start) only": ["3/1/4"],
        "told 6/1/7 only": ["6/1/7"],
        "told every chain": [k for k in by if k.split("/")[1] == "1"],
        "told every chain and the trees of steps <= 6": [k for k in by if k.split("/")[1] == "1"
                                                          or int(k.split("/")[0]) <= 6],
    }
    for k in ([] if a.no_leave_one_out else by):
        plans[f"all but {k}"] = [j for j in by if j != k]
    report = {}
    for name, told in plans.items():
        train = [by[k] for k in told if k in by]
        test = [r for k, r in by.items() if k not in told]
        if train and test:
            report[name] = predict(train, test)
            if a.tree_model == "rank":
                report[f"{name} [rank model]"] = predict_rank(train, test)
    if a.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, rows in report.items():
        print(f"{name}: {_errors(rows)}")
        for row in rows:
            extra = ""
            if "measured_by_position" in row:
                extra = f"  positions measured {row['measured_by_position']} predicted {row['predicted_by_position']}"
            ci = " [{:.3f}, {:.3f}]".format(*row["predicted_ci95"]) if "predicted_ci95" in row else ""
            print(f"  {row['setting']:>6}: accept length measured {row['measured_accept_length']:.3f} "
                  f"predicted {row['predicted_accept_length']:.3f}{ci} ({row['error']:+.3f}){extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
