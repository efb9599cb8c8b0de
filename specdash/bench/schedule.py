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

The config is verified only when the model predicts it beats the tune's pick (the best static
setting, chosen at the suite's concurrency) by :data:`VERIFY_MARGIN` or more at one of the sweep's
concurrencies (by default the suite's and a high one); otherwise no launch is spent and the static
setting is the recommendation ("predicted").  The verification is two launches — the static pick and
the adaptive launch, each running every concurrency of the sweep in one launch (``--sweep
concurrency=…``) — paired by prompt and repeat within each concurrency (bootstrap interval).  The
recommendation is stated per load range (:func:`load_ranges`: the static pick below N streams, the
adaptive schedule from there, or one static setting when it is as fast everywhere), with the one
setting a deployment whose load spans the ranges should launch.  When that is the adaptive schedule,
its config is saved beside the tuned preset, whose ``[speculative] extra_args`` point at it
(``--speculative-adaptive --speculative-adaptive-config <path>``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from specdash.profile import preset_path, profile_variant
from specdash.results import output_tok_s

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
                              live=None, force: bool = False) -> tuple[dict[str, Any], list]:
    """Plan, render, write and verify the adaptive schedule (module docstring); returns the
    report's ``adaptive_schedule``: ``{target_version, sweep, batch_sizes, sweep_pairs (the live
    pairs measured at the sweep's other concurrencies), schedule (the advisor's, JSON), config (as
    written) | None, config_path | None, format ("keyed" | "flat"), launch_steps, not_expressible |
    None, verification: [{concurrency, speedup, ci95, verdict, pairs, static_tok_s, adaptive_tok_s (mean
    per-request tok/s of the paired requests: the A/B's metric), static_total_tok_s, adaptive_total_tok_s
    (each launch's output tok/s at that concurrency, the unit of ``predicted``), switches (the adaptive
    launch's tier switches there), predicted_gain, compare_dir}], recommended, verdict, notes}``.

    ``live``: the tune's :class:`~specdash.bench.live.LivePlan` — with it, each sweep concurrency
    not measured yet first gets one live launch of two chain tiers there (the model's best chain
    at that load and the best static chain), so how the costs grow with the batch is measured,
    not taken from priors (a live tune measures its high concurrency inside its first chain launch,
    so this is rarely needed).  ``force``: run the A/B even when the model predicts the schedule gains less
    than :data:`VERIFY_MARGIN` everywhere (``specdash tune --verify-schedule``: the measurement decides, and
    a model that misjudges the schedule shows up as a ``predicted_gain`` far from the measured speedup).
    The dict also has ``predicted`` (per sweep concurrency: the schedule's
    and the pick's predicted tok/s and their ratio ``gain``) and ``load_ranges`` (:func:`load_ranges`).
    Returns (that dict, the measurements those launches added)."""
    from specdash.advisor import adaptive_schedule
    from specdash.bench.live import _captured_bs
    from specdash.profile.variants import variant
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
        sched = adaptive_schedule(measurements, sizes, baseline=baseline, static=best)
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
        out["load_ranges"] = [{"from": sweep[0], "to": None, "launch": "static", "settings": best.to_json()}]
        say(f"tune: adaptive schedule: {out['verdict']}")
        return out, added
    out["format"] = "keyed" if has_feature("adaptive_keyed_config", version) else "flat"
    path = Path(tdir) / f"adaptive-{version}.json"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    out["config"], out["config_path"] = cfg, str(path)
    steps = launch_steps(slots, best, sweep[0])
    out["launch_steps"] = steps
    pred = {p.batch_size: p for p in sched.batches}
    predicted = []
    for c in sweep:
        near = min(pred, key=lambda b: (abs(b - c), b)) if pred else None
        p = pred.get(near) if near is not None else None
        predicted.append({"concurrency": c, "batch_size": near,
                          "schedule_tok_s": p.schedule_tok_s if p else None,
                          "static_tok_s": p.static_tok_s if p else None,
                          "gain": (p.schedule_tok_s / p.static_tok_s) if p and p.static_tok_s else None})
    out["predicted"] = predicted
    worth = [r["concurrency"] for r in predicted if r["gain"] is not None and r["gain"] >= 1.0 + VERIFY_MARGIN]
    figs_pred = "; ".join(f"c{r['concurrency']}: ×{r['gain']:.3f}" for r in predicted if r["gain"] is not None)
    if not worth and force:
        out["notes"].append(f"verified on request (--verify-schedule): the model predicts less than "
                            f"{VERIFY_MARGIN:.0%} over {best.label()} at every load ({figs_pred})")
        worth = [r["concurrency"] for r in predicted]
    if not worth:
        top = max((r["gain"] for r in predicted if r["gain"] is not None), default=None)
        how = (f"is slower than {best.label()} at every load" if top is not None and top < 1.0 else
               f"beats {best.label()} by less than {VERIFY_MARGIN:.0%} at every load")
        out["verdict"] = (f"not verified: the model predicts the adaptive schedule {how} ({figs_pred}) — launch the "
                          "static setting; no launch was spent on the A/B")
        out["load_ranges"] = [{"from": sweep[0], "to": None, "launch": "static", "settings": best.to_json(),
                               "basis": "predicted"}]
        say(f"tune: adaptive schedule: {out['verdict']}")
        return out, added
    say(f"tune: adaptive schedule for SGLang {version} ({out['format']}, slots {sorted(slots)}) written to {path}; "
        f"predicted ×{max((r['gain'] for r in predicted if r['gain']), default=0):.2f} over {best.label()} at concurrency "
        f"{', '.join(map(str, worth))}: verifying it at concurrency {', '.join(map(str, sweep))} (one launch a side, "
        "every concurrency in it)")
    static = variant(profile, best.steps, best.topk, best.draft_tokens, suffix="static")
    adapt = adaptive_profile(profile, steps, path, name=f"{profile.name}-adaptive", version=version)
    o = replace(opts, repeats=opts.repeats or suite.suite.repeats)
    st_runs, st_recs, _ = await log.sweep(static, suite, o, sweep, "verify")
    ad_runs, ad_recs, _ = await log.sweep(adapt, suite, o, sweep, "verify")
    st_at = {int(r.get("concurrency") or 0): r for r in st_runs}
    ad_at = {int(r.get("concurrency") or 0): r for r in ad_runs}
    from specdash.bench.compare import build_comparison
    from specdash.bench.report import write_comparison
    from specdash.bench.rundir import RunDir

    for c, pr in zip(sweep, predicted, strict=True):
        cmp = build_comparison(st_recs.get(c, []), ad_recs.get(c, []), a_name=static.name, b_name=adapt.name)
        cdir = RunDir.create(opts.out_dir, f"compare-c{c}")
        write_comparison(cdir.path, cmp)
        ov = cmp.get("overall") or {}
        row = {"concurrency": c, "speedup": cmp.get("speedup"), "ci95": cmp.get("ci95"), "verdict": cmp.get("verdict"),
               "pairs": cmp.get("pairs"), "static_tok_s": (ov.get("a") or {}).get("tok_s"),
               "adaptive_tok_s": (ov.get("b") or {}).get("tok_s"), "compare_dir": str(cdir.path),
               "predicted_gain": pr["gain"],
               "static_total_tok_s": output_tok_s(st_at.get(c) or {}),
               "adaptive_total_tok_s": output_tok_s(ad_at.get(c) or {}),
               "switches": ((ad_at.get(c) or {}).get("adaptive") or {}).get("switches")}
        out["verification"].append(row)
        say(f"tune: adaptive vs static at concurrency {c}: ×{row['speedup'] or 0:.3f} "
            f"[{_f(row['ci95'], 0)}, {_f(row['ci95'], 1)}] ({row['verdict']}; "
            f"{row['switches'] if row['switches'] is not None else '?'} tier switches)")
    out["load_ranges"], out["verdict"], out["recommended"] = load_ranges(out["verification"], best)
    if sched.static_wins and out["recommended"]:
        out["notes"].append(f"the model expected a static setting to win ({sched.verdict}); the paired A/B says "
                            "otherwise, and the measurement decides")
    say(f"tune: {out['verdict']}")
    return out, added


#: The predicted gain of the adaptive schedule over the tune's pick, at some load, below which its A/B is
#: not launched: about the interval of one measured setting (two launches are dear on a real server).
VERIFY_MARGIN = 0.03


def verification_wanted(measurements, best, baseline, *, version: str, concurrency: int,
                        sweep: Sequence[int] | None = None, batch_sizes: Sequence[int] | None = None,
                        force: bool = False) -> bool:
    """Whether :func:`schedule_and_verify` would launch its A/B now (no launch here: the model's schedule
    for ``version``, expressible as a config, predicted to beat ``best`` by :data:`VERIFY_MARGIN` at some
    sweep concurrency, or at all with ``force``) — a live tune asks before it spends its last two launches
    on exploration."""
    from specdash.advisor import adaptive_schedule
    from specdash.sglang.versions import has_feature

    if not has_feature("adaptive_spec", version):
        return False
    sweep = sorted({int(c) for c in (sweep or default_sweep(concurrency, batch_sizes)) if int(c) >= 1})
    try:
        sched = adaptive_schedule(measurements, schedule_sizes(batch_sizes, sweep), baseline=baseline, static=best)
    except ValueError:
        return False
    slots, _ = release_slots(sched, version)
    if render(slots, version)[0] is None:
        return False
    if force:
        return True
    pred = {p.batch_size: p for p in sched.batches}
    for c in sweep:
        near = min(pred, key=lambda b: (abs(b - c), b)) if pred else None
        p = pred.get(near) if near is not None else None
        if p and p.static_tok_s and p.schedule_tok_s / p.static_tok_s >= 1.0 + VERIFY_MARGIN:
            return True
    return False


def load_ranges(rows: Sequence[dict[str, Any]], best) -> tuple[list[dict[str, Any]], str, bool]:
    """The recommendation per load range from the schedule's A/B rows (one per concurrency, ascending):
    ``(ranges, verdict, adaptive_recommended)``.

    Each verified concurrency goes to the side its paired A/B favours (``faster``: adaptive,
    ``slower``: static, no significant difference: static — the adaptive mode's extra CUDA graphs and
    switches buy nothing there); neighbouring concurrencies with the same side form a range, which starts
    at its first concurrency (the switch lies between two verified points: the verdict names both).  For a
    deployment whose load spans the ranges, the verdict names the one setting to launch: the side whose
    worst loss at any verified concurrency (1 − the other side's speedup there) is smaller.  Recommended:
    the adaptive schedule is that setting.
    """
    ranges: list[dict[str, Any]] = []
    for r in rows:
        side = "adaptive" if r.get("verdict") == "faster" else "static"
        if ranges and ranges[-1]["launch"] == side:
            ranges[-1]["to"] = r["concurrency"]
            continue
        ranges.append({"from": r["concurrency"], "to": r["concurrency"], "launch": side,
                       "settings": best.to_json() if side == "static" else None, "basis": "verified"})
    if ranges:
        ranges[-1]["to"] = None
    figs = "; ".join(f"c{r['concurrency']}: adaptive ×{(r['speedup'] or 0):.3f} [{_f(r['ci95'], 0)}, "
                     f"{_f(r['ci95'], 1)}] {r['verdict']}" for r in rows)
    sides = {x["launch"] for x in ranges}
    if sides == {"static"}:
        return ranges, (f"one static setting: {best.label()} is as fast as the adaptive schedule or faster at every "
                        f"verified load ({figs}) — launch it without --speculative-adaptive"), False
    if sides == {"adaptive"}:
        return ranges, (f"the adaptive schedule: faster than {best.label()} at every verified load ({figs}) — launch "
                        "it"), True
    loss = {"static": 0.0, "adaptive": 0.0}
    for r in rows:
        sp = r.get("speedup") or 1.0
        if r.get("verdict") == "faster":
            loss["static"] = max(loss["static"], 1.0 - 1.0 / sp)
        elif r.get("verdict") == "slower":
            loss["adaptive"] = max(loss["adaptive"], 1.0 - sp)
    parts = []
    for i, x in enumerate(ranges):
        nxt = ranges[i + 1]["from"] if i + 1 < len(ranges) else None
        what = best.label() + " (static)" if x["launch"] == "static" else "the adaptive schedule"
        if nxt is None:
            parts.append(f"{what} from {x['from']} streams on")
        else:
            prev_to = x["to"] if x["to"] is not None else x["from"]
            parts.append(f"{what} up to {prev_to} streams (the switch lies between {prev_to} and {nxt})")
    pick = min(loss, key=lambda k: (loss[k], k != "static"))
    verdict = ("by load: " + "; ".join(parts) + f" ({figs}). For a load that spans both: launch "
               + ("the adaptive schedule" if pick == "adaptive" else f"{best.label()} without --speculative-adaptive")
               + f" — its worst loss at a verified load is {loss[pick]:.0%}, the other's "
               + f"{loss['adaptive' if pick == 'static' else 'static']:.0%}")
    return ranges, verdict, pick == "adaptive"


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


def recommendation(best, sched: dict | None, pays: bool | None, concurrency: int) -> dict[str, Any]:
    """What to launch, per load range (the report's ``recommendation``): ``{"ranges": [{"from", "to",
    "launch": "static" | "adaptive" | "none", "settings", "basis"}], "text"}`` — the static pick at the
    tune's concurrency and up, unless the adaptive schedule's verification (or prediction) says
    otherwise for higher loads (:func:`load_ranges`)."""
    if pays is False:
        return {"ranges": [{"from": concurrency, "to": None, "launch": "none", "settings": None,
                            "basis": "measured"}],
                "text": "serve without speculation: it does not pay with this draft (see the advice)"}
    if sched and sched.get("load_ranges"):
        return {"ranges": sched["load_ranges"], "text": sched.get("verdict") or ""}
    return {"ranges": [{"from": concurrency, "to": None, "launch": "static", "settings": best.to_json(),
                        "basis": "measured"}],
            "text": f"{best.label()} (measured at concurrency {concurrency}; other loads were not measured)"}
