"""A generated adaptive config after a tune: schedule → SGLang's format → verified A/B → preset.

After ``specdash tune --live`` each concurrency of the verification sweep not measured yet gets
one live launch of two chain tiers at that load (so the fit sees how the round cost grows with
the batch instead of taking it from priors); then the fitted model (every measurement, tiers
included) gives the
best chain steps at each captured CUDA-graph decode batch size up to the top of the
verification sweep (:func:`specdash.advisor.adaptive_schedule`, SGLang's slots: a batch is
padded to a captured size and routed to the largest slot key ≤ it).  The slots are rendered in
the target release's format (:func:`specdash.sglang.adaptive.render_config`):

* 0.5.13+: keyed by batch size;
* 0.5.11–0.5.12: one flat slot — only when the schedule has one slot with two or more
  candidates (SGLang asserts two); otherwise it cannot be expressed and nothing is launched;
* before 0.5.14 a steps-0 candidate (no drafting) does not exist: it becomes steps 1;
* before 0.5.11 there is no adaptive speculation at all.

The config is then verified before it is recommended: at each concurrency of the sweep (by
default the suite's and a high one), the paired A/B (:func:`specdash.bench.ab.run_ab`, the
same prompts and repeats on both sides, bootstrap interval) of the adaptive launch against the
tune's best static setting.  It is recommended only when it is faster at one concurrency at
least and slower at none; otherwise the report says plainly that the static setting wins (or
ties: the adaptive mode's extra CUDA graphs and switches then buy nothing) and the preset stays
static.  A recommended config is saved beside the tuned preset, whose ``[speculative]
extra_args`` point at it (``--speculative-adaptive --speculative-adaptive-config <path>``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from specdash.profile import preset_path, profile_variant

#: The high end of the default verification sweep (at least 4 × the suite's concurrency).
HIGH_CONCURRENCY = 16


def default_sweep(concurrency: int, batch_sizes: Sequence[int] | None = None) -> list[int]:
    """The suite's concurrency and a high one (max(16, 4 × it), capped at the largest captured
    decode batch size, so the high point still runs CUDA graphs)."""
    c = max(1, int(concurrency))
    high = max(HIGH_CONCURRENCY, 4 * c)
    if batch_sizes:
        high = min(high, max(batch_sizes))
    if high <= c:
        high = 2 * c
    return [c, high]


def schedule_sizes(batch_sizes: Sequence[int] | None, sweep: Sequence[int]) -> list[int]:
    """The batch sizes the schedule is planned at: the captured ones up to the sweep's top (the
    sweep's points themselves when the server did not say)."""
    top = max(sweep)
    sizes = sorted({int(b) for b in (batch_sizes or []) if 1 <= int(b) <= top})
    return sizes or sorted({int(c) for c in sweep})


def release_slots(schedule, version: str) -> tuple[dict[int, Any], list[str]]:
    """The schedule's slots as :class:`~specdash.sglang.adaptive.AdaptiveSlot` s the release can
    run: steps 0 becomes 1 before 0.5.14; neighbours that end up identical merge."""
    from specdash.sglang.adaptive import AdaptiveSlot
    from specdash.sglang.versions import has_feature

    notes: list[str] = []
    zero = has_feature("adaptive_zero_steps", version)
    out: dict[int, AdaptiveSlot] = {}
    prev = None
    for key, d in sorted(schedule.to_slots().items()):
        cands = tuple(sorted({int(s) for s in d["candidate_steps"]}))
        if not zero and 0 in cands:
            cands = tuple(sorted({1 if s == 0 else s for s in cands}))
            notes.append(f"slot {key}: SGLang {version} has no steps-0 tier (0.5.14+): steps 1 instead")
        slot = AdaptiveSlot(cands, up_hysteresis=float(d["up_hysteresis"]), down_hysteresis=float(d["down_hysteresis"]),
                            ceiling_coeff=float(d.get("ceiling_coeff") or 0.0))
        if prev is not None and prev == slot:
            continue
        out[int(key)] = slot
        prev = slot
    return out, notes


