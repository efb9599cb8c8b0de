"""SGLang's runtime adaptive speculation (``--speculative-adaptive``) as data, by release.

Everything here restates SGLang's own code (read from the PyPI wheels, ``pip download
--no-deps sglang==X``): ``sglang/srt/speculative/adaptive_spec_params.py`` (the config
loader, ``AdaptiveStepSlot`` / ``AdaptiveSpeculativeParams``: EMA, warm-up, update interval,
hysteresis, batch-size routing), ``adaptive_runtime_state.py`` (``AdaptiveController``: one
runtime state per candidate step count, switched atomically), ``eagle_worker_v2.py``
(``build_adaptive_runtime_state`` / ``apply_runtime_state`` and their log lines) and
``arg_groups/speculative_hook.py`` (``_maybe_disable_adaptive``,
``_init_adaptive_speculative_params``).  The version differences are rows of
:data:`specdash.sglang.versions.FEATURES` (``adaptive_*``).

How it works, in SGLang's terms:

* At start-up the worker registers the launch runtime state and builds (captures CUDA
  graphs for) one more per other candidate step count:
  ``Built adaptive runtime state steps=N: elapsed=…s, mem=…GB``.  A state for ``N`` steps
  verifies ``N + 1`` draft tokens (top-k 1 only).  From 0.5.13 a state's CUDA graphs cover
  only the captured batch sizes whose slot lists that step count.
* 0.5.11–0.5.12 read one flat config (``candidate_steps``, ``ema_alpha``, ``update_interval``,
  ``warmup_batches``, ``down_hysteresis``, ``up_hysteresis``).  From 0.5.13 the config is
  keyed by batch size (``{"1": {...}, "8": {...}}``; non-digit top-level keys are shared by
  every slot); each decode batch is padded to the next captured CUDA-graph batch size and
  routed to the slot with the largest key ≤ that size (the smallest slot below all keys).
* Each slot keeps an EMA of the accepted drafts per request (``ema_accept_len``, bonus token
  not counted), starting at ``steps − 1``; after ``warmup_batches`` verify batches it
  re-decides every ``update_interval`` batches: step down while ``ema ≤ prev − 0.5 +
  down_hysteresis``, else up while ``ema > cur − 0.5 + up_hysteresis``.
* From 0.5.14 a candidate may be 0 (no drafting: a plain decode through the verify graph);
  the EMA is frozen at steps 0 and the next decision probes one step up.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from specdash.sglang.versions import has_feature, parse_version

__all__ = [
    "OVERLAP_REPORT_LAG_BATCHES",
    "AdaptiveConfig",
    "AdaptiveConfigError",
    "AdaptiveController",
    "AdaptiveEvent",
    "AdaptivePolicy",
    "AdaptiveSlot",
    "ConfigIssue",
    "LaunchResolution",
    "TierState",
    "added_initial_line",
    "built_state_line",
    "default_config",
    "early_launch",
    "flag_int",
    "initialized_line",
    "interleave_config",
    "launch_booleans",
    "lint_config",
    "parse_adaptive_line",
    "parse_adaptive_lines",
    "parse_config",
    "read_internal_state",
    "render_config",
    "resolve_launch",
    "switch_line",
    "unsupported_reason",
    "update_line",
]

#: The config keys a slot reads (``AdaptiveStepSlot.__init__``); ``ceiling_coeff`` from 0.5.13.
SLOT_KEYS = ("candidate_steps", "ema_alpha", "update_interval", "warmup_batches", "down_hysteresis",
             "up_hysteresis", "ceiling_coeff")


class AdaptiveConfigError(ValueError):
    """A config or launch that the emulated release refuses at start-up.

    ``str(exc)`` is SGLang's own message; ``exception`` the Python exception SGLang raises
    (``ValueError``, or ``AssertionError`` for 0.5.11–0.5.12's two-candidate assertion);
    ``render`` is True for configs specdash cannot express in a release's format.
    """

    def __init__(self, message: str, exception: str = "ValueError", *, render: bool = False) -> None:
        super().__init__(message)
        self.exception = exception
        self.render = render


# -- per-release facts ---------------------------------------------------------------------------

def _keyed(version: str) -> bool:
    return has_feature("adaptive_keyed_config", version)


def _zero_steps(version: str) -> bool:
    return has_feature("adaptive_zero_steps", version)


@dataclass(frozen=True)
class AdaptiveSlot:
    """One slot's parameters (``AdaptiveStepSlot``; SGLang's defaults when a key is absent).

    ``ceiling_coeff`` (0.5.13+, 0 = off) caps downward moves at ``ceil(ema × coeff)``.
    """

    candidate_steps: tuple[int, ...]
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    down_hysteresis: float = -0.25
    up_hysteresis: float = 0.0
    ceiling_coeff: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, default_steps: Sequence[int] = (1, 3, 7)) -> AdaptiveSlot:
        """A slot from SGLang's keys (``cfg.get(key, default)`` for each)."""
        steps = d.get("candidate_steps", list(default_steps))
        return cls(
            candidate_steps=tuple(sorted(set(int(s) for s in steps))),
            ema_alpha=float(d.get("ema_alpha", 0.2)),
            update_interval=int(d.get("update_interval", 5)),
            warmup_batches=int(d.get("warmup_batches", 10)),
            down_hysteresis=float(d.get("down_hysteresis", -0.25)),
            up_hysteresis=float(d.get("up_hysteresis", 0.0)),
            ceiling_coeff=float(d.get("ceiling_coeff", 0) or 0),
        )

    def to_dict(self, *, ceiling: bool = True) -> dict[str, Any]:
        """The slot in SGLang's JSON keys (``ceiling_coeff`` left out when ``ceiling`` is False)."""
        out: dict[str, Any] = {
            "candidate_steps": list(self.candidate_steps),
            "ema_alpha": self.ema_alpha,
            "update_interval": self.update_interval,
            "warmup_batches": self.warmup_batches,
            "down_hysteresis": self.down_hysteresis,
            "up_hysteresis": self.up_hysteresis,
        }
        if ceiling:
            out["ceiling_coeff"] = self.ceiling_coeff
        return out


