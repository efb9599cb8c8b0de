"""How long one decision of the tuner's planner takes over SGLang's whole candidate space.

One decision = a fit of the cost model to the measurements so far plus a prediction for every candidate
(:class:`specdash.advisor.TunePlanner.next_settings`; 922 candidates: steps 1–10, topk 1–16, draft tokens to
64 where a tree holds them).  Measured on the advisor's first held-out scenario with four measurements, after
one warm-up decision (scipy's imports); prints the median and the max of ``--repeats`` decisions in seconds.
The target: well under a second on 2 cores, so a live tune never waits on its own planner.

Usage: ``python benchmarks/planner_speed.py [--repeats 7] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from specdash.advisor import Settings, TunePlanner
from tests.test_advisor import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sc = SCENARIOS[0]
    rng = np.random.default_rng(0)
    planner = TunePlanner(sc.start, 8, baseline=sc.baseline_tok_s())
    ms = [sc.measure(s, rng) for s in (Settings(3, 1, 4), Settings(6, 1, 7), Settings(5, 8, 32), Settings(7, 4, 24))]
    planner.next_settings(ms)  # warm: scipy imports
    took = []
    for _ in range(max(1, a.repeats)):
        t0 = time.perf_counter()
        planner.next_settings(ms)
        took.append(time.perf_counter() - t0)
    res = {"candidates": len(planner.candidates), "repeats": len(took), "median_s": statistics.median(took),
           "max_s": max(took)}
    print(json.dumps(res) if a.json else
          f"one planner decision over {res['candidates']} candidates: median {res['median_s']:.3f} s, "
          f"max {res['max_s']:.3f} s ({res['repeats']} decisions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
