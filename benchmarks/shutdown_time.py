"""How long the simulated SGLang server takes to stop on SIGTERM with a stream open (a speed figure, kept out
of the tests: on a loaded machine it is whatever the scheduler gives the process).

Starts ``python -m specdash.sim`` (EAGLE3 chain, healthy scenario), opens one long stream, sends SIGTERM once
tokens flow and measures signal → exit; repeats ``--repeats`` times and prints each, the median and the max
in seconds (``--json`` for one JSON line).  The simulator ends open streams at once and exits by itself
within its 1.6 s deadline (``specdash/sim/server.py`` ``_on_signal``).

Usage: ``python benchmarks/shutdown_time.py [--repeats 5] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from specdash.sim.testing import SimProcess

ARGS = ["--model-path", "sim:llama-3.1-8b", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
        "sim:llama-3.1-8b-eagle3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--sim-scenario", "healthy", "--time-scale", "8"]


def once() -> float:
    sim = SimProcess(ARGS).start()
    flowing = threading.Event()

    def stream() -> None:
        body = {"text": "A long story", "sampling_params": {"max_new_tokens": 100000}, "stream": True}
        try:
            with httpx.stream("POST", sim.url + "/generate", json=body, timeout=30) as r:
                for _ in r.iter_bytes():
                    flowing.set()
        except httpx.HTTPError:
            pass

    threading.Thread(target=stream, daemon=True).start()
    if not flowing.wait(30):
        sim.stop(signal.SIGKILL)
        raise SystemExit("no token streamed")
    t0 = time.monotonic()
    sim.proc.send_signal(signal.SIGTERM)
    sim.proc.wait(30)
    return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    took = [once() for _ in range(a.repeats)]
    res = {"shutdown_s": [round(x, 3) for x in took], "median_s": round(statistics.median(took), 3),
           "max_s": round(max(took), 3)}
    print(json.dumps(res) if a.json else "\n".join(f"{k}: {v}" for k, v in res.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
