"""The simulator's ``--speculative-adaptive``: SGLang's tiers, start-up lines and per-tier truth.

The rules are :mod:`specdash.sglang.adaptive` (SGLang's own code restated per release); this
module wires them into the simulated server:

* :class:`AdaptiveSetup` decides at launch what SGLang would (adaptive on, off with its
  ``speculative_adaptive disabled: …`` warning, or a start-up ``ValueError``), rewrites the
  speculative flags the way ``_init_adaptive_speculative_params`` does (0.5.14+), prints
  ``AdaptiveSpeculativeParams initialized …`` and one ``Built adaptive runtime state steps=N:
  elapsed=…s, mem=…GB`` per extra tier, and hands the engine an
  :class:`~specdash.sglang.adaptive.AdaptiveController`.
* :class:`TierTruth` counts, per tier, what ``/sim/truth`` reports (verify rounds, output
  tokens, accept length and rate, decode tok/s).

Start-up figures of the built states follow the golden 0.5.14 recording
(``adaptive_default_c1_c16_c32``: steps 0 / 1 / 7 built in 2.41 / 2.25 / 5.40 s using
0.11 / 0.12 / 0.28 GB; ``adaptive_interleave_1_3``: steps 1 over 8 batch sizes, 2.43 s,
0.07 GB): ``elapsed ≈ 1.9 + 0.5 · steps`` s and ``mem ≈ 0.04 + 0.0025 · max_bs + 0.03 · steps``
GB (model seconds, slept as ``/ time_scale``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdash.sglang.adaptive import (
    AdaptiveConfig,
    AdaptiveConfigError,
    AdaptiveController,
    LaunchResolution,
    built_state_line,
    early_launch,
    launch_booleans,
    parse_config,
    resolve_launch,
)
from specdash.sglang.versions import has_feature


class AdaptiveSetup:
    """Launch-time adaptive handling for one simulated server (see the module docstring)."""

    def __init__(self, flags: dict[str, Any], version: str, env: dict[str, str] | None = None) -> None:
        self.flags = flags
        self.version = version
        self.env = dict(env or {})
        self.asked = bool(flags.get("--speculative-adaptive")) and has_feature("adaptive_spec", version)
        cfg = flags.get("--speculative-adaptive-config")
        self.config_arg = cfg if isinstance(cfg, str) else None
        self.enabled = False
        self.reason: str | None = None
        self.config: AdaptiveConfig | None = None
        self.controller: AdaptiveController | None = None
        self._early: LaunchResolution | None = None

    def _bools(self) -> dict[str, bool]:
        return launch_booleans(self.flags, self.env, self.version)

    def launch_flags(self) -> dict[str, Any]:
        """The flags to resolve the speculative settings from.  On 0.5.14+ adaptive runs before the
        EAGLE checks: top-k unset → 1, steps unset → the candidates' middle, draft tokens := steps + 1
        (:func:`specdash.sglang.adaptive.early_launch`)."""
        if not self.asked:
            return self.flags
        out, self._early = early_launch(self.flags, self.version, env=self.env)
        return out

    def settle(self, res, warn, crash) -> None:
        """After SGLang's speculative resolution (``res``, a ``SpecResolution``): decide.

        ``warn(line)`` prints a warning; ``crash(exception, message)`` ends the launch (it raises).
        """
        if not self.asked:
            return
        e = self._early
        if e is None:
            try:
                e = resolve_launch(self.version, algorithm=res.algorithm, num_steps=res.num_steps,
                                   eagle_topk=res.eagle_topk, num_draft_tokens=res.num_draft_tokens,
                                   config=self.config_arg, **self._bools())
            except OSError as exc:
                crash("FileNotFoundError", str(exc))
        if e.error is not None:
            crash(e.error.exception, str(e.error))
        if not e.enabled:
            self.reason = e.reason
            warn(f"speculative_adaptive disabled: {e.reason}. Falling back to static speculative params.")
            return
        if not res.enabled or res.num_steps is None:
            return
        try:
            self.config = parse_config(self.config_arg, self.version, launch_steps=int(res.num_steps))
        except AdaptiveConfigError as exc:
            crash(exc.exception, str(exc))
        except OSError as exc:
            crash("FileNotFoundError", str(exc))
        self.enabled = True

    # -- start-up --------------------------------------------------------------------------------
    def make_controller(self, launch_steps: int, launch_draft_tokens: int,
                        cuda_graph_bs: list[int] | None) -> AdaptiveController | None:
        """The worker's controller (None when adaptive is off)."""
        if not self.enabled or self.config is None:
            return None
        self.controller = AdaptiveController(self.config, launch_steps, launch_draft_tokens=launch_draft_tokens,
                                             cuda_graph_bs=cuda_graph_bs)
        return self.controller

    def init_lines(self) -> list[str]:
        """``Adding initial …`` (0.5.12) and ``AdaptiveSpeculativeParams initialized: …``."""
        return [e.line for e in self.controller.startup_events()] if self.controller else []

    def built_states(self) -> list[tuple[float, str]]:
        """``(model seconds, line)`` for each runtime state built after the launch graphs."""
        out = []
        if not self.controller:
            return out
        for steps, bs in self.controller.states_to_build():
            max_bs = max(bs) if bs else 0
            elapsed = 1.9 + 0.5 * steps
            mem = 0.04 + 0.0025 * max_bs + 0.03 * steps
            out.append((elapsed, built_state_line(steps, elapsed, mem)))
        return out

    def internal_state(self) -> dict[str, Any]:
        """What ``internal_states[0]`` shows differently under adaptive: the active tier (the
        scheduler's server args are synced by ``apply_runtime_state``) and
        ``max_speculative_num_draft_tokens`` (max candidate + 1, 0.5.13+)."""
        ctl = self.controller
        if ctl is None:
            return {"speculative_adaptive": False} if self.asked else {}
        out: dict[str, Any] = {"speculative_num_steps": ctl.steps, "speculative_num_draft_tokens": ctl.draft_tokens}
        if self.config is not None and self.config.keyed:
            out["max_speculative_num_draft_tokens"] = self.config.max_draft_tokens()
        return out

    def truth(self) -> dict[str, Any]:
        """``/sim/truth`` ``adaptive``: enabled, the parsed config, switches and slot states."""
        ctl = self.controller
        out: dict[str, Any] = {"enabled": self.enabled, "asked": self.asked, "disabled_reason": self.reason,
                               "config": self.config.to_json() if self.config else None,
                               "switches": ctl.switches if ctl else 0, "updates": ctl.updates if ctl else 0}
        if ctl is not None:
            out["current_steps"] = ctl.steps
            out["current_draft_tokens"] = ctl.draft_tokens
            out["slots"] = {str(k): {"current_steps": p.current_steps, "ema_accept_len": p.ema_accept_len,
                                     "verify_batches": p.batch_count}
                            for k, p in ctl.policies.items()}
        return out


