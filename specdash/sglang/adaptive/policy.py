"""SGLang's adaptive EMA policy and controller, their log lines, interleave configs, and what the server reports.

Part of :mod:`specdash.sglang.adaptive` (its docstring describes the mechanism).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from specdash.sglang.adaptive.config import (
    AdaptiveConfig,
    AdaptiveConfigError,
    AdaptiveSlot,
    _keyed,
    _zero_steps,
    parse_config,
    render_config,
)
from specdash.sglang.versions import has_feature, parse_version

__all__ = [
    "OVERLAP_REPORT_LAG_BATCHES",
    "AdaptiveController",
    "AdaptiveEvent",
    "AdaptivePolicy",
    "TierState",
    "added_initial_line",
    "built_state_line",
    "initialized_line",
    "interleave_config",
    "parse_adaptive_line",
    "parse_adaptive_lines",
    "read_internal_state",
    "switch_line",
    "update_line",
]
# -- the policy ----------------------------------------------------------------------------------

def update_line(old: int, new: int, ema: float) -> str:
    """``Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=1.33)``."""
    return f"Adaptive spec params updated: steps {old} -> {new} (ema_accept_len={ema:.2f})"


def switch_line(old_steps: int, new_steps: int, old_draft: int, new_draft: int) -> str:
    """``Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2``."""
    return (f"Switch adaptive runtime state: steps {old_steps} -> {new_steps}, "
            f"draft_tokens {old_draft} -> {new_draft}")


def initialized_line(steps: int, candidates: Sequence[int]) -> str:
    """``AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 7]``."""
    return f"AdaptiveSpeculativeParams initialized: steps={steps}, candidate_steps={list(candidates)}"


def built_state_line(steps: int, elapsed_s: float, mem_gb: float) -> str:
    """``Built adaptive runtime state steps=7: elapsed=5.40s, mem=0.28GB``."""
    return f"Built adaptive runtime state steps={steps}: elapsed={elapsed_s:.2f}s, mem={mem_gb:.2f}GB"


def added_initial_line(launch_steps: int, candidates: Sequence[int]) -> str:
    """0.5.12's line when the launch step count is not a candidate."""
    return (f"Adding initial speculative_num_steps={launch_steps} to candidate_steps={sorted(candidates)} so the "
            "pre-built runtime state is reused.")


class AdaptivePolicy:
    """One slot's decision rule (``AdaptiveStepSlot.update`` / ``_recompute_params``).

    ``observe(accepted)`` takes the accepted drafts of each request of one verify batch
    (a sequence of ints, or one number for the batch mean) and returns the new step count
    when the slot moves, else None.  ``last_update`` then holds ``(old, new, ema)`` for the
    ``Adaptive spec params updated`` line.  Release differences: from 0.5.14 the EMA is
    frozen while at steps 0, a decision at steps 0 probes the next candidate up, a drop
    to 0 uses threshold ``0.5 + down_hysteresis``, and a slot that stepped down does not step
    back up in the same decision (before, both loops ran); ``ceiling_coeff`` from 0.5.13.
    """

    def __init__(self, slot: AdaptiveSlot, initial_steps: int, version: str) -> None:
        self.slot = slot
        self.version = str(parse_version(version))
        self.candidates = sorted(set(slot.candidate_steps) | {initial_steps})
        self.current_steps = initial_steps
        self.ema_accept_len = float(initial_steps - 1)
        self.batch_count = 0
        self.last_update: tuple[int, int, float] | None = None
        self._zero = _zero_steps(self.version)
        self._ceiling = has_feature("adaptive_keyed_config", self.version)

    def observe(self, accepted: Sequence[int] | float) -> int | None:
        """Feed one verify batch; the new step count when it changes (see the class docstring)."""
        if isinstance(accepted, (int, float)):
            avg = float(accepted)
        else:
            acc = list(accepted)
            if not acc:
                return None
            avg = sum(acc) / len(acc)
        s = self.slot
        if not self._zero or self.current_steps > 0:
            self.ema_accept_len = (1 - s.ema_alpha) * self.ema_accept_len + s.ema_alpha * avg
        self.batch_count += 1
        if self.batch_count <= s.warmup_batches:
            return None
        if (self.batch_count - s.warmup_batches) % max(1, s.update_interval) != 0:
            return None
        return self._recompute()

    def _recompute(self) -> int | None:
        c = self.candidates
        old = self.current_steps
        idx = c.index(old)
        old_idx = idx
        s = self.slot
        ema = self.ema_accept_len
        if self._zero and old == 0:
            idx = min(idx + 1, len(c) - 1)
            target = c[idx]
            if target > 0 and ema < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old, target)
        while idx > 0:
            prev = c[idx - 1]
            drop = (0.5 if (self._zero and prev == 0) else prev - 0.5) + s.down_hysteresis
            if ema <= drop:
                idx -= 1
            else:
                break
        if not (self._zero and idx < old_idx):
            while idx < len(c) - 1:
                if ema > c[idx] - 0.5 + s.up_hysteresis:
                    idx += 1
                else:
                    break
        target = c[idx]
        if self._ceiling and s.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(ema * s.ceiling_coeff))
            if target > ceiling and target <= old:
                while idx > 0 and c[idx] > ceiling:
                    idx -= 1
                target = c[idx]
        return self._apply(old, target)

    def _apply(self, old: int, target: int) -> int | None:
        if target == old:
            return None
        self.current_steps = target
        self.last_update = (old, target, self.ema_accept_len)
        return target


