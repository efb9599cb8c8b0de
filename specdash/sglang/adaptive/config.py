"""SGLang's adaptive config by release: slots, parse (as that release's loader), render, defaults, lint.

Part of :mod:`specdash.sglang.adaptive` (its docstring describes the mechanism).
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specdash.sglang.versions import has_feature, parse_version

__all__ = [
    "SLOT_KEYS",
    "AdaptiveConfig",
    "AdaptiveConfigError",
    "AdaptiveSlot",
    "ConfigIssue",
    "default_config",
    "lint_config",
    "parse_config",
    "render_config",
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
    path), ``dead_band`` (``down_hysteresis`` ≥ ``up_hysteresis`` in a slot of two or more candidates:
    :func:`dead_band_issue`).  ``where``: ``"top level"`` or ``"slot '8'"``; ``fatal``: SGLang fails (else it runs
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


def dead_band_issue(entry: Mapping[str, Any], where: str) -> ConfigIssue | None:
    """A ``dead_band`` issue when the slot's hysteresis leaves no dead band (None otherwise, or when a
    value is not a number: the type check reports that).

    SGLang climbs from candidate c to the next when EMA > c − 0.5 + up_hysteresis and drops from the next
    back to c when EMA ≤ c − 0.5 + down_hysteresis (``AdaptiveStepSlot._recompute_params``,
    ``srt/speculative/adaptive_spec_params.py``, 0.5.14; the EMA is kept across a switch).  With
    down ≥ up an EMA between the two thresholds climbs at c and drops back at the next decision, every
    ``update_interval`` batches, for as long as the acceptance stays there; SGLang's defaults (0.0 /
    −0.25) keep a band of 0.25."""
    steps = entry.get("candidate_steps", list(AdaptiveSlot.from_dict({}).candidate_steps))
    up = entry.get("up_hysteresis", AdaptiveSlot.up_hysteresis)
    down = entry.get("down_hysteresis", AdaptiveSlot.down_hysteresis)
    if not (isinstance(steps, list) and _number(up) and _number(down)) or not down >= up:
        return None
    c = sorted({x for x in steps if isinstance(x, int) and not isinstance(x, bool)})
    if len(c) < 2:
        return None
    bands = ", ".join(f"{lo}↔{hi} for an EMA in ({lo - 0.5 + up:.2f}, {lo - 0.5 + down:.2f}]"
                      for lo, hi in itertools.pairwise(c) if lo > 0)
    return ConfigIssue("dead_band", where, "down_hysteresis", down,
                       f"{where}: down_hysteresis {down:g} ≥ up_hysteresis {up:g} leaves no dead band: the controller "
                       f"switches back and forth at every decision ({bands or 'between its candidates'})", False)


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
        shared = {k: val for k, val in raw.items() if not str(k).isdigit()}
        for key, entry in raw.items():
            if str(key).isdigit() and isinstance(entry, dict):
                _check_entry(entry, f"slot {str(key)!r}", v, keyed, out)
                if (i := dead_band_issue({**shared, **entry}, f"slot {str(key)!r}")) is not None:
                    out.append(i)
    elif (i := dead_band_issue(raw, "top level")) is not None:
        out.append(i)
    return out