#: ``DEFAULT_ADAPTIVE_CONFIG`` of ``adaptive_spec_params.py`` per release (keyed releases).
_DEFAULT_0_5_13 = {
    1: AdaptiveSlot((1, 3, 7), up_hysteresis=0.0, down_hysteresis=-0.25),
    8: AdaptiveSlot((1, 3), up_hysteresis=0.0, down_hysteresis=0.0),
    32: AdaptiveSlot((1,), up_hysteresis=0.0, down_hysteresis=0.0),
}
_DEFAULT_0_5_14 = {
    1: AdaptiveSlot((1, 3, 7), up_hysteresis=0.0, down_hysteresis=-0.25),
    8: AdaptiveSlot((0, 1, 3), up_hysteresis=0.0, down_hysteresis=0.0),
    32: AdaptiveSlot((0, 1), up_hysteresis=0.0, down_hysteresis=0.0),
    64: AdaptiveSlot((0,), up_hysteresis=0.0, down_hysteresis=0.0),
}


@dataclass(frozen=True)
class AdaptiveConfig:
    """An adaptive config as the emulated release reads it.

    ``slots``: batch-size boundary → :class:`AdaptiveSlot` (a flat release has one slot,
    key 1, used for every batch).  ``keyed``: the release routes by batch size.
    ``ignored``: a batch-size keyed file given to a flat release (0.5.11–0.5.12 read only
    the top-level keys, so its slots are silently dropped); ``warnings`` says so.
    ``added_initial``: 0.5.12 added the launch step count to the candidates (it logs that).
    ``source``: ``"default"``, a file path, or ``"inline"``.
    """

    slots: dict[int, AdaptiveSlot]
    version: str
    keyed: bool
    source: str = "default"
    ignored: bool = False
    warnings: tuple[str, ...] = ()
    added_initial: int | None = None
    raw: dict[str, Any] | None = None

    @property
    def boundaries(self) -> list[int]:
        """The slot keys, ascending."""
        return sorted(self.slots)

    def candidate_steps(self) -> list[int]:
        """Union of every slot's candidates (``resolve_candidate_steps_from_config``): the
        runtime states SGLang builds."""
        return sorted({s for slot in self.slots.values() for s in slot.candidate_steps})

    def max_draft_tokens(self) -> int:
        """``max_speculative_num_draft_tokens`` under adaptive (``max(candidates) + 1``)."""
        return max(self.candidate_steps()) + 1

    @staticmethod
    def pad(batch_size: int, cuda_graph_bs: Sequence[int] | None) -> int:
        """``_pad_to_cuda_graph_bs``: the smallest captured size ≥ ``batch_size`` (the size
        itself when graphs are off or it exceeds every captured size)."""
        if not cuda_graph_bs:
            return batch_size
        bs = sorted(cuda_graph_bs)
        i = bisect.bisect_left(bs, batch_size)
        return bs[i] if i < len(bs) else batch_size

    def slot_for(self, padded_bs: int) -> int:
        """``_find_closest_bs``: the largest slot key ≤ ``padded_bs`` (the smallest key when
        ``padded_bs`` is below all of them).  Flat releases: always their one slot."""
        keys = self.boundaries
        if not self.keyed:
            return keys[0]
        i = bisect.bisect_right(keys, padded_bs) - 1
        return keys[max(0, i)]

    def route(self, batch_size: int, cuda_graph_bs: Sequence[int] | None = None) -> int:
        """The slot key a decode batch of ``batch_size`` requests uses (pad, then closest)."""
        return self.slot_for(self.pad(batch_size, cuda_graph_bs))

    def cuda_graph_bs_for_step(self, step: int, cuda_graph_bs: Sequence[int] | None) -> list[int] | None:
        """The captured batch sizes a runtime state for ``step`` gets (0.5.13+ prunes to the
        sizes whose slot lists ``step``; earlier releases capture all).  None: graphs off."""
        if not cuda_graph_bs:
            return None
        bs = sorted(cuda_graph_bs)
        if not self.keyed:
            return bs
        return [v for v in bs if step in self.slots[self.slot_for(v)].candidate_steps]

    def initial_steps(self, slot_key: int, launch_steps: int) -> int:
        """A slot's starting step count: the launch value when it is a candidate, else (0.5.13+)
        the middle candidate; 0.5.11 starts at the nearest candidate (ties: the larger)."""
        cands = list(self.slots[slot_key].candidate_steps)
        if launch_steps in cands:
            return launch_steps
        if self.keyed:
            return cands[len(cands) // 2]
        if has_feature("adaptive_initial_steps_added", self.version):
            return launch_steps
        return min(cands, key=lambda s: (abs(s - launch_steps), -s))

    def to_json(self) -> dict[str, Any]:
        """A JSON summary (slots by key, flags, warnings)."""
        return {"version": self.version, "keyed": self.keyed, "source": self.source, "ignored": self.ignored,
                "warnings": list(self.warnings), "candidate_steps": self.candidate_steps(),
                "slots": {str(k): v.to_dict(ceiling=self.keyed) for k, v in sorted(self.slots.items())}}


def default_config(version: str) -> AdaptiveConfig:
    """The config SGLang ``version`` uses without ``--speculative-adaptive-config``.

    0.5.11–0.5.12: one flat slot ``[1, 3, 7]``; 0.5.13: ``{"1": [1,3,7], "8": [1,3], "32": [1]}``;
    0.5.14–0.5.19: ``{"1": [1,3,7], "8": [0,1,3], "32": [0,1], "64": [0]}``; 0.5.20+: slot 1 is
    ``[1, 3, 5, 7]``.

    Raises:
        AdaptiveConfigError: the release has no adaptive speculation (before 0.5.11).
    """
    v = str(parse_version(version))
    if not has_feature("adaptive_spec", v):
        raise AdaptiveConfigError(f"SGLang {v} has no --speculative-adaptive (it arrived in 0.5.11)")
    if not _keyed(v):
        return AdaptiveConfig({1: AdaptiveSlot((1, 3, 7))}, v, keyed=False)
    slots = dict(_DEFAULT_0_5_14 if _zero_steps(v) else _DEFAULT_0_5_13)
    if has_feature("adaptive_slot1_four_tiers", v):
        slots[1] = replace(slots[1], candidate_steps=(1, 3, 5, 7))
    return AdaptiveConfig(slots, v, keyed=True)


def _load(obj_or_path: Any) -> tuple[Any, str]:
    if isinstance(obj_or_path, (str, Path)):
        p = Path(obj_or_path)
        with open(p, encoding="utf-8") as f:
            return json.load(f), str(p)
    return obj_or_path, "inline"


def parse_config(obj_or_path: Any, version: str, *, launch_steps: int | None = None) -> AdaptiveConfig:
    """Read an adaptive config as SGLang ``version`` does.

    ``obj_or_path``: None (the release's default), a parsed JSON object, or a file path.
    ``launch_steps``: ``--speculative-num-steps`` after SGLang's resolution (None: not
    checked).

    * 0.5.11–0.5.12 (``load_adaptive_config``): the JSON must be an object; only top-level keys
      are read, so a batch-size keyed file is silently ignored (defaults used; ``ignored`` and
      a warning say so); fewer than two distinct candidates is an ``AssertionError``; 0.5.12
      adds a missing launch step count to the candidates (``added_initial``).
    * 0.5.13+ (``_load_adaptive_config``): only digit keys are slots, non-digit keys are merged
      into every slot; each slot needs a non-empty list of ints (> 0 on 0.5.13, ≥ 0 from
      0.5.14); no digit key is SGLang's ``ValueError``; the launch step count must be a
      candidate of some slot (``ValueError``).

    Raises:
        AdaptiveConfigError: with SGLang's message (see above); OSError / json errors for an
            unreadable file, as SGLang would raise them.
    """
    v = str(parse_version(version))
    if obj_or_path is None:
        cfg = default_config(v)
        if launch_steps is not None:
            cfg = _check_launch(cfg, launch_steps)
        return cfg
    default_config(v)  # the release must have the feature
    raw, source = _load(obj_or_path)
    if not _keyed(v):
        if not isinstance(raw, dict):
            raise AdaptiveConfigError(
                f"speculative_adaptive_config must be a JSON object, got {type(raw).__name__}")
        digit = [k for k in raw if str(k).isdigit()]
        warnings: list[str] = []
        ignored = bool(digit)
        if ignored:
            warnings.append(
                f"SGLang {v} reads a flat adaptive config: the batch-size keys {digit} are ignored and "
                "the defaults are used for them (keyed configs arrive in 0.5.13)")
        unknown = [k for k in raw if k not in SLOT_KEYS[:-1] and not str(k).isdigit()]
        if unknown:
            warnings.append(f"keys SGLang {v} does not read: {unknown}")
        slot = AdaptiveSlot.from_dict(raw)
        cfg = AdaptiveConfig({1: slot}, v, keyed=False, source=source, ignored=ignored,
                             warnings=tuple(warnings), raw=dict(raw))
        if launch_steps is not None:
            cfg = _check_launch(cfg, launch_steps)
        return cfg
    if not isinstance(raw, dict):
        raise AdaptiveConfigError(f"'{type(raw).__name__}' object has no attribute 'items'", "AttributeError")
    zero = _zero_steps(v)
    shared = {k: val for k, val in raw.items() if not str(k).isdigit()}
    slots: dict[int, AdaptiveSlot] = {}
    for key, entry in raw.items():
        if not str(key).isdigit():
            continue
        if not isinstance(entry, dict):
            raise AdaptiveConfigError(f"'{type(entry).__name__}' object has no attribute 'get'", "AttributeError")
        steps = entry.get("candidate_steps")
        ok = isinstance(steps, list) and steps and all(
            isinstance(s, int) and not isinstance(s, bool) and (s >= 0 if zero else s > 0) for s in steps)
        if not ok:
            what = "non-negative ints" if zero else "positive ints"
            raise AdaptiveConfigError(f"BS {key}: candidate_steps must be a list of {what}, got {steps!r}")
        slots[int(key)] = AdaptiveSlot.from_dict({**shared, **entry})
    if not slots:
        raise AdaptiveConfigError(
            "speculative_adaptive_config must contain at least one integer-string "
            'BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. '
            f"Got keys: {list(raw.keys())}")
    cfg = AdaptiveConfig(slots, v, keyed=True, source=source, raw=dict(raw))
    if launch_steps is not None:
        cfg = _check_launch(cfg, launch_steps)
    return cfg


def _check_launch(cfg: AdaptiveConfig, launch_steps: int) -> AdaptiveConfig:
    v = cfg.version
    if cfg.keyed:
        cands = cfg.candidate_steps()
        if launch_steps not in cands:
            raise AdaptiveConfigError(
                f"--speculative-num-steps={launch_steps} is not in the adaptive config candidate_steps "
                f"{cands}. Pass one of those values.")
        return cfg
    slot = cfg.slots[1]
    cands = set(slot.candidate_steps)
    added = None
    if has_feature("adaptive_initial_steps_added", v) and launch_steps not in cands:
        cands.add(launch_steps)
        added = launch_steps
    if len(cands) < 2:
        raise AdaptiveConfigError("candidate_steps must have at least 2 distinct values", "AssertionError")
    if added is None:
        return cfg
    return replace(cfg, slots={1: replace(slot, candidate_steps=tuple(sorted(cands)))}, added_initial=added)


def render_config(cfg: AdaptiveConfig | Mapping[int | str, AdaptiveSlot], version: str) -> dict[str, Any]:
    """The JSON object SGLang ``version`` accepts for ``cfg`` (write it with ``json.dump``).

    Keyed releases (0.5.13+): ``{"<bs>": {slot keys…}}``.  Flat releases (0.5.11–0.5.12): the
    single slot's keys at the top level (no ``ceiling_coeff``).  The result is read back with
    :func:`parse_config` to prove the release takes it.

    Raises:
        AdaptiveConfigError (``render`` True): several slots for a flat release, a zero-step
            candidate before 0.5.14, a ``ceiling_coeff`` a flat release cannot express, or one
            candidate on a flat release (SGLang asserts two).
    """
    v = str(parse_version(version))
    slots = cfg.slots if isinstance(cfg, AdaptiveConfig) else {int(k): s for k, s in cfg.items()}
    if not slots:
        raise AdaptiveConfigError("an adaptive config needs at least one slot", render=True)
    if not _zero_steps(v) and any(0 in s.candidate_steps for s in slots.values()):
        raise AdaptiveConfigError(f"SGLang {v} cannot run a zero-step (no drafting) tier: steps 0 arrives in "
                                  "0.5.14", render=True)
    if _keyed(v):
        out = {str(k): s.to_dict() for k, s in sorted(slots.items())}
    else:
        if len(slots) > 1:
            raise AdaptiveConfigError(
                f"SGLang {v} reads one flat adaptive config with no batch-size slots; this schedule has slots "
                f"{sorted(slots)} (per-batch-size candidates need 0.5.13+). Pick one slot, or target a newer "
                "release.", render=True)
        (slot,) = slots.values()
        if slot.ceiling_coeff:
            raise AdaptiveConfigError(f"SGLang {v} has no ceiling_coeff (0.5.13+)", render=True)
        if len(set(slot.candidate_steps)) < 2:
            raise AdaptiveConfigError(f"SGLang {v} needs at least 2 distinct candidate_steps (it asserts so)",
                                      render=True)
        out = slot.to_dict(ceiling=False)
    parse_config(out, v)
    return out


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


# -- launch resolution ---------------------------------------------------------------------------

def unsupported_reason(version: str, *, algorithm: str | None, topk: int | None,
                       disable_overlap_schedule: bool = False, enable_dp_attention: bool = False,
                       enable_multi_layer_eagle: bool = False, enable_two_batch_overlap: bool = False,
                       enable_pdmux: bool = False) -> str | None:
    """``adaptive_unsupported_reason``: why SGLang turns adaptive off (it then logs
    ``speculative_adaptive disabled: <reason>. Falling back to static speculative params.``
    and runs the launch settings), or None when adaptive runs."""
    v = str(parse_version(version))
    if algorithm not in ("EAGLE", "EAGLE3"):
        return f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    # 0.5.14 lets an unset top-k through (``_init_adaptive_speculative_params`` then sets 1).
    topk_none_ok = has_feature("adaptive_launch_resolution", v)
    if (topk is not None or not topk_none_ok) and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if enable_dp_attention:
        if not parse_version(v) < parse_version("0.5.23"):  # 0.5.20 still has the old text
            return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
        return ("enable_dp_attention=True is not supported "
                "(adaptive tier decisions are not synchronized across DP ranks)")
    # 0.5.11 checks the overlap scheduler after top-k and attention DP (adaptive_spec_params.py).
    if has_feature("adaptive_requires_no_overlap", v) and not disable_overlap_schedule:
        return "the overlap scheduler (spec v2) is enabled (adaptive is only implemented for EAGLEWorker v1)"
    if enable_multi_layer_eagle:
        worker = "MultiLayerEagleWorkerV2" if has_feature("adaptive_keyed_config", v) else "MultiLayerEagleWorker"
        return f"enable_multi_layer_eagle=True is not supported ({worker} does not implement adaptive)"
    if enable_two_batch_overlap:
        return ("enable_two_batch_overlap=True is not supported "
                "(adaptive state swap would discard the TboAttnBackend wrapper)")
    if enable_pdmux:
        return ("enable_pdmux=True is not supported "
                "(adaptive state swap does not update decode_attn_backend_group)")
    return None


@dataclass
class LaunchResolution:
    """What ``--speculative-adaptive`` does to a launch on one release.

    ``enabled``: adaptive runs; ``reason``: why not (SGLang's text; None when enabled or not
    asked); ``num_steps`` / ``eagle_topk`` / ``num_draft_tokens``: the values to launch with
    (None = leave the flags as given); ``config``: the parsed config (None when disabled or
    on error); ``error``: the start-up failure (config or launch-steps check).
    """

    enabled: bool
    reason: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    config: AdaptiveConfig | None = None
    error: AdaptiveConfigError | None = None
    notes: list[str] = field(default_factory=list)


def resolve_launch(version: str, *, algorithm: str | None, num_steps: int | None, eagle_topk: int | None,
                   num_draft_tokens: int | None, config: Any = None, **flags: bool) -> LaunchResolution:
    """Apply SGLang's adaptive start-up rules to the speculative flags.

    From 0.5.14 (``_init_adaptive_speculative_params``, before the EAGLE-family checks):
    top-k None → 1, steps None → the middle of the candidates' union, steps must be a
    candidate (``ValueError``), draft tokens := steps + 1 silently.  0.5.13 only checks the
    steps (after the usual resolution); 0.5.11–0.5.12 check nothing (0.5.12 adds the launch
    steps to the candidates).  ``flags`` are :func:`unsupported_reason`'s booleans.
    """
    v = str(parse_version(version))
    algo = str(algorithm).upper() if algorithm else None
    if algo == "NEXTN":
        algo = "EAGLE"
    reason = unsupported_reason(v, algorithm=algo, topk=eagle_topk, **flags)
    if reason is not None:
        return LaunchResolution(False, reason)
    early = has_feature("adaptive_launch_resolution", v)
    try:
        cfg = parse_config(config, v)
    except AdaptiveConfigError as exc:
        return LaunchResolution(False, error=exc)
    steps, topk, draft = num_steps, eagle_topk, num_draft_tokens
    if early:
        cands = cfg.candidate_steps()
        topk = 1 if topk is None else topk
        steps = cands[len(cands) // 2] if steps is None else steps
    if steps is not None:
        try:
            cfg = parse_config(config, v, launch_steps=steps)
        except AdaptiveConfigError as exc:
            return LaunchResolution(False, error=exc)
        if early:
            draft = steps + 1
    return LaunchResolution(True, num_steps=steps, eagle_topk=topk, num_draft_tokens=draft, config=cfg,
                            notes=list(cfg.warnings))


#: Server flags :func:`unsupported_reason` reads (canonical flag → its keyword).
UNSUPPORTED_FLAGS: dict[str, str] = {
    "--disable-overlap-schedule": "disable_overlap_schedule",
    "--enable-dp-attention": "enable_dp_attention",
    "--enable-multi-layer-eagle": "enable_multi_layer_eagle",
    "--enable-two-batch-overlap": "enable_two_batch_overlap",
    "--enable-pdmux": "enable_pdmux",
}

_ENV_FALSE = ("false", "0", "no", "n")  # environ.py EnvBool.parse


def flag_int(v: Any) -> int | None:
    """A flag's integer value (None when absent, bare, or not a number)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def launch_booleans(flags: Mapping[str, Any], env: Mapping[str, str] | None = None,
                    version: str | None = None) -> dict[str, bool]:
    """:func:`unsupported_reason`'s booleans from canonical server flags (``--enable-dp-attention`` …).

    ``disable_overlap_schedule`` is also True where SGLang turns the overlap scheduler off itself
    before the adaptive check: on releases that still read ``SGLANG_ENABLE_SPEC_V2`` (0.5.11–0.5.13,
    ``environ.py`` ``EnvBool(True)``), a false value in ``env`` makes
    ``_handle_speculative_decoding`` log ``Spec v1 is used … because SGLANG_ENABLE_SPEC_V2=False``
    and set it (``server_args.py``).  Other start-up paths that disable it (some model families,
    pipeline parallelism) are not modelled.
    """
    out = {kw: bool(flags.get(flag)) for flag, kw in UNSUPPORTED_FLAGS.items()}
    if not out["disable_overlap_schedule"] and env and version is not None:
        val = str(env.get("SGLANG_ENABLE_SPEC_V2", "")).strip().lower()
        if val in _ENV_FALSE and has_feature("spec_v2_default_topk_fallback", version):
            out["disable_overlap_schedule"] = True
    return out


def early_launch(flags: Mapping[str, Any], version: str, *,
                 env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], LaunchResolution | None]:
    """The speculative flags as SGLang resolves them when ``--speculative-adaptive`` runs first.

    From 0.5.14 (``adaptive_launch_resolution``: ``arg_groups/speculative_hook.py``
    ``handle_speculative_decoding`` calls ``_maybe_disable_adaptive`` and
    ``_init_adaptive_speculative_params`` before the EAGLE-family checks) adaptive fixes top-k,
    steps and draft tokens before anything else reads them; the returned flags carry those values,
    so the usual resolution (``specdash.sglang.speculative.resolve_flags``) then sees what SGLang sees.

    Returns ``(flags, resolution)``: the flags unchanged and None when adaptive is not asked or the
    release resolves it after the EAGLE checks (≤ 0.5.13); unchanged with the resolution when
    SGLang turns adaptive off (``reason``) or refuses the config (``error``); an unreadable config
    file (OSError, JSON syntax) also leaves them unchanged, with None.
    """
    v = str(parse_version(version))
    out = dict(flags)
    if not flags.get("--speculative-adaptive") or not has_feature("adaptive_spec", v) \
            or not has_feature("adaptive_launch_resolution", v):
        return out, None
    cfg = flags.get("--speculative-adaptive-config")
    try:
        e = resolve_launch(v, algorithm=flags.get("--speculative-algorithm"),
                           num_steps=flag_int(flags.get("--speculative-num-steps")),
                           eagle_topk=flag_int(flags.get("--speculative-eagle-topk")),
                           num_draft_tokens=flag_int(flags.get("--speculative-num-draft-tokens")),
                           config=cfg if isinstance(cfg, str) else None, **launch_booleans(flags, env, v))
    except (OSError, ValueError):
        return out, None
    if e.enabled:
        out["--speculative-num-steps"] = e.num_steps
        out["--speculative-eagle-topk"] = e.eagle_topk
        out["--speculative-num-draft-tokens"] = e.num_draft_tokens
    return out, e


# -- values SGLang reads without checking -------------------------------------------------------

#: The numeric slot keys and what SGLang does with them (``AdaptiveStepSlot`` /
#: ``AdaptiveSpeculativeParams``: ``cfg.get(key, default)``, no type check).
_NUMERIC_KEYS = ("ema_alpha", "update_interval", "warmup_batches", "down_hysteresis", "up_hysteresis",
                 "ceiling_coeff")


@dataclass(frozen=True)
class ConfigIssue:
    """Something in an adaptive config that SGLang ``version`` reads without a start-up check.

    ``kind``: ``unknown_key`` (never read: a typo, or a key of another release), ``type`` (not a
    number / not a list of ints: the controller raises ``TypeError`` when it first uses it, in the
    scheduler, while serving), ``range`` (a number SGLang accepts that breaks the controller:
    ``update_interval`` 0 is a ``ZeroDivisionError``; ``ema_alpha`` outside (0, 1] never adapts or
    overshoots), ``zero_steps`` (a steps-0 candidate on a flat release, which has no no-drafting
    path).  ``where``: ``"top level"`` or ``"slot '8'"``; ``fatal``: SGLang fails (else it runs
    worse than meant); ``suggestion``: the nearest known key for ``unknown_key``.
    """

    kind: str
    where: str
    key: str
    value: Any
    message: str
    fatal: bool
    suggestion: str | None = None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_entry(d: Mapping[str, Any], where: str, version: str, keyed: bool, out: list[ConfigIssue]) -> None:
    import difflib

    known = SLOT_KEYS if keyed else SLOT_KEYS[:-1]
    for key, val in d.items():
        if str(key).isdigit():
            continue
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            extra = " (ceiling_coeff arrives in 0.5.13)" if key == "ceiling_coeff" else ""
            out.append(ConfigIssue("unknown_key", where, str(key), val,
                                   f"{where}: SGLang {version} never reads {key!r}{extra}", False,
                                   near[0] if near else None))
            continue
        if key == "candidate_steps":
            if keyed:
                continue  # validated at start-up (_load_adaptive_config)
            ok = isinstance(val, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in val)
            if not ok or any(s < 0 for s in val):
                out.append(ConfigIssue("type", where, key, val,
                                       f"{where}: candidate_steps={val!r} is not a list of step counts ≥ 1", True))
            elif 0 in val:
                out.append(ConfigIssue("zero_steps", where, key, val,
                                       f"{where}: candidate_steps={val!r} has a steps-0 (no drafting) tier", True))
            continue
        if not _number(val):
            out.append(ConfigIssue("type", where, key, val, f"{where}: {key}={val!r} is not a number", True))
        elif key == "update_interval" and val == 0:
            out.append(ConfigIssue("range", where, key, val, f"{where}: update_interval=0 (the decision "
                                   "interval is a modulus)", True))
        elif key == "ema_alpha" and not 0 < val <= 1:
            what = "the EMA never moves, the slot never adapts" if val == 0 else \
                "the EMA is not a weighted average and overshoots"
            out.append(ConfigIssue("range", where, key, val, f"{where}: ema_alpha={val} is outside (0, 1]: {what}",
                                   False))


def lint_config(raw: Any, version: str) -> list[ConfigIssue]:
    """The :class:`ConfigIssue` s of a parsed JSON config for SGLang ``version`` (empty when the
    JSON is not an object: :func:`parse_config` reports that).  Flat releases read the top-level
    keys; keyed releases read digit-keyed slots and merge the other top-level keys into each."""
    v = str(parse_version(version))
    if not isinstance(raw, dict):
        return []
    keyed = _keyed(v)
    out: list[ConfigIssue] = []
    _check_entry(raw, "top level", v, keyed, out)
    if keyed:
        for key, entry in raw.items():
            if str(key).isdigit() and isinstance(entry, dict):
                _check_entry(entry, f"slot {str(key)!r}", v, keyed, out)
    return out


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