def render(slots: dict[int, Any], version: str) -> tuple[dict | None, str | None]:
    """(the config SGLang ``version`` reads, None) or (None, why it cannot be expressed)."""
    from specdash.sglang.adaptive import AdaptiveConfigError, lint_config, render_config
    from specdash.sglang.versions import has_feature

    if not has_feature("adaptive_spec", version):
        return None, f"SGLang {version} has no adaptive speculation (--speculative-adaptive arrived in 0.5.11)"
    cands = {s for slot in slots.values() for s in slot.candidate_steps}
    if len(cands) < 2:
        return None, (f"the schedule runs steps {sorted(cands)} at every batch size: that is a static setting, "
                      "nothing adaptive to launch")
    try:
        cfg = render_config(slots, version)
    except AdaptiveConfigError as exc:
        if not has_feature("adaptive_keyed_config", version):
            return None, (f"cannot be expressed for SGLang {version}: it reads one flat adaptive config "
                          f"({exc})")
        return None, f"cannot be expressed for SGLang {version}: {exc}"
    bad = [i for i in lint_config(cfg, version) if i.fatal]
    if bad:  # a value SGLang would accept at start-up and then fail on while serving
        return None, f"SGLang {version} would fail on it while serving: {bad[0].message}"
    return cfg, None