@dataclass
class TierCounts:
    """One tier's counts (user requests only; ``busy_s`` is the wall time the decode rounds that served
    at least one user request really took — what their tokens' emission times show — and ``planned_s``
    the scenario's plan for them; the two part on a loaded machine)."""

    steps: int
    draft_tokens: int
    batches: int = 0
    verify_rounds: int = 0
    accepted_drafts: int = 0
    output_tokens: int = 0
    busy_s: float = 0.0
    planned_s: float = 0.0


@dataclass
class TierTruth:
    """Per-tier ground truth (the shape of ``/sim/truth`` ``tiers``)."""

    tiers: dict[int, TierCounts] = field(default_factory=dict)

    def add(self, steps: int, draft_tokens: int, *, rounds: int, accepted: int, tokens: int, busy_s: float,
            planned_s: float = 0.0) -> None:
        """Count one decode batch run at ``steps``."""
        t = self.tiers.get(steps)
        if t is None:
            t = self.tiers[steps] = TierCounts(steps, draft_tokens)
        t.batches += 1
        t.verify_rounds += rounds
        t.accepted_drafts += accepted
        t.output_tokens += tokens
        t.busy_s += busy_s
        t.planned_s += planned_s

    def to_json(self) -> list[dict[str, Any]]:
        """One entry per tier that ran, by steps: ``speculative_num_steps``,
        ``speculative_num_draft_tokens``, ``batches``, ``verify_rounds`` (request-rounds),
        ``accepted_drafts``, ``output_tokens``, ``accept_length`` (tokens per request-round,
        bonus included; 1.0 for steps 0), ``accept_rate`` (accepted / (rounds × steps); None at
        steps 0), ``busy_s`` (the rounds' real wall time), ``planned_s`` (the scenario's plan for them),
        ``output_tok_s`` (output tokens / real decode time in the tier) and
        ``share`` (its fraction of all request-rounds)."""
        total = sum(t.verify_rounds for t in self.tiers.values()) or 0
        out = []
        for steps in sorted(self.tiers):
            t = self.tiers[steps]
            out.append(dict(
                speculative_num_steps=t.steps,
                speculative_num_draft_tokens=t.draft_tokens,
                batches=t.batches,
                verify_rounds=t.verify_rounds,
                accepted_drafts=t.accepted_drafts,
                output_tokens=t.output_tokens,
                accept_length=(t.verify_rounds + t.accepted_drafts) / t.verify_rounds if t.verify_rounds else None,
                accept_rate=(t.accepted_drafts / (t.verify_rounds * t.steps)) if (t.verify_rounds and t.steps)
                else None,
                busy_s=t.busy_s,
                planned_s=t.planned_s,
                output_tok_s=t.output_tokens / t.busy_s if t.busy_s > 0 else None,
                share=t.verify_rounds / total if total else None,
            ))
        return out
