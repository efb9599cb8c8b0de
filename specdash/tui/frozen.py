"""Fixed, deterministic dashboard data for SVG snapshot tests (no server, no clock).

:func:`frozen_view` builds a :class:`~specdash.tui.state.ViewState` that looks like two
minutes of a healthy simulated EAGLE3 run (``healthy``) or of an EAGLE3 draft served as ``EAGLE``
(``wrong_algo``: preflight ALGO_MISMATCH, then VERIFY_COLLAPSE).  Every number comes
from closed-form expressions so the pictures never change between runs.  Findings are
written here (not produced by the doctor) so a wording change in the rules does not break
the UI snapshots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specdash.collect.gpu import GpuProcess, GpuSample
from specdash.collect.proc import ProcSample
from specdash.collect.snapshot import (
    DecodeWindow,
    GpuPoint,
    GpuView,
    LiveSnapshot,
    LogEntry,
    MetricsSample,
    RequestSample,
    TierChange,
    TierView,
)
from specdash.collect.tiers import TierStats
from specdash.eagle3.findings import Finding
from specdash.tui.session import LaunchInfo, LoadStatus, ServerState
from specdash.tui.state import ViewState

NOW = 10_000.0



@dataclass
class _Report:
    findings: list
    status: str = "ok"
    sglang_version: str = "0.5.23"
    version_source: str = "assumed"
    acceptance: str | None = None
    accept_length: float | None = None
    tokens: int = 0

    @property
    def has_errors(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def codes(self, severity: str | None = None) -> list[str]:
        return [f.code for f in self.findings if severity is None or f.severity == severity]


@dataclass(frozen=True)
class _Adj:
    field: str
    asked: object
    effective: object
    reason: str
    log_line: str = ""


ARGV = ["python", "-m", "specdash.sim", "--model-path", "sim:llama-3.1-8b", "--mem-fraction-static", "0.85",
        "--host", "127.0.0.1", "--port", "30000", "--enable-metrics", "--speculative-algorithm", "{algo}",
        "--speculative-draft-model-path", "sim:llama-3.1-8b-eagle3", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--sim-scenario", "healthy",
        "--sim-seed", "1"]


def _launch(algo: str, ready: float | None) -> LaunchInfo:
    eff = {"speculative_algorithm": algo, "speculative_num_steps": 3, "speculative_eagle_topk": 1,
           "speculative_num_draft_tokens": 4}
    return LaunchInfo(
        argv=[w.replace("{algo}", algo) for w in ARGV],
        env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}, shell_line="",
        asked=dict(eff) | {"max_running_requests": None}, effective=eff,
        adjustments=[_Adj("max_running_requests", None, 48, "speculative default",
                          "Max running requests is reset to 48 for speculative decoding.")],
        rejections=[], base_url="http://127.0.0.1:30000", run_dir=None, started_at=NOW - 130.0,
        time_to_ready_s=ready,
    )


def _log(collapsed: bool) -> tuple[LogEntry, ...]:
    lines = [
        ("other", "[2026-05-10 12:00:00] server_args=ServerArgs(model_path='sim:llama-3.1-8b', …) [simulated]"),
        ("adjustment", "[2026-05-10 12:00:00] Max running requests is reset to 48 for speculative decoding. You "
                       "can override this by explicitly setting --max-running-requests."),
        ("other", "[2026-05-10 12:00:01] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
                  "avail mem=63.12 GB, mem usage=14.96 GB."),
        ("other", "[2026-05-10 12:00:02] max_total_num_tokens=412160, chunked_prefill_size=8192, "
                  "max_prefill_tokens=16384, max_running_requests=48, context_len=131072, available_gpu_mem=7.10 GB"),
        ("warning", "[2026-05-10 12:00:02] WARNING: the draft's max_position_embeddings (2048) is below the "
                    "context length (131072)"),
        ("ready", "[2026-05-10 12:00:03] The server is fired up and ready to roll!"),
    ]
    al = 1.0 if collapsed else 2.9
    ar = 0.0 if collapsed else 0.63
    for i in range(24):
        kind = "prefill" if i % 6 == 0 else "decode"
        if kind == "prefill":
            lines.append((kind, f"[2026-05-10 12:00:{10 + i:02d}] Prefill batch, #new-seq: 1, #new-token: 14, "
                                "#cached-token: 0, token usage: 0.00, #running-req: 3, #queue-req: 0"))
        else:
            lines.append((kind, f"[2026-05-10 12:00:{10 + i:02d}] Decode batch, #running-req: 4, #token: 2480, "
                                f"token usage: 0.01, accept len: {al + 0.05 * math.sin(i):.2f}, accept rate: "
                                f"{ar:.2f}, cuda graph: True, gen throughput (token/s): "
                                f"{(260 if collapsed else 612) + 9 * math.sin(i):.2f}, #queue-req: 0"))
    if collapsed:
        lines.insert(4, ("error", "[2026-05-10 12:00:01] ERROR: draft fc skipped: input width 4096 == hidden_size "
                                  "(EAGLE3 head served as EAGLE)"))
    return tuple(LogEntry(i + 1, k, t) for i, (k, t) in enumerate(lines))


def _adaptive_tier() -> TierView:
    """An adaptive server alternating steps 3 and 1 every 15 s (launched at steps 3), now at 1."""
    history = tuple(TierChange(NOW - 120 + 15 * i, 3 if i % 2 == 0 else 1, 4 if i % 2 == 0 else 2,
                               "server_info" if i == 0 else "switch line") for i in range(8))
    per_tier = (
        TierStats(1, 2, verify_rounds=4210, output_tokens=8378, accept_length=1.99, accept_rate=0.99,
                  output_tok_s=664.0, share=0.52, windows=4, lines=4200, iterations=4200, timed_s=12.6,
                  timing="clean"),
        TierStats(3, 4, verify_rounds=3890, output_tokens=11281, accept_length=2.9, accept_rate=0.633,
                  output_tok_s=612.0, share=0.48, windows=4, lines=3880, iterations=3880, timed_s=18.4,
                  timing="clean"),
    )
    return TierView(adaptive=True, steps=1, draft_tokens=2, source="switch line", launch_steps=3,
                    since=history[-1].t, switches=7, history=history, per_tier=per_tier, log=True)


def frozen_snapshot(scenario: str = "healthy") -> LiveSnapshot:
    """Two minutes of collected data at fixed values (see module docstring); ``adaptive`` is
    ``healthy`` on a ``--speculative-adaptive`` server alternating steps 3 and 1."""
    collapsed = scenario == "wrong_algo"
    base_tok = 258.0 if collapsed else 610.0
    al = 1.0 if collapsed else 2.9
    metrics = tuple(
        MetricsSample(t=NOW - 120 + i, tok_s=(base_tok + 35 * math.sin(i / 7.0) + 12 * math.cos(i / 2.3)) if i else None,
                      tok_s_source="decode tokens", running=4.0 if i > 5 else 0.0, queued=float(i % 9 == 0),
                      accept_length=al + (0 if collapsed else 0.12 * math.sin(i / 5.0)),
                      accept_rate=0.0 if collapsed else 0.63 + 0.04 * math.sin(i / 5.0), gen_throughput=base_tok,
                      token_usage=0.01)
        for i in range(121))
    decode = tuple(DecodeWindow(t=NOW - 118 + 2 * i, running=4, queued=0,
                                accept_length=al + (0 if collapsed else 0.15 * math.sin(i / 3.0)),
                                accept_rate=0.0 if collapsed else 0.63, gen_tok_s=base_tok)
                   for i in range(59))
    requests = tuple(RequestSample(t=NOW - 110 + 3.3 * i, ok=True, completion_tokens=256,
                                   tok_s=base_tok / 4 + 6 * math.sin(i), ttft_ms=21.0 + 2 * math.cos(i),
                                   tpot_ms=(1000.0 * 4 / base_tok), accept_length=al + (0 if collapsed else 0.2 *
                                                                                       math.sin(i * 1.7)))
                     for i in range(33))
    hist = [330, 0, 0, 0] if collapsed else [61, 74, 92, 207]
    run = dict(  # the RunFigures the dashboard shows (a part of a RUN)
        requests=33, failed_requests=0, output_tokens=8448, duration_s=110.0 * (610 / base_tok) / 8,
        output_tok_s=base_tok * 0.97, ttft_ms={"mean": 21.4, "p50": 21.0, "p90": 23.2, "p99": 24.9},
        tpot_ms={"mean": 4000 / base_tok, "p50": 4000 / base_tok, "p90": 4400 / base_tok, "p99": 4900 / base_tok},
        itl_ms={"mean": 4000 / base_tok, "p50": 3900 / base_tok, "p90": 12000 / base_tok, "p99": 13000 / base_tok},
        accept_length=al if collapsed else 2.91, accept_rate=0.0 if collapsed else 0.636,
        accept_histogram=hist,
    )
    if not collapsed:  # the summary.json RUN field (CONTRACTS, 2026-12-02), from this histogram's rounds
        run["accept_by_position"] = [{"position": 1, "reached": 434, "accepted": 373, "rate": 373 / 434},
                                     {"position": 2, "reached": 373, "accepted": 299, "rate": 299 / 373},
                                     {"position": 3, "reached": 299, "accepted": 207, "rate": 207 / 299}]
        run["accept_by_position_source"] = "histogram"
    gpu = GpuView(status="simulated", devices=(
        GpuSample(index=0, name="NVIDIA H100 80GB HBM3", memory_used_mib=69_632.0, memory_total_mib=81_559.0,
                  utilization_pct=87.0, processes=[GpuProcess(4242, 69_120.0, "specdash.sim")], simulated=True,
                  timestamp=0.0),
    ), server_pids=frozenset({4242}), t=NOW)
    procs = (ProcSample(4242, "python", 18.0, 212.0, 0, "python -m specdash.sim …"),)
    gpu_hist = tuple(GpuPoint(NOW - 118 + 2 * i, "GPU 0", 85.0 + (0.0 if i < 4 else 0.4), 78.0 + 9 * math.sin(i / 3),
                              310.0 + 40 * math.sin(i / 4), 61.0 + i / 12) for i in range(60))
    info = {"speculative_algorithm": "EAGLE" if collapsed else "EAGLE3", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "version": "0.5.23", "simulated": True}
    return LiveSnapshot(
        version=1, taken_at=NOW, url="http://127.0.0.1:30000", metrics=metrics, decode=decode, requests=requests,
        log=_log(collapsed), log_counts={"decode": 20, "prefill": 4, "warning": 1, "adjustment": 1, "ready": 1,
                                          "other": 3, **({"error": 1} if collapsed else {})},
        gpu=gpu, procs=procs, server_info=info, run=run, run_label="seeds-five ×4 (loop)", run_started=NOW - 112,
        run_server_accept_length=al if collapsed else 2.93, errors={}, stale=frozenset(), simulated=True,
        metrics_enabled=True, tier=_adaptive_tier() if scenario == "adaptive" else None, gpu_history=gpu_hist,
    )


CONTEXT_WARNING = Finding(
    "CONTEXT_LEN", "warning",
    "the draft was built for 2048 positions but serves contexts up to 131072",
    "Past its trained length acceptance falls; long prompts can be slower than without speculation.",
    "bucket results by input length, or use a draft trained on longer sequences")
SPEC_INFO = Finding("SPEC_ARGS", "info", "max_running_requests not set: SGLang uses 48 with speculation",
                     "", "pass --max-running-requests to change it")
ALGO_ERROR = Finding(
    "ALGO_MISMATCH", "error",
    "the draft is an EAGLE3 head (fc in_features 12288 = 3 × hidden 4096) but it is served with "
    "--speculative-algorithm EAGLE",
    "With EAGLE the draft's fc is skipped silently and every draft token is rejected: accept length 1.00.",
    'set [speculative] algorithm = "EAGLE3" (--speculative-algorithm EAGLE3) with the same draft')
COLLAPSE = Finding(
    "VERIFY_COLLAPSE", "error", "accept length 1.00 over 8448 tokens (≤ 1.05): speculation accepts nothing",
    "A wiring fault (algorithm, weight keys, aux layers, d2t, lm_head) or an untrained draft.",
    "relaunch with --speculative-algorithm EAGLE3; `specdash draft selftest` separates the two causes")


def frozen_view(scenario: str = "healthy", *, profile=None) -> ViewState:
    """The :class:`ViewState` for ``healthy``, ``adaptive`` (healthy, adaptive tiers), ``wrong_algo``
    (after a forced launch) or ``wrong_algo_preflight`` (the findings view before any launch)."""
    if scenario == "wrong_algo_preflight":
        return ViewState(
            server_state=ServerState.IDLE, state_detail="preflight found errors: fix them, or launch anyway",
            profile=profile, preflight=_Report([ALGO_ERROR, CONTEXT_WARNING, SPEC_INFO]),
            launch=_launch("EAGLE", None), load=LoadStatus(concurrency=4, suite="seeds-five"), mode="launch",
            now=NOW)
    collapsed = scenario == "wrong_algo"
    snap = frozen_snapshot(scenario)
    algo = "EAGLE" if collapsed else "EAGLE3"
    return ViewState(
        snapshot=snap, server_state=ServerState.READY,
        state_detail=f"{'demo-wrong-algo' if collapsed else 'demo-eagle3'} ready in 2.4 s on http://127.0.0.1:30000",
        profile=profile,
        preflight=_Report([ALGO_ERROR, CONTEXT_WARNING, SPEC_INFO] if collapsed else [CONTEXT_WARNING, SPEC_INFO]),
        launch=_launch(algo, 2.4),
        verification=_Report([COLLAPSE] if collapsed else [], status="failed" if collapsed else "ok",
                             acceptance="collapsed" if collapsed else "ok", accept_length=1.0 if collapsed else 2.91,
                             tokens=8448),
        load=LoadStatus(running=True, loop=True, concurrency=4, done=33, suite="seeds-five", max_tokens=256),
        baseline_tok_s=None if collapsed else 262.0, baseline_label="(demo-baseline: suite seeds-five, concurrency 4)", mode="demo",
        url="http://127.0.0.1:30000", startup_log=tuple(e.text for e in snap.log[:6]), now=NOW,
    )
