"""Open-loop load accuracy: does ``specdash --bench --request-rate R`` deliver R requests/s?

Launches the simulator profile (default ``demo-eagle3``: the healthy 8B + EAGLE-3 scenario in
real time), sends the suite repeated to fill ``--duration`` seconds at ``--request-rate``
(Poisson arrivals, or gamma with ``--burstiness``, seeded as SGLang's bench_serving.py and vLLM's
``bench serve`` do) and prints the asked vs the achieved rate (requests sent − 1 over the first
→ last send), the request throughput (finished requests over first send → last response), and
how late each send left against its scheduled time (p50 / p99 / max).  The issue's target: the
achieved rate within 5 % of the asked one over a 60 s run.

``--no-server``: the open-loop sender alone (:func:`specdash.bench.load.send_suite_rate`) against a fake client
that answers after ``--latency`` s, the figure ``tests/test_load_shapes.py`` used to assert on the wall clock
(100/s within 10 % over 40 sends; the test now runs the sender on a virtual clock): ``--request-rate 100
--duration 0.4 --no-server``.

Usage: ``python benchmarks/request_rate.py [--request-rate 8] [--burstiness 1] [--duration 60]
[--max-tokens 128] [--profile demo-eagle3] [--out DIR] [--no-server [--latency 0.3]] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from specdash.bench.arrivals import arrival_offsets
from specdash.bench.runner import RunOptions, run_one
from specdash.profile import load_profile, load_suite


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--request-rate", type=float, default=8.0)
    ap.add_argument("--burstiness", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals (default 60)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--profile", default="demo-eagle3")
    ap.add_argument("--suite", default="seeds-five")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="parent of the run directory (default: a temporary directory)")
    ap.add_argument("--no-server", action="store_true", help="the sender alone, against a fake client")
    ap.add_argument("--latency", type=float, default=0.3, help="the fake client's answer time (s; --no-server)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.no_server:
        return no_server(a)

    prof, suite = load_profile(a.profile), load_suite(a.suite)
    n_prompts = len(suite.prompts)
    repeats = max(1, math.ceil(a.request_rate * a.duration / n_prompts))
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="specdash-rate-"))
    opts = RunOptions(out_dir=out, repeats=repeats, max_tokens=a.max_tokens, request_rate=a.request_rate,
                      burstiness=a.burstiness, arrival_seed=a.seed,
                      progress=lambda m: None if "/" in m.split("]")[-1][:8] else print(m, file=sys.stderr))
    run, records = asyncio.run(run_one(prof, suite, opts))

    n = repeats * n_prompts
    sched = arrival_offsets(n, a.request_rate, a.burstiness, seed=a.seed)
    t0 = min(r["ts_sent"] for r in records)
    lag_ms = np.array([((r["ts_sent"] - t0) - sched[r["repeat"] * n_prompts + r["prompt_index"]]) * 1000.0
                       for r in records])
    achieved = run["achieved_request_rate"]
    res = {
        "profile": prof.name, "requests": n, "ok": run["requests"], "asked_request_rate": a.request_rate,
        "burstiness": a.burstiness, "achieved_request_rate": achieved,
        "deviation_pct": 100.0 * (achieved - a.request_rate) / a.request_rate,
        "request_throughput": run["request_throughput"], "duration_s": run["duration_s"],
        "send_lag_ms": {"p50": float(np.percentile(lag_ms, 50)), "p99": float(np.percentile(lag_ms, 99)),
                        "max": float(lag_ms.max())},
        "e2e_ms": run["e2e_ms"], "output_tok_s": run["output_tok_s"], "run_dir": run["run_dir"],
    }
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        lag = res["send_lag_ms"]
        print(f"{prof.name}: {n} requests over {a.duration:g} s of arrivals (burstiness {a.burstiness:g}), "
              f"{run['requests']} ok")
        print(f"request rate: asked {a.request_rate:g}/s, achieved {achieved:.3f}/s "
              f"({res['deviation_pct']:+.2f} %; target within 5 %)")
        print(f"request throughput {run['request_throughput']:.3f} req/s over {run['duration_s']:.1f} s; "
              f"send lag vs schedule p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, max {lag['max']:.2f} ms; "
              f"e2e p50 {run['e2e_ms']['p50']:.0f} ms, p99 {run['e2e_ms']['p99']:.0f} ms")
        print(f"run dir: {run['run_dir']}")
    return 0 if abs(res["deviation_pct"]) <= 5.0 else 1


class _FakeResult:
    def __init__(self, sent: float, latency: float) -> None:
        self.sent, self.latency = sent, latency

    def to_json(self) -> dict:
        return {"ok": True, "completion_tokens": 1, "ts_sent": self.sent, "ts_done": self.sent + self.latency}


class _FakeClient:
    """Answers every request after ``latency`` s; records when each was sent (``time.time()``, as the client)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def generate_stream(self, text, params, rid=None, extra=None) -> _FakeResult:
        sent = time.time()
        await asyncio.sleep(self.latency)
        return _FakeResult(sent, self.latency)


def no_server(a: argparse.Namespace) -> int:
    """``--no-server``: :func:`send_suite_rate` against :class:`_FakeClient`; prints the asked vs the achieved
    rate and how late each send left against its schedule."""
    from specdash.bench.load import send_suite_rate
    from specdash.collect.stream import RunStats

    suite = load_suite(a.suite)
    n_prompts = len(suite.prompts)
    n = max(2, round(a.request_rate * a.duration))
    items = [(i % n_prompts, i // n_prompts) for i in range(n)]
    records = asyncio.run(send_suite_rate(_FakeClient(a.latency), suite, items, request_rate=a.request_rate,
                                          burstiness=a.burstiness, seed=a.seed, max_tokens=a.max_tokens))
    sched = arrival_offsets(n, a.request_rate, a.burstiness, seed=a.seed)
    t0 = min(r["ts_sent"] for r in records)
    lag_ms = np.array([((r["ts_sent"] - t0) - (sched[r["repeat"] * n_prompts + r["prompt_index"]] - sched[0]))
                       * 1000.0 for r in records])
    achieved = RunStats(records).send_rate()
    scheduled = (n - 1) / (sched[-1] - sched[0])
    res = {"requests": n, "asked_request_rate": a.request_rate, "scheduled_request_rate": scheduled,
           "achieved_request_rate": achieved, "deviation_pct": 100.0 * (achieved - scheduled) / scheduled,
           "latency_s": a.latency, "send_lag_ms": {"p50": float(np.percentile(lag_ms, 50)),
                                                   "p99": float(np.percentile(lag_ms, 99)),
                                                   "max": float(lag_ms.max())}}
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        lag = res["send_lag_ms"]
        print(f"sender alone, fake client answering in {a.latency:g} s: {n} requests, asked {a.request_rate:g}/s, "
              f"the seeded schedule {scheduled:.3f}/s, achieved {achieved:.3f}/s ({res['deviation_pct']:+.2f} % "
              f"against the schedule)")
        print(f"send lag vs schedule p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, max {lag['max']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