@dataclass(frozen=True)
class AdaptiveEvent:
    """Something the adaptive controller logs (and :func:`parse_adaptive_line` reads back).

    ``kind``: ``initialized`` (steps, candidates), ``built`` (steps, elapsed_s, mem_gb),
    ``update`` (old/new steps, ema), ``switch`` (old/new steps and draft tokens),
    ``added_initial`` (steps, candidates), ``disabled`` (reason).
    """

    kind: str
    old_steps: int | None = None
    new_steps: int | None = None
    old_draft_tokens: int | None = None
    new_draft_tokens: int | None = None
    ema_accept_len: float | None = None
    candidate_steps: tuple[int, ...] = ()
    elapsed_s: float | None = None
    mem_gb: float | None = None
    reason: str | None = None
    timestamp: datetime | None = None

    @property
    def line(self) -> str:
        """The message SGLang prints for this event (without the ``[time]`` prefix)."""
        if self.kind == "update":
            return update_line(self.old_steps, self.new_steps, self.ema_accept_len or 0.0)
        if self.kind == "switch":
            return switch_line(self.old_steps, self.new_steps, self.old_draft_tokens, self.new_draft_tokens)
        if self.kind == "initialized":
            return initialized_line(self.new_steps, self.candidate_steps)
        if self.kind == "built":
            return built_state_line(self.new_steps, self.elapsed_s or 0.0, self.mem_gb or 0.0)
        if self.kind == "added_initial":
            return added_initial_line(self.new_steps, self.candidate_steps)
        return f"speculative_adaptive disabled: {self.reason}. Falling back to static speculative params."


