"""The simulator's ground truth of launches that specdash makes itself (a tune's, a sweep's): each launch's
``/sim/truth`` read just before its summary, and what the load of the machine did to its measurement.

A measurement on the wall clock is the simulator's plan stretched by whatever the machine's load did to
the simulator and to the client; the simulator's *model clock* (``model_received`` / ``model_e2e_s`` in its
records, :class:`specdash.sim.engine.Truth`) is the plan itself.  Their ratio over a launch's own requests
is that launch's **load factor** (1.0 on an idle machine less the HTTP overhead, lower under load); how
much it varies across the launches that steered a decision bounds how far the load can have swayed it.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from specdash.bench.runner import ProfileRun


class LaunchTruths:
    """Wraps :meth:`ProfileRun._summarize` (``monkeypatch``) so that every launched simulator's
    ``/sim/truth`` (records included) is kept, by run directory (``by_run``), before its summary."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_run: dict[str, dict] = {}
        real = ProfileRun._summarize
        truths = self.by_run

        def summarize(pr, *a, **kw):
            if pr.launch is not None:
                truths[str(pr.rundir.path)] = httpx.get(pr.launch.base_url + "/sim/truth", timeout=10).json()
            return real(pr, *a, **kw)

        monkeypatch.setattr(ProfileRun, "_summarize", summarize)

    def model_window(self, run_dir: str) -> tuple[int, float]:
        """``(tokens, seconds)`` over the requests of ``run_dir``'s ``requests.jsonl`` (matched by ``rid``):
        their output tokens and the model-clock seconds from the first received to the last finished — the
        run's ``duration_s`` as the simulator planned it."""
        rids = {json.loads(x)["rid"] for x in Path(run_dir, "requests.jsonl").read_text().splitlines()}
        recs = [r for r in self.by_run[str(run_dir)]["requests"] if r["rid"] in rids]
        assert len(recs) == len(rids), run_dir
        lo = min(r["model_received"] for r in recs)
        hi = max(r["model_received"] + r["model_e2e_s"] for r in recs)
        return sum(r["completion_tokens"] for r in recs), hi - lo

    def load_spread(self, rows: list[dict]) -> tuple[float, list[dict]]:
        """How differently the machine's load slowed the launches behind measured rows (a tune report's
        ``measured``, launches only), as a factor ≥ 1 (1: alike, or not at all; a choice by the measured figures
        can miss the best by this factor at most), and per launch ``{"model_s", "wall_s", "extra_s", "factor"}``.

        A launch's wall time (its ``output_tokens ÷ output_tok_s``) is its model time plus extra time: the
        client's and HTTP's share, which an idle machine adds too, and whatever load added.  The least extra
        time of the launches is taken as the idle share; a launch's factor is its wall time had it had only
        that, over its wall time (≤ 1); the spread is the largest factor over the smallest."""
        out = []
        for r in rows:
            if r.get("source") != "launch" or not r.get("run_dir") or not r.get("output_tok_s"):
                continue
            tokens, model_s = self.model_window(r["run_dir"])
            wall_s = tokens / r["output_tok_s"]
            out.append({"model_s": model_s, "wall_s": wall_s, "extra_s": wall_s - model_s})
        assert out, "no launch measured"
        idle = min(x["extra_s"] for x in out)
        for x in out:
            x["factor"] = (x["model_s"] + idle) / x["wall_s"]
        return max(x["factor"] for x in out) / min(x["factor"] for x in out), out