def launch_steps(slots: dict[int, Any], best, first_batch: int) -> int:
    """The ``--speculative-num-steps`` of the adaptive launch: the best static chain's steps when
    they are a candidate (0.5.13+ refuses a launch step count outside every slot), else the
    slot's middle candidate at the sweep's first concurrency — never 0 (SGLang builds the launch
    state as a drafting one)."""
    union = sorted({s for slot in slots.values() for s in slot.candidate_steps if s > 0})
    if best.topk == 1 and best.steps in union:
        return best.steps
    keys = sorted(slots)
    key = max([k for k in keys if k <= first_batch] or [keys[0]])
    cands = [s for s in slots[key].candidate_steps if s > 0] or union
    return cands[len(cands) // 2]


def adaptive_profile(profile, steps: int, config: Path, *, name: str, version: str | None = None):
    """``profile`` launched adaptively with ``config``: steps / topk 1 / draft tokens steps + 1 and
    ``[speculative] extra_args`` += ``--speculative-adaptive --speculative-adaptive-config <config>``
    (plus ``--disable-overlap-schedule`` where the release needs it, 0.5.11)."""
    from specdash.sglang.versions import has_feature

    sp = profile.speculative
    extra = [a for a in (sp.extra_args if sp else []) if a not in ("--speculative-adaptive",)]
    if "--speculative-adaptive-config" in extra:
        i = extra.index("--speculative-adaptive-config")
        del extra[i:i + 2]
    extra += ["--speculative-adaptive", "--speculative-adaptive-config", str(config)]
    if version and has_feature("adaptive_requires_no_overlap", version) and "--disable-overlap-schedule" not in extra:
        extra.append("--disable-overlap-schedule")
    return profile_variant(profile, {"num_steps": int(steps), "eagle_topk": 1, "num_draft_tokens": int(steps) + 1,
                                     "extra_args": extra}, name=name)


def _repeats(n_prompts: int, base: int, concurrency: int) -> int:
    """Repeats so that each side sends at least 2 × concurrency requests (the batch stays full)."""
    return max(int(base), math.ceil(2 * concurrency / max(1, n_prompts)))


def _sweep_pair(measurements, baseline, c: int, best) -> tuple[int, int]:
    """The two chain tiers to measure at concurrency ``c``: the best static chain's steps and a
    cheaper chain two steps below the lower of those and the model's best chain there (a round
    costs more as the batch grows, so fewer steps tend to pay at a higher load; the slope between
    the two is what the schedule needs)."""
    from specdash.advisor import adaptive_schedule

    s = best.steps if best.topk == 1 else None
    try:
        k = adaptive_schedule(measurements, [c], baseline=baseline).batches[0].steps
    except ValueError:
        k = s or 3
    hi = s if s else max(2, int(k))
    lo = max(1, min(int(k), hi) - 2)
    if lo == hi:
        hi = lo + 2
    return lo, hi


async def schedule_and_verify(profile, suite, measurements, best, baseline, *, version: str, log, opts, tdir: Path,
                              sweep: Sequence[int] | None = None, say: Callable[[str], None] | None = None,
                              pays: bool | None = None, batch_sizes: Sequence[int] | None = None,
                              live=None) -> tuple[dict[str, Any], list]:
    """Plan, render, write and verify the adaptive schedule (module docstring); returns the
    report's ``adaptive_schedule``: ``{target_version, sweep, batch_sizes, sweep_pairs (the live
    pairs measured at the sweep's other concurrencies), schedule (the advisor's, JSON), config (as
    written) | None, config_path | None, format ("keyed" | "flat"), launch_steps, not_expressible |
    None, verification: [{concurrency, speedup, ci95, verdict, pairs, static_tok_s, adaptive_tok_s,
    predicted_gain, compare_dir}], recommended, verdict, notes}``.

    ``live``: the tune's :class:`~specdash.bench.live.LivePlan` — with it, each sweep concurrency
    not measured yet first gets one live launch of two chain tiers there (the model's best chain
    at that load and the best static chain), so how the costs grow with the batch is measured,
    not taken from priors.  Returns (that dict, the measurements those launches added)."""
    from specdash.advisor import adaptive_schedule
    from specdash.bench.live import _captured_bs
    from specdash.bench.tune import variant
    from specdash.sglang.versions import has_feature

    say = say or (lambda m: None)
    conc = int(opts.concurrency or suite.suite.concurrency)
    if batch_sizes is None:
        for e in log.entries:
            if e.settings and e.run_dir:
                batch_sizes = _captured_bs({"run_dir": e.run_dir})
                if batch_sizes:
                    break
    sweep = sorted({int(c) for c in (sweep or default_sweep(conc, batch_sizes)) if int(c) >= 1})
    out: dict[str, Any] = {"target_version": version, "sweep": sweep, "batch_sizes": None, "schedule": None,
                           "config": None, "config_path": None, "format": None, "launch_steps": None,
                           "not_expressible": None, "verification": [], "recommended": False, "verdict": "",
                           "notes": []}
    if pays is False:
        out["verdict"] = "speculation does not pay with this draft: no adaptive schedule"
        return out, []
    if not has_feature("adaptive_spec", version):
        out["not_expressible"] = f"SGLang {version} has no adaptive speculation (0.5.11+)"
        out["verdict"] = f"no adaptive schedule: {out['not_expressible']}"
        return out, []
    out["sweep_pairs"] = []
    measurements = list(measurements)
    added: list = []
    if live is not None:
        done = {int(m.concurrency) for m in measurements if m.settings is not None}
        for c in sweep:
            if c in done:
                continue
            a, b = _sweep_pair(measurements, baseline, c, best)
            o = replace(opts, concurrency=c, repeats=_repeats(len(suite.prompts), opts.repeats or suite.suite.repeats, c))
            say(f"tune: adaptive schedule: chain tiers steps {a} and {b} at concurrency {c} in one adaptive launch")
            res = await live.measure_pair(log, suite, o, a, b, role="sweep")
            measurements.extend(res.measurements)
            added.extend((m, res.run_dir) for m in res.measurements)
            out["sweep_pairs"].append(res.to_json())
            say(f"tune: sweep c{c}: {res.summary()}")
    elif len({int(m.concurrency) for m in measurements if m.settings is not None}) < 2:
        out["notes"].append("relaunch mode: no live measurement at the sweep's other concurrencies — how the costs "
                            "grow with the batch comes from the model's priors")
    sizes = schedule_sizes(batch_sizes, sweep)
    out["batch_sizes"] = sizes
    if not batch_sizes:
        out["notes"].append("the server did not report its captured CUDA-graph batch sizes: planned at the sweep's "
                            "concurrencies only")
    try:
        sched = adaptive_schedule(measurements, sizes, baseline=baseline)
    except ValueError as exc:
        out["verdict"] = f"no adaptive schedule: {exc}"
        return out, added
    out["schedule"] = sched.to_json()
    out["model_verdict"] = sched.verdict
    slots, notes = release_slots(sched, version)
    out["notes"] += notes
    cfg, why = render(slots, version)
    if cfg is None:
        out["not_expressible"] = why
        out["verdict"] = f"no adaptive config: {why} — keep the static setting {best.label()}"
        say(f"tune: adaptive schedule: {out['verdict']}")
        return out, added
    out["format"] = "keyed" if has_feature("adaptive_keyed_config", version) else "flat"
    path = Path(tdir) / f"adaptive-{version}.json"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    out["config"], out["config_path"] = cfg, str(path)
    steps = launch_steps(slots, best, sweep[0])
    out["launch_steps"] = steps
    say(f"tune: adaptive schedule for SGLang {version} ({out['format']}, slots {sorted(slots)}) written to {path}; "
        f"verifying it against {best.label()} at concurrency {', '.join(map(str, sweep))}")
    static = variant(profile, best.steps, best.topk, best.draft_tokens, suffix="static")
    adapt = adaptive_profile(profile, steps, path, name=f"{profile.name}-adaptive", version=version)
    pred = {p.batch_size: p for p in sched.batches}
    for c in sweep:
        o = replace(opts, concurrency=c, repeats=_repeats(len(suite.prompts), opts.repeats or suite.suite.repeats, c))
        _, cmp = await log.ab(static, adapt, None, suite, o, rounds=1, role="verify")
        ov = cmp.get("overall") or {}
        near = min(pred, key=lambda b: (abs(b - c), b)) if pred else None
        p = pred.get(near) if near is not None else None
        row = {"concurrency": c, "speedup": cmp.get("speedup"), "ci95": cmp.get("ci95"), "verdict": cmp.get("verdict"),
               "pairs": cmp.get("pairs"), "static_tok_s": (ov.get("a") or {}).get("tok_s"),
               "adaptive_tok_s": (ov.get("b") or {}).get("tok_s"), "compare_dir": cmp.get("compare_dir"),
               "predicted_gain": (p.schedule_tok_s / p.static_tok_s) if p and p.static_tok_s else None}
        out["verification"].append(row)
        say(f"tune: adaptive vs static at concurrency {c}: ×{row['speedup'] or 0:.3f} "
            f"[{_f(row['ci95'], 0)}, {_f(row['ci95'], 1)}] ({row['verdict']})")
    faster = [r["concurrency"] for r in out["verification"] if r["verdict"] == "faster"]
    slower = [r["concurrency"] for r in out["verification"] if r["verdict"] == "slower"]
    figs = "; ".join(f"c{r['concurrency']}: ×{(r['speedup'] or 0):.3f} [{_f(r['ci95'], 0)}, {_f(r['ci95'], 1)}] "
                     f"{r['verdict']}" for r in out["verification"])
    if faster and not slower:
        out["recommended"] = True
        out["verdict"] = (f"the adaptive schedule beats the best static setting ({best.label()}) at concurrency "
                          f"{', '.join(map(str, faster))} and is slower nowhere ({figs}): recommended")
    elif slower:
        out["verdict"] = (f"a static setting wins: {best.label()} is faster than the adaptive schedule at concurrency "
                          f"{', '.join(map(str, slower))} ({figs}) — the schedule is not recommended; launch without "
                          "--speculative-adaptive")
    else:
        out["verdict"] = (f"a static setting ties: the adaptive schedule is no faster than {best.label()} at any "
                          f"verified concurrency ({figs}) — the schedule is not recommended (its extra CUDA graphs "
                          "and switches buy nothing); launch without --speculative-adaptive")
    if sched.static_wins and out["recommended"]:
        out["notes"].append(f"the model expected a static setting to win ({sched.verdict}); the paired A/B says "
                            "otherwise, and the measurement decides")
    say(f"tune: {out['verdict']}")
    return out, added


def _f(ci, i: int) -> str:
    try:
        return f"{float(ci[i]):.3f}"
    except (TypeError, ValueError, IndexError):
        return "?"


def adaptive_preset(profile, sched: dict[str, Any], preset_dir: Path):
    """(the preset profile, the config path beside it, a label) for a recommended schedule: the
    config is copied to ``<preset>.adaptive.json`` next to where the ``-tuned`` preset will go."""
    target = preset_path(f"{profile.name}-tuned", preset_dir)
    n, first = 1, target
    while target.exists():
        n += 1
        target = first.with_name(f"{first.stem}-{n}.toml")
    target.parent.mkdir(parents=True, exist_ok=True)
    # absolute: the preset is used from other directories (a relative path would only hold where tune ran)
    cfg_path = target.with_name(f"{target.stem}.adaptive.json").resolve()
    cfg_path.write_text(json.dumps(sched["config"], indent=2) + "\n", encoding="utf-8")
    steps = int(sched["launch_steps"])
    prof = adaptive_profile(profile, steps, cfg_path, name=profile.name, version=sched.get("target_version"))
    label = (f"EAGLE3 adaptive ({sched['format']} config {cfg_path.name}, launch steps {steps} / topk 1 / draft "
             f"tokens {steps + 1})")
    return prof, cfg_path, label
