"""One run's RUN (a ``summary.json`` entry, :class:`specdash.results.RunSummary`): the request figures, what
the server said it ran, its adaptive fields, the client's load and the post-launch verification, joined in
one place (:meth:`SummaryMixin._summarize`, a mixin of :class:`specdash.bench.runner.ProfileRun`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specdash.bench.load import request_shape
from specdash.launch import effective_from_server_info
from specdash.results import ClientLoad, RunSummary
from specdash.sglang.effective import SpecSettings

if TYPE_CHECKING:
    from specdash.collect.tiers import TierStats


class SummaryMixin:
    """``_summarize``: the RUN of :class:`~specdash.bench.runner.ProfileRun`'s measured point."""

    profile: Any
    suite: Any
    opt: Any
    server: Any
    launch: Any
    stats: Any
    rundir: Any
    prompt_format: dict
    metrics_error: Any
    server_info_errors: Any
    _log_start: int | None
    _log_base: int

    def _summarize(self, info, info_after, metrics_before, metrics_after, concurrency, max_tokens) -> RunSummary:
        from specdash.bench.adaptive import run_fields
        from specdash.eagle3.verify import verify_server
        from specdash.profile import server_flags
        from specdash.sglang.metrics import parse_metrics, server_accept_length

        server_al = None
        if metrics_before and metrics_after:
            server_al = server_accept_length(parse_metrics(metrics_before), parse_metrics(metrics_after))
        effective = effective_from_server_info(info)
        log_lines = self.server.log_lines() if self.server is not None else []
        version, _ = self.profile.judged_version(cli=self.opt.sglang_version, server=info.get("version"))
        envs = (self.profile.env, os.environ) if self.launch is not None else (self.profile.env,)
        adaptive = run_fields(
            flags=server_flags(self.profile), server_info=info, version=version,
            log_lines=log_lines if self.server is not None else None,
            window_start=self._log_start if self._log_start is not None else len(log_lines),
            log_base=self._log_base, metrics_before=metrics_before, metrics_after=metrics_after, envs=envs)
        depth = _position_depth(effective, adaptive.tiers if adaptive.enabled else None)
        s = self.stats.summary(**depth)
        if adaptive.enabled:  # the records' accept rate divides by the launch draft tokens
            ppr = adaptive.proposed_per_round
            s = self.stats.summary(proposed_per_round=ppr, **depth) if ppr is not None else {**s, "accept_rate": None}
        s.update(self.stats.goodput(self.opt.goodput))
        ver = verify_server(
            self.profile, info_after or info, log_lines, self.stats.verify_records(),
        )
        return {
            "profile": self.profile.name,
            "profile_path": str(self.profile.path) if self.profile.path else None,
            "simulated": bool(info.get("simulated")) or self.profile.server.launcher == "sim",
            "acceptance_simulated": adaptive.acceptance_simulated,
            "sglang_version": info.get("version"),
            "effective": effective,
            "suite": self.suite.name,
            "prompt_format": self.prompt_format["format"],
            "prompt_format_warning": self.prompt_format.get("warning"),
            "concurrency": concurrency,
            "max_tokens": max_tokens,
            "request_shape": request_shape(self.suite, max_tokens),
            **self._load_fields(),
            **s,
            "server_accept_length": server_al,
            **client_load(s, getattr(self, "_client_cpu", None)),
            "metrics_error": self.metrics_error,
            "server_info_errors": self.server_info_errors or None,
            **adaptive.fields(),
            "verification": {"status": ver.status, "findings": [f.to_json() for f in ver.findings]},
            "run_dir": str(self.rundir.path),
        }


#: A client process busier than this fraction of one core over a run (its own CPU seconds ÷ wall seconds)
#: cannot keep up with the streams: Python runs the event loop on one core.
CLIENT_CPU_BOUND = 0.9
#: ITL p50 below this fraction of TPOT p50: the events were read in bursts, not as the server sent them.
ITL_BURST_FRACTION = 0.05


def client_load(summary: dict, cpu_fraction: float | None) -> ClientLoad:
    """``client_cpu_fraction`` (specdash's process CPU seconds ÷ wall seconds over the measured requests) and
    ``client_bound``: None, or why the client, not the server, set the pace — its process near a full core
    (≥ :data:`CLIENT_CPU_BOUND`), or ITL p50 below :data:`ITL_BURST_FRACTION` of TPOT p50 (e.g. 0.00 ms beside
    4 ms: streamed events waited in the socket and were read together, so the gaps between them are the
    client's, not SGLang's; an ``ignore_eos`` run with ``--stream-interval`` > 1 also batches events, which
    TPOT would show too).  Either way the latencies measure the client: lower the concurrency, or run the
    load from another process or machine."""
    why = []
    if cpu_fraction is not None and cpu_fraction >= CLIENT_CPU_BOUND:
        why.append(f"specdash's process used {cpu_fraction:.0%} of a core while sending")
    itl = (summary.get("itl_ms") or {}).get("p50")
    tpot = (summary.get("tpot_ms") or {}).get("p50")
    if itl is not None and tpot and tpot > 0.5 and itl < ITL_BURST_FRACTION * tpot:
        why.append(f"ITL p50 {itl:.2f} ms beside TPOT p50 {tpot:.2f} ms: the events were read in bursts")
    return {"client_cpu_fraction": cpu_fraction,
            "client_bound": ("; ".join(why) + " — the client, not the server, set the pace: lower the concurrency "
                             "or drive the load from another process") if why else None}


def _position_depth(effective: dict, tiers: Sequence[TierStats] | None) -> dict:
    """``steps`` / ``draft_tokens`` for ``accept_by_position`` (:func:`specdash.sglang.positions.accept_fields`):
    the effective settings read back from the server; under adaptive speculation whose tiers ran at
    different step counts, the shallowest tier's (a chain): the pooled histogram cannot tell a round of
    an S-step tier that accepted all S drafts (it never reached S + 1) from one that was rejected at
    S + 1, so only the positions every tier drafted are exact."""
    read = SpecSettings.from_effective(effective)
    ran = sorted({int(t.speculative_num_steps) for t in tiers or ()
                  if t.speculative_num_steps and (t.verify_rounds or 0) > 0})
    if len(ran) > 1:
        return {"steps": ran[0], "draft_tokens": ran[0] + 1}
    return {"steps": read.steps, "draft_tokens": read.draft_tokens}
