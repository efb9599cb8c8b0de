"""How long the drafter self-test takes on the tiny draft the tests use (a speed figure, kept out of the tests:
on a loaded machine it is whatever the scheduler gives the process).

Builds the tiny draft and sample of ``tests/test_selftest.py`` (``make_tiny_draft_and_sample``, seed 7), runs
:func:`specdash.eagle3.selftest.run_selftest` ``--repeats`` times and prints each time, the median and the max in
seconds (``--json`` for one JSON line).  It used to be bounded at 10 s in the test; on 2 idle cores it takes
well under that.  Needs torch (the ``drafter`` extra).

Usage: ``python benchmarks/selftest_time.py [--repeats 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdash.eagle3.sample import make_tiny_draft_and_sample
from specdash.eagle3.selftest import run_selftest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    times = []
    with tempfile.TemporaryDirectory() as d:
        draft, sample = make_tiny_draft_and_sample(Path(d), seed=7)
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            rep = run_selftest(draft, sample)
            times.append(time.perf_counter() - t0)
            assert rep.works
    out = {"seconds": [round(t, 3) for t in times], "median_s": round(statistics.median(times), 3),
           "max_s": round(max(times), 3)}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"self-test on the tiny draft: {', '.join(f'{t:.2f}' for t in times)} s "
              f"(median {out['median_s']:.2f} s, max {out['max_s']:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