class AdaptiveController:
    """SGLang's ``AdaptiveSpeculativeParams`` + ``AdaptiveController`` for one worker.

    ``launch_steps``: the resolved ``--speculative-num-steps`` (the registered state);
    ``launch_draft_tokens``: its draft tokens (steps + 1 on 0.5.14+, the launch value before);
    ``cuda_graph_bs``: the captured decode batch sizes (None: graphs off).  Per decode batch
    call :meth:`before_batch` (0.5.13+ ``activate_step_by_batch``) and then
    :meth:`after_verify` with the accepted drafts per request; both return the events to log,
    in order.  ``steps`` / ``draft_tokens`` are the active tier.
    """

    def __init__(self, cfg: AdaptiveConfig, launch_steps: int, *, launch_draft_tokens: int | None = None,
                 cuda_graph_bs: Sequence[int] | None = None) -> None:
        self.cfg = cfg
        self.version = cfg.version
        self.cuda_graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None
        self.launch_steps = launch_steps
        self.launch_draft_tokens = launch_draft_tokens if launch_draft_tokens is not None else launch_steps + 1
        self.policies: dict[int, AdaptivePolicy] = {
            k: AdaptivePolicy(slot, cfg.initial_steps(k, launch_steps), cfg.version)
            for k, slot in sorted(cfg.slots.items())
        }
        self.steps = launch_steps
        self.draft_tokens = self.launch_draft_tokens
        self.switches = 0
        self.updates = 0

    # start-up ---------------------------------------------------------------------------------
    def candidate_steps(self) -> list[int]:
        """The step counts with a runtime state (union of the slots; the launch one included)."""
        return sorted({s for p in self.policies.values() for s in p.candidates})

    def startup_events(self) -> list[AdaptiveEvent]:
        """``Adding initial…`` (0.5.12, when it applies) and ``AdaptiveSpeculativeParams initialized``."""
        out = []
        if self.cfg.added_initial is not None:
            first = self.cfg.slots[self.cfg.boundaries[0]]
            cands = [s for s in first.candidate_steps if s != self.cfg.added_initial]
            out.append(AdaptiveEvent("added_initial", new_steps=self.cfg.added_initial,
                                     candidate_steps=tuple(cands)))
        first = self.policies[self.cfg.boundaries[0]]
        out.append(AdaptiveEvent("initialized", new_steps=first.current_steps,
                                 candidate_steps=tuple(first.candidates)))
        return out

    def states_to_build(self) -> list[tuple[int, list[int] | None]]:
        """``(steps, captured batch sizes)`` of each runtime state built at start-up (every
        candidate but the launch one, ascending)."""
        return [(s, self.cfg.cuda_graph_bs_for_step(s, self.cuda_graph_bs))
                for s in self.candidate_steps() if s != self.launch_steps]

    def draft_tokens_for(self, steps: int) -> int:
        """Draft tokens verified by the state for ``steps``."""
        return self.launch_draft_tokens if steps == self.launch_steps else steps + 1

    # runtime ----------------------------------------------------------------------------------
    def slot_for_batch(self, batch_size: int) -> int:
        """The slot key a batch of ``batch_size`` requests is routed to."""
        return self.cfg.route(batch_size, self.cuda_graph_bs)

    def _activate(self, steps: int) -> list[AdaptiveEvent]:
        if steps == self.steps:
            return []
        ev = AdaptiveEvent("switch", old_steps=self.steps, new_steps=steps, old_draft_tokens=self.draft_tokens,
                           new_draft_tokens=self.draft_tokens_for(steps))
        self.steps, self.draft_tokens = steps, self.draft_tokens_for(steps)
        self.switches += 1
        return [ev]

    def before_batch(self, batch_size: int) -> list[AdaptiveEvent]:
        """``activate_step_by_batch`` (0.5.13+): switch to the routed slot's current steps."""
        if not self.cfg.keyed:
            return []
        return self._activate(self.policies[self.slot_for_batch(batch_size)].current_steps)

    def after_verify(self, accepted: Sequence[int], batch_size: int | None = None) -> list[AdaptiveEvent]:
        """``on_verify_complete``: feed the routed slot; log its update and switch."""
        bs = len(accepted) if batch_size is None else batch_size
        key = self.slot_for_batch(bs) if self.cfg.keyed else self.cfg.boundaries[0]
        pol = self.policies[key]
        new = pol.observe(accepted)
        if new is None:
            return []
        self.updates += 1
        old, tgt, ema = pol.last_update
        return [AdaptiveEvent("update", old_steps=old, new_steps=tgt, ema_accept_len=ema), *self._activate(new)]


# -- interleaving two tiers ----------------------------------------------------------------------

#: Hysteresis that forces a move at every decision (down always passes, up always passes).
#: Decode batches whose results a ``Decode batch`` log line still reports after a ``Switch adaptive
#: runtime state`` line: under the overlap scheduler a batch's results are processed while the next
#: ones run.  Measured on real SGLang 0.5.14 on an H200 (8B-shaped testbed, ``SGLANG_SIMULATE_ACC_LEN=3``,
#: steps 1 <-> 15, ``--decode-log-interval 1``): the two lines after each switch read the old tier's
#: accept length.  Used by :mod:`specdash.collect.tiers` (lines to discard) and the simulator.
OVERLAP_REPORT_LAG_BATCHES = 2

