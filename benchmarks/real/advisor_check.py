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

Usage::

    python3 benchmarks/real/advisor_check.py benchmarks/results/real-2026-12-02 [--json]
    python3 benchmarks/real/advisor_check.py benchmarks/results/real-2026-12-03 --concurrency 4 --json
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--no-leave-one-out", action="store_true", help="only the told-some plans")
    a = ap.parse_args(argv)
    runs = load(a.folder, a.concurrency)
    by = {label(r): r for r in runs}
    plans = {
        "told 3/1/4 (SGLang's start) only": ["3/1/4"],
        "told 6/1/7 only": ["6/1/7"],
        "told every chain": [k for k in by if k.split("/")[1] == "1"],
    }
    for k in ([] if a.no_leave_one_out else by):
        plans[f"all but {k}"] = [j for j in by if j != k]
    report = {}
    for name, told in plans.items():
        train = [by[k] for k in told if k in by]
        test = [r for k, r in by.items() if k not in told]
        if train and test:
            report[name] = predict(train, test)
    if a.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, rows in report.items():
        print(f"{name}:")
        for row in rows:
            extra = ""
            if "measured_by_position" in row:
                extra = f"  positions measured {row['measured_by_position']} predicted {row['predicted_by_position']}"
            lo, hi = row["predicted_ci95"]
            print(f"  {row['setting']:>6}: accept length measured {row['measured_accept_length']:.3f} "
                  f"predicted {row['predicted_accept_length']:.3f} [{lo:.3f}, {hi:.3f}] ({row['error']:+.3f}){extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