_FORCE = {"up_hysteresis": -100, "down_hysteresis": 100, "warmup_batches": 2, "update_interval": 3}


def interleave_config(steps_a: int, steps_b: int, version: str, batch_size: int = 1, *,
                      update_interval: int = 3) -> dict[str, Any]:
    """A config that makes one slot alternate between ``steps_a`` and ``steps_b`` every
    ``update_interval`` verify batches (after 2 warm-up batches) whatever the acceptance (3: the
    recorded 0.5.14 run; a live measurement wants longer windows, since the first
    :data:`OVERLAP_REPORT_LAG_BATCHES` batches after each switch report the old tier): ``up_hysteresis -100`` and
    ``down_hysteresis 100`` force a move at each decision.  Launch with
    ``--speculative-num-steps max(a, b)`` (a candidate).  ``batch_size`` is the slot key on
    keyed releases (every batch size routes to the only slot anyway).

    The alternation is checked by running :class:`AdaptivePolicy` on several acceptance
    levels; releases before 0.5.14 run the down and the up loop in the same decision, so the
    forced drop is undone at once and the slot never moves — that raises.

    Raises:
        AdaptiveConfigError: equal tiers, a release that cannot alternate, or a tier the
            release cannot run (steps 0 before 0.5.14).
    """
    v = str(parse_version(version))
    a, b = sorted((int(steps_a), int(steps_b)))
    if a == b:
        raise AdaptiveConfigError("interleaving needs two different step counts", render=True)
    if a < 0:
        raise AdaptiveConfigError("step counts must be >= 0", render=True)
    force = dict(_FORCE, update_interval=int(update_interval))
    if force["update_interval"] < 1:
        raise AdaptiveConfigError("update_interval must be >= 1", render=True)
    slot = AdaptiveSlot((a, b), up_hysteresis=force["up_hysteresis"], down_hysteresis=force["down_hysteresis"],
                        warmup_batches=force["warmup_batches"], update_interval=force["update_interval"])
    if _keyed(v):
        out = {str(int(batch_size)): {"candidate_steps": [a, b], **force}}
        parse_config(out, v, launch_steps=b)
    else:
        out = {"candidate_steps": [a, b], **force}
        parse_config(out, v, launch_steps=b)
    render_config({int(batch_size): slot}, v)  # the release can express and run it
    for level in sorted({0.0, float(a), float(b), (a + b) / 2}):
        pol = AdaptivePolicy(slot, b, v)
        seen = []
        for i in range(slot.warmup_batches + 6 * slot.update_interval):
            new = pol.observe(level)
            if new is not None:
                seen.append((i, new))
        want = [(slot.warmup_batches + k * slot.update_interval - 1, a if k % 2 else b) for k in range(1, 7)]
        if seen != want:
            raise AdaptiveConfigError(
                f"SGLang {v} does not alternate steps {a} <-> {b} under forcing hysteresis (at accepted drafts "
                f"{level:g} it moved {seen or 'never'}): before 0.5.14 a decision runs the down and the up "
                "loop together, so a forced drop is undone in the same decision", render=True)
    return out


# -- reading the server --------------------------------------------------------------------------

_LINE_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("switch", re.compile(r"Switch adaptive runtime state: steps (\d+) -> (\d+), draft_tokens (\d+) -> (\d+)")),
    ("update", re.compile(r"Adaptive spec params updated: steps (\d+) -> (\d+) \(ema_accept_len=(-?[\d.]+|nan)\)")),
    ("built", re.compile(r"Built adaptive runtime state steps=(\d+): elapsed=([\d.]+)s, mem=(-?[\d.]+)GB")),
    ("initialized", re.compile(r"AdaptiveSpeculativeParams initialized: steps=(\d+), candidate_steps=\[([\d, ]*)\]")),
    ("added_initial", re.compile(r"Adding initial speculative_num_steps=(\d+) to candidate_steps=\[([\d, ]*)\]")),
    ("disabled", re.compile(r"speculative_adaptive disabled: (.*?)\. Falling back to static speculative params")),
)


_STAMP_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,](\d{1,6}))?(?: [A-Z][A-Z_]*\d+)*\] ?")


def _split_stamp(line: str) -> tuple[datetime | None, str]:
    """``[2026-12-01 08:37:30 TP0] msg`` → (naive local datetime, msg); (None, line) without a stamp."""
    m = _STAMP_RE.search(line)
    if m is None:
        return None, line
    try:
        ts = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
        if m.group(2):
            ts = ts.replace(microsecond=int(m.group(2).ljust(6, "0")))
    except ValueError:
        ts = None
    return ts, line[m.end():]


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def parse_adaptive_line(line: str) -> AdaptiveEvent | None:
    """Parse one log line written by SGLang's adaptive controller (any prefix), or None."""
    if "daptive" not in line and "Adding initial" not in line:
        return None
    ts, msg = _split_stamp(line)
    for kind, rx in _LINE_RES:
        m = rx.search(msg)
        if m is None:
            continue
        g = m.groups()
        if kind == "switch":
            return AdaptiveEvent(kind, int(g[0]), int(g[1]), int(g[2]), int(g[3]), timestamp=ts)
        if kind == "update":
            return AdaptiveEvent(kind, int(g[0]), int(g[1]), ema_accept_len=float(g[2]), timestamp=ts)
        if kind == "built":
            return AdaptiveEvent(kind, new_steps=int(g[0]), elapsed_s=float(g[1]), mem_gb=float(g[2]), timestamp=ts)
        if kind in ("initialized", "added_initial"):
            return AdaptiveEvent(kind, new_steps=int(g[0]), candidate_steps=_ints(g[1]), timestamp=ts)
        return AdaptiveEvent(kind, reason=g[0], timestamp=ts)
    return None


def parse_adaptive_lines(lines: Iterable[str]) -> list[AdaptiveEvent]:
    """Every adaptive event in ``lines``, in order."""
    return [e for e in (parse_adaptive_line(x) for x in lines) if e is not None]


@dataclass(frozen=True)
class TierState:
    """The active tier as ``/server_info`` shows it.

    ``launch_*``: the top-level ``speculative_num_steps`` / ``_num_draft_tokens`` (the
    tokenizer's copy of the server args, never updated); ``current_*``: those of
    ``internal_states[0]`` (the scheduler's copy, which ``apply_runtime_state`` syncs);
    ``adaptive``: ``speculative_adaptive`` after SGLang's checks; ``max_draft_tokens``:
    ``max_speculative_num_draft_tokens``.
    """

    adaptive: bool
    launch_steps: int | None
    launch_draft_tokens: int | None
    current_steps: int | None
    current_draft_tokens: int | None
    max_draft_tokens: int | None = None
    config_path: str | None = None

    @property
    def switched(self) -> bool:
        """True when the scheduler runs another tier than the launch one."""
        return self.current_steps is not None and self.current_steps != self.launch_steps


def read_internal_state(server_info: Mapping[str, Any]) -> TierState:
    """The :class:`TierState` of a ``/server_info`` answer (PD routers: ``["decode"][0]`` first)."""
    info = server_info
    if isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states") or [{}]
    st = states[0] if isinstance(states, list) and states else {}

    def num(d: Mapping[str, Any], k: str) -> int | None:
        v = d.get(k)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    cur_steps = num(st, "speculative_num_steps")
    cur_draft = num(st, "speculative_num_draft_tokens")
    return TierState(
        adaptive=bool(info.get("speculative_adaptive", st.get("speculative_adaptive"))),
        launch_steps=num(info, "speculative_num_steps"),
        launch_draft_tokens=num(info, "speculative_num_draft_tokens"),
        current_steps=cur_steps if cur_steps is not None else num(info, "speculative_num_steps"),
        current_draft_tokens=cur_draft if cur_draft is not None else num(info, "speculative_num_draft_tokens"),
        max_draft_tokens=num(st, "max_speculative_num_draft_tokens"),
        config_path=info.get("speculative_adaptive_config"),
    )
