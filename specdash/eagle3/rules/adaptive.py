"""ADAPTIVE: ``--speculative-adaptive`` / ``--speculative-adaptive-config FILE`` on the judged release.

Every release fact comes from :mod:`specdash.sglang.adaptive` (SGLang's adaptive speculation
restated per release: config format, start-up checks, launch resolution, fall-backs) and the
``adaptive_*`` rows of :data:`specdash.sglang.versions.FEATURES`; this module only turns them
into findings.  What is checked, in SGLang's own order:

* the flag on a release without it (before 0.5.11: argparse exits 2); a config without the flag;
* the combinations that make SGLang turn adaptive off at start-up and run the static settings
  (``adaptive_unsupported_reason``: algorithm, top-k — also an auto-chosen one before 0.5.14 —,
  attention DP, multi-layer EAGLE, two-batch overlap, PD multiplexing, 0.5.11's overlap scheduler);
* the config file: unreadable / not JSON, keys SGLang never reads, values it stores unchecked
  and later trips over, flat vs keyed format against the release, steps-0 tiers before 0.5.14;
* the launch ``--speculative-num-steps`` against the candidates (a ``ValueError`` from 0.5.13, added
  silently on 0.5.12, replaced by the nearest candidate on 0.5.11);
* draft tokens silently set to steps + 1 (0.5.14+), and an info line with the tiers that run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.adaptive import (
    SLOT_KEYS,
    AdaptiveConfig,
    AdaptiveConfigError,
    default_config,
    flag_int,
    launch_booleans,
    lint_config,
    parse_config,
    unsupported_reason,
)
from specdash.sglang.versions import has_feature, parse_version

_SPEC_ARGS_SRC = "srt/arg_groups/speculative_hook.py"
_PARAMS_SRC = "srt/speculative/adaptive_spec_params.py"


def _keyed(v: str) -> bool:
    return has_feature("adaptive_keyed_config", v)


def _disable_site(v: str) -> str:
    """Where SGLang ``v`` calls ``adaptive_unsupported_reason``."""
    if parse_version(v) < parse_version("0.5.13"):
        return "ServerArgs._handle_speculative_decoding (srt/server_args.py)"
    return f"_maybe_disable_adaptive ({_SPEC_ARGS_SRC})"


def _load_site(v: str) -> str:
    """When SGLang ``v`` reads the config file."""
    if _keyed(v):
        return (f"at start-up, before any weights load ({_SPEC_ARGS_SRC} / server_args.py call "
                f"resolve_candidate_steps_from_config, {_PARAMS_SRC} _load_adaptive_config)")
    return ("when the worker builds its AdaptiveController, after the weights load "
            f"(srt/speculative/adaptive_runtime_state.py, {_PARAMS_SRC} load_adaptive_config)")


def rule_adaptive(ctx: RuleContext) -> None:
    """ADAPTIVE: the adaptive flags on :attr:`RuleContext.version` (see the module docstring)."""
    f = ctx.flags
    asked = bool(f.get("--speculative-adaptive"))
    cfg_arg = f.get("--speculative-adaptive-config")
    if not asked and cfg_arg is None:
        return
    v = ctx.version
    if not has_feature("adaptive_spec", v):
        given = [n for n in ("--speculative-adaptive", "--speculative-adaptive-config") if n in f]
        ctx.add("ADAPTIVE", "error",
                f"{' / '.join(given)} on {ctx.judged}: that release has no adaptive speculation, so SGLang exits at "
                "start-up with code 2 ('unrecognized arguments')",
                "Runtime step switching arrived in SGLang 0.5.11 (srt/speculative/adaptive_spec_params.py and "
                "adaptive_runtime_state.py, the speculative_adaptive fields of srt/server_args.py); earlier releases' "
                "argparse parser rejects the flag before anything loads.",
                "launch SGLang ≥ 0.5.11 (and pin [server] sglang_version), or drop "
                + " and ".join(given), flags=given, version=v)
        return
    if not asked:
        ctx.add("ADAPTIVE", "warning",
                f"--speculative-adaptive-config {cfg_arg} without --speculative-adaptive: SGLang never reads the file",
                "The config is read only while speculative_adaptive is on (0.5.13+: handle_speculative_decoding in "
                f"{_SPEC_ARGS_SRC}; 0.5.11–0.5.12: the EAGLE worker builds its AdaptiveController only under "
                "server_args.speculative_adaptive, srt/speculative/eagle_worker*.py).",
                'add "--speculative-adaptive" to [speculative] extra_args, or drop --speculative-adaptive-config',
                config=cfg_arg, version=v)
        return
    if ctx.res.rejections and not has_feature("adaptive_launch_resolution", v):
        return  # SGLang refuses the speculative flags before it looks at adaptive (SPEC_ARGS says why)
    if _fell_back(ctx):
        return
    _config(ctx, cfg_arg if isinstance(cfg_arg, str) else None)


# --- fall-back to static settings -------------------------------------------------------------------


def _fell_back(ctx: RuleContext) -> bool:
    """Report a start-up fall-back (``adaptive_unsupported_reason``); True when adaptive is off."""
    f, v, res = ctx.flags, ctx.version, ctx.res
    early = has_feature("adaptive_launch_resolution", v)
    topk = flag_int(f.get("--speculative-eagle-topk")) if early else res.eagle_topk
    bools = launch_booleans(f, ctx.env, v)
    reason = unsupported_reason(v, algorithm=res.algorithm, topk=topk, **bools)
    if reason is None:
        return False
    line = f"speculative_adaptive disabled: {reason}. Falling back to static speculative params."
    why = (f"SGLang {v}'s adaptive_unsupported_reason ({_PARAMS_SRC}) returns this and {_disable_site(v)} logs "
           f"one WARNING ('{line}') and sets speculative_adaptive = False: the server starts, runs the launch "
           "settings and never switches tiers.")
    auto = topk is not None and topk != 1 and res.auto_chosen and f.get("--speculative-eagle-topk") is None
    cands = _candidates(ctx)
    mid = cands[len(cands) // 2] if cands else 3
    if res.algorithm not in ("EAGLE", "EAGLE3"):
        fix = (f"adaptive runs only with --speculative-algorithm EAGLE or EAGLE3; drop --speculative-adaptive for "
               f"{res.algorithm or 'a launch without speculation'}")
    elif topk != 1 and reason.startswith("speculative_eagle_topk"):
        if auto:
            why += (f" The top-k was chosen by SGLang: steps/topk/draft tokens were not given, so "
                    f"_auto_choose_speculative_params picked ({res.num_steps}, {res.eagle_topk}, "
                    f"{res.num_draft_tokens}) for {', '.join(ctx.target_archs) or 'this target'} before the adaptive "
                    "check (srt/server_args.py, 0.5.11–0.5.13); from 0.5.14 _init_adaptive_speculative_params sets an "
                    "unset top-k to 1 first.")
            fix = (f"pin a chain that is a candidate: [speculative] num_steps = {mid}, eagle_topk = 1, "
                   f"num_draft_tokens = {mid + 1}")
        else:
            fix = (f"[speculative] eagle_topk = 1 (adaptive runs chains; a tier of N steps verifies N + 1 tokens), "
                   f"num_steps = {mid}, num_draft_tokens = {mid + 1} — or drop --speculative-adaptive to keep the tree")
    elif reason.startswith("the overlap scheduler"):
        why += (" In 0.5.11 only EAGLEWorker (spec v1, srt/speculative/eagle_worker.py) builds the controller; 0.5.12 "
                "adds it to EAGLEWorkerV2 (eagle_worker_v2.py) and drops this check.")
        fix = 'add "--disable-overlap-schedule" to [server] extra_args (or use SGLang ≥ 0.5.12)'
    else:
        flag = {"enable_dp_attention": "--enable-dp-attention", "enable_multi_layer_eagle": "--enable-multi-layer-eagle",
                "enable_two_batch_overlap": "--enable-two-batch-overlap", "enable_pdmux": "--enable-pdmux"}
        culprit = next((fl for kw, fl in flag.items() if bools.get(kw)), "the conflicting flag")
        fix = f"drop {culprit} or --speculative-adaptive (they do not combine)"
    ctx.add("ADAPTIVE", "warning",
            f"--speculative-adaptive is turned off at start-up on SGLang {v}: {reason}; the server runs the static "
            f"settings (steps {res.num_steps}, topk {res.eagle_topk}, draft tokens {res.num_draft_tokens})",
            why, fix, reason=reason, log_line=line, version=v, auto_chosen=auto,
            effective={"steps": res.num_steps, "topk": res.eagle_topk, "draft_tokens": res.num_draft_tokens})
    return True


def _candidates(ctx: RuleContext) -> list[int]:
    try:
        cfg_arg = ctx.flags.get("--speculative-adaptive-config")
        return parse_config(cfg_arg if isinstance(cfg_arg, str) else None, ctx.version).candidate_steps()
    except (AdaptiveConfigError, OSError, ValueError, TypeError):
        return default_config(ctx.version).candidate_steps()


# --- the config file --------------------------------------------------------------------------------


def _read(ctx: RuleContext, path: str) -> tuple[bool, Any]:
    """(ok, parsed JSON) of the config file; problems become errors."""
    v = ctx.version
    p = Path(path).expanduser()
    ev = {"config": path, "version": v}
    if not p.is_file():
        ctx.add("ADAPTIVE", "error", f"--speculative-adaptive-config {path} does not exist",
                f"SGLang {v} opens it {_load_site(v)}: FileNotFoundError, and the server does not come up (a "
                "relative path is taken from the server's working directory).",
                "write the file, or give its absolute path", **ev)
        return False, None
    try:
        return True, json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        ctx.add("ADAPTIVE", "error", f"--speculative-adaptive-config {path} is not valid JSON: {exc}",
                f"SGLang {v} reads it with json.load {_load_site(v)}: json.decoder.JSONDecodeError ('{exc}'), and the "
                "server does not come up.", f"fix the JSON at line {exc.lineno}, column {exc.colno}",
                line=exc.lineno, column=exc.colno, **ev)
    except (OSError, UnicodeDecodeError) as exc:
        ctx.add("ADAPTIVE", "error", f"--speculative-adaptive-config {path} cannot be read: {exc}",
                f"SGLang {v} opens it {_load_site(v)} and fails the same way.", "make the file readable", **ev)
    return False, None


def _lint(ctx: RuleContext, raw: Any, path: str) -> bool:
    """Report the values SGLang stores unchecked; True when parsing can go on (no type errors)."""
    v = ctx.version
    issues = lint_config(raw, v)
    unknown = [i for i in issues if i.kind == "unknown_key"]
    if unknown:
        parts = [f"{i.key!r} ({i.where}" + (f"; did you mean {i.suggestion!r}?" if i.suggestion else "") + ")"
                 for i in unknown]
        known = SLOT_KEYS if _keyed(v) else SLOT_KEYS[:-1]
        ctx.add("ADAPTIVE", "warning",
                f"{path}: keys SGLang {v} never reads: {', '.join(parts)} — their defaults run instead",
                f"SGLang reads each slot key with cfg.get(key, default) ({'AdaptiveStepSlot.__init__' if _keyed(v) else 'AdaptiveSpeculativeParams.__init__'}, "
                f"{_PARAMS_SRC}) and ignores every other key without a message; {v} reads {', '.join(known)}"
                + (" and digit batch-size keys" if _keyed(v) else "") + ".",
                "; ".join(f"rename {i.key!r} to {i.suggestion!r}" if i.suggestion else f"remove {i.key!r}"
                          for i in unknown),
                config=path, keys=[i.key for i in unknown], suggestions={i.key: i.suggestion for i in unknown},
                version=v)
    ok = True
    for i in issues:
        if i.kind == "type":
            ok = False
            ctx.add("ADAPTIVE", "error",
                    f"{path}: {i.message}: SGLang {v} stores it without a check and the adaptive controller raises "
                    "TypeError when it first uses it — in the scheduler, at the first decode batches, taking the "
                    "server down", f"The slot keys are read with cfg.get(key, default) and used in arithmetic by "
                    f"AdaptiveStepSlot.update / _recompute_params ({_PARAMS_SRC}; AdaptiveSpeculativeParams before "
                    "0.5.13); only candidate_steps of keyed configs is validated at start-up.",
                    f"give {i.key} a number" if i.key != "candidate_steps" else
                    "candidate_steps = a list of step counts, e.g. [1, 3, 7]",
                    config=path, where=i.where, key=i.key, value=i.value, version=v)
        elif i.kind == "range":
            ctx.add("ADAPTIVE", "error" if i.fatal else "warning",
                    f"{path}: {i.message}" + (": the first decision after warm-up raises ZeroDivisionError (integer "
                                              "modulo by zero) in the scheduler" if i.key == "update_interval" else ""),
                    f"SGLang {v} decides when (batch_count - warmup_batches) % update_interval == 0 and updates "
                    f"ema = (1 - ema_alpha) * ema + ema_alpha * accepted ({_PARAMS_SRC}); neither value is checked.",
                    "update_interval ≥ 1 (default 5)" if i.key == "update_interval" else
                    "ema_alpha in (0, 1] (default 0.2)",
                    config=path, where=i.where, key=i.key, value=i.value, version=v)
        elif i.kind == "dead_band":
            ctx.add("ADAPTIVE", "warning",
                    f"{path}: {i.message} — each switch changes the draft's CUDA-graph runtime state, and an "
                    "acceptance near the thresholds keeps it switching",
                    f"SGLang {v} climbs from c when ema > c - 0.5 + up_hysteresis and drops back to c when "
                    f"ema <= c - 0.5 + down_hysteresis, and keeps the EMA across a switch "
                    f"(AdaptiveStepSlot._recompute_params, {_PARAMS_SRC}); its defaults (up 0.0, down -0.25) keep "
                    "a band of 0.25 between the two.",
                    "set up_hysteresis above down_hysteresis (SGLang's defaults: 0.0 and -0.25), or let "
                    "`specdash tune --live` generate the slot", config=path, where=i.where,
                    value=i.value, version=v)
        elif i.kind == "zero_steps":
            ok = False
            ctx.add("ADAPTIVE", "error",
                    f"{path}: {i.message}, which SGLang {v} cannot run: steps 0 arrives in 0.5.14",
                    f"0.5.11–0.5.12 do not validate candidate_steps (load_adaptive_config, {_PARAMS_SRC}) and build a "
                    "runtime state with 0 draft steps, but their EAGLE draft has no zero-step path: the score list "
                    "is empty and organize_draft_results (srt/speculative/eagle_utils.py) calls torch.cat on it "
                    "(RuntimeError). 0.5.14 adds the no-drafting verify (eagle_worker_v2.py "
                    "_build_trivial_verify_input).",
                    "remove 0 from candidate_steps (the smallest tier is steps 1), or use SGLang ≥ 0.5.14 with a "
                    "batch-size keyed config", config=path, where=i.where, value=i.value, version=v)
    return ok


def _flat_to_keyed(raw: dict) -> str:
    return json.dumps({"1": raw})


def _keyed_to_flat(raw: dict) -> str | None:
    """The flat equivalent of a keyed file's smallest slot (shared keys merged, no ceiling_coeff)."""
    keys = sorted(int(k) for k in raw if str(k).isdigit() and isinstance(raw[k], dict))
    if not keys:
        return None
    shared = {k: val for k, val in raw.items() if not str(k).isdigit()}
    slot = {**shared, **raw[str(keys[0])]}
    slot.pop("ceiling_coeff", None)
    return json.dumps(slot)


def _config(ctx: RuleContext, path: str | None) -> None:
    v, res = ctx.version, ctx.res
    raw: Any = None
    if path is not None:
        ok, raw = _read(ctx, path)
        if not ok or not _lint(ctx, raw, path):
            return
    steps = res.num_steps
    where = path or f"SGLang {v}'s default config"
    ev = {"config": path, "version": v, "launch_steps": steps}
    try:
        cfg = parse_config(raw, v, launch_steps=steps)
    except AdaptiveConfigError as exc:
        _refused(ctx, exc, raw, where, steps, ev)
        return
    except (ValueError, TypeError) as exc:  # a value lint_config let through
        ctx.add("ADAPTIVE", "error", f"{where} cannot be read as SGLang {v} reads it: {exc}",
                f"{_PARAMS_SRC} stores the values unchecked and fails when it uses them.", "fix the value", **ev)
        return
    if cfg.ignored:
        flat = _keyed_to_flat(raw)
        digit = sorted((k for k in raw if str(k).isdigit()), key=int)
        ctx.add("ADAPTIVE", "warning",
                f"{path} is keyed by batch size ({', '.join(digit)}) but SGLang {v} reads a flat config: the slots are "
                f"silently ignored and the defaults run (candidate_steps {list(cfg.slots[1].candidate_steps)})",
                f"0.5.11–0.5.12's load_adaptive_config and AdaptiveSpeculativeParams.__init__ ({_PARAMS_SRC}) read "
                "cfg.get(key) at the top level only, with no message; batch-size keyed configs arrive in 0.5.13 "
                "(_load_adaptive_config).",
                (f"for {v} write one flat slot: {flat}" if flat else "write a flat config") + ", or use SGLang ≥ 0.5.13",
                slots=digit, flat_equivalent=flat, **ev)
    _launch_steps(ctx, cfg, steps, where, ev)
    _shared_logits_buffer(ctx, cfg, where, ev)
    _draft_tokens(ctx, steps)
    _summary(ctx, cfg, steps, where)


def _shared_logits_buffer(ctx: RuleContext, cfg: AdaptiveConfig, where: str, ev: dict) -> None:
    """ADAPTIVE error where the release sizes the shared logits buffer of its CUDA-graph replays from the
    launch draft tokens only (facts ``adaptive.shared_logits_buffer.sized_for_adaptive_candidates`` false:
    ``ModelRunner.max_decode_logits_rows`` = max captured batch × launch tokens per request) while a
    candidate tier drafts more tokens: the graph capture of that tier fails on every TP rank
    (sglang#30549; 0.5.19's ``max_decode_logits_rows`` takes the adaptive candidates into account)."""
    from specdash.sglang.facts import facts_for, first_release_with

    facts = facts_for(ctx.version)
    buf = facts.adaptive.get("shared_logits_buffer") if facts is not None else None
    launch_tokens = ctx.res.num_draft_tokens
    if not buf or buf.get("sized_for_adaptive_candidates") or not launch_tokens:
        return
    need = cfg.max_draft_tokens()
    if need <= launch_tokens:
        return
    bs = flag_int(ctx.flags.get("--cuda-graph-max-bs-decode")) or flag_int(ctx.flags.get("--cuda-graph-max-bs"))
    rows = f"{bs} × {launch_tokens} = {bs * launch_tokens}" if bs else f"max captured batch × {launch_tokens}"
    needs = f"{bs} × {need} = {bs * need}" if bs else f"max captured batch × {need}"
    fixed = first_release_with(lambda r: bool(r.adaptive.get("shared_logits_buffer", {})
                                              .get("sized_for_adaptive_candidates")), after=ctx.version)
    msg = buf.get("message", "shared logits buffer holds {self.max_rows} rows but caller needs {rows}")
    ctx.add("ADAPTIVE", "error",
            f"--speculative-adaptive on SGLang {ctx.version} crashes at start-up: the shared logits buffer is sized "
            f"for the launch's {launch_tokens} draft tokens ({rows} rows) but the steps-{need - 1} tier of {where} "
            f"needs {needs}",
            f"SGLang {facts.release} {buf['src']} (ModelRunner.max_decode_logits_rows) sizes the buffer from "
            f"max(capture_bs) × the launch tokens per request only; capturing the larger tier's CUDA graph then "
            f"asserts '{msg}' ({buf.get('message_src', 'graph_shared_output.py')}) on every TP rank (sglang#30549)"
            + (f"; SGLang {fixed} sizes it for the adaptive candidates." if fixed else "."),
            (f"use SGLang {fixed} or later, or " if fixed else "")
            + f"launch with the largest tier: --speculative-num-steps {need - 1} --speculative-num-draft-tokens {need} "
            "(or drop --speculative-adaptive)", launch_draft_tokens=launch_tokens, largest_tier_draft_tokens=need,
            cuda_graph_max_bs=bs, fixed_in=fixed, source=f"SGLang {facts.release} {buf['src']}", case="sglang#30549",
            **ev)


def _refused(ctx: RuleContext, exc: AdaptiveConfigError, raw: Any, where: str, steps: int | None, ev: dict) -> None:
    v = ctx.version
    msg = str(exc)
    start = f"SGLang {v} raises {exc.exception} {_load_site(v)}: '{msg}'; the server does not come up."
    if "integer-string" in msg and isinstance(raw, dict):
        ctx.add("ADAPTIVE", "error", f"{where} is a flat config, but SGLang {v} reads only batch-size keyed configs",
                start + f" From 0.5.13 ({_PARAMS_SRC} _load_adaptive_config) digit keys are slots and the other "
                "top-level keys are shared by all of them.",
                f"key it by batch size; one slot for every batch: {_flat_to_keyed(raw)}", flat_equivalent=None,
                keyed_equivalent=_flat_to_keyed(raw), **ev)
    elif "is not in the adaptive config candidate_steps" in msg:
        cands = parse_config(raw, v).candidate_steps()
        early = has_feature("adaptive_launch_resolution", v)
        fix = f"[speculative] num_steps = one of {cands}"
        if early:
            fix += f" (or leave it unset: SGLang then starts at the middle candidate, {cands[len(cands) // 2]})"
        site = "_init_adaptive_speculative_params" if early else "validate_adaptive_initial_steps"
        ctx.add("ADAPTIVE", "error", f"--speculative-num-steps {steps} is not a candidate of {where} {cands}",
                start + f" ({site}, {_SPEC_ARGS_SRC} / {_PARAMS_SRC}: the launch runtime state must be one of the "
                "tiers).", fix, candidates=cands, **ev)
    elif "positive ints" in msg and isinstance(raw, dict) and any(
            isinstance(e, dict) and isinstance(e.get("candidate_steps"), list) and 0 in e["candidate_steps"]
            for e in raw.values()):
        ctx.add("ADAPTIVE", "error", f"{where} has a steps-0 (no drafting) tier, which SGLang {v} refuses: steps 0 "
                "arrives in 0.5.14", start + " 0.5.14 allows non-negative steps and adds the no-drafting verify "
                "(eagle_worker_v2.py _build_trivial_verify_input).",
                "remove 0 from candidate_steps, or use SGLang ≥ 0.5.14", **ev)
    elif "at least 2 distinct" in msg:
        ctx.add("ADAPTIVE", "error", f"{where}: candidate_steps must hold at least 2 distinct step counts on SGLang {v}",
                f"AdaptiveSpeculativeParams.__init__ ({_PARAMS_SRC}, 0.5.11–0.5.12) asserts it when the worker "
                f"builds the controller: AssertionError('{msg}') after the weights load.",
                "list at least two step counts, e.g. [1, 3]", **ev)
    else:
        ctx.add("ADAPTIVE", "error", f"{where}: SGLang {v} refuses the adaptive config: {msg}", start,
                "fix the config as the message says", **ev)


def _launch_steps(ctx: RuleContext, cfg: AdaptiveConfig, steps: int | None, where: str, ev: dict) -> None:
    """0.5.12 adds a missing launch step count to the tiers; 0.5.11 starts at the nearest candidate."""
    if steps is None or cfg.keyed:
        return
    v = ctx.version
    if cfg.added_initial is not None:
        given = sorted(set(cfg.slots[1].candidate_steps) - {cfg.added_initial})
        ctx.add("ADAPTIVE", "warning",
                f"--speculative-num-steps {steps} is not a candidate of {where} {given}: SGLang {v} adds it, so the "
                f"server builds and switches between {list(cfg.slots[1].candidate_steps)}",
                f"AdaptiveSpeculativeParams.__init__ ({_PARAMS_SRC}, 0.5.12) adds the launch steps so the pre-built "
                f"runtime state is reused, with one INFO line ('Adding initial speculative_num_steps={steps} to "
                f"candidate_steps={given} …'); each extra tier costs a runtime state (CUDA graphs).",
                f"[speculative] num_steps = one of {given}, or list {steps} in candidate_steps yourself",
                candidates=given, effective_candidates=list(cfg.slots[1].candidate_steps), **ev)
        return
    start = cfg.initial_steps(1, steps)
    if start != steps:
        cands = list(cfg.slots[1].candidate_steps)
        ctx.add("ADAPTIVE", "warning",
                f"--speculative-num-steps {steps} is not a candidate of {where} {cands}: SGLang {v} starts at the "
                f"nearest one, {start}, and keeps the unused steps-{steps} runtime state allocated",
                f"AdaptiveSpeculativeParams.__init__ ({_PARAMS_SRC}, 0.5.11) picks the nearest candidate (ties: the "
                "larger); the worker still registers its launch state under the launch steps, whose attention "
                "backend and CUDA graphs are never used (0.5.12's comment on this leak adds the launch steps instead).",
                f"[speculative] num_steps = {start} (or another of {cands})", candidates=cands, starts_at=start, **ev)


def _draft_tokens(ctx: RuleContext, steps: int | None) -> None:
    """0.5.14+: draft tokens := steps + 1 without the usual warning line."""
    v = ctx.version
    if not has_feature("adaptive_launch_resolution", v) or steps is None:
        return
    asked = flag_int(ctx.flags.get("--speculative-num-draft-tokens"))
    # ctx.flags are the profile's flags; ctx.res saw them after SGLang's adaptive resolution
    eff = ctx.res.num_draft_tokens
    if asked is None or eff is None or asked == eff:
        return
    ctx.add("ADAPTIVE", "warning",
            f"speculative_num_draft_tokens: asked {asked}, SGLang {v} runs {eff} (steps {steps} + 1) under "
            "--speculative-adaptive — without a log line",
            f"_init_adaptive_speculative_params ({_SPEC_ARGS_SRC}, 0.5.14+) sets speculative_num_draft_tokens = "
            "speculative_num_steps + 1 before the EAGLE-family checks, so the usual 'speculative_num_draft_tokens is "
            "adjusted to speculative_num_steps + 1' warning is never printed; every other tier verifies its steps + 1 "
            "too. Results describe the effective value.",
            f"[speculative] num_draft_tokens = {eff} (or leave it unset)", field="speculative_num_draft_tokens",
            asked=asked, effective=eff, log_line="", version=v)


def _summary(ctx: RuleContext, cfg: AdaptiveConfig, steps: int | None, where: str) -> None:
    v = ctx.version
    slots = {str(k): list(s.candidate_steps) for k, s in sorted(cfg.slots.items())}
    built = [s for s in cfg.candidate_steps() if s != steps]
    if cfg.added_initial is not None:
        built = [s for s in cfg.slots[1].candidate_steps if s != steps]
    zero = [k for k, c in slots.items() if 0 in c]
    asked_steps = flag_int(ctx.flags.get("--speculative-num-steps"))
    parts = [f"adaptive speculation on SGLang {v} with {where}: "
             + (f"slots by batch size {slots}" if cfg.keyed else f"candidate_steps {slots['1']} for every batch"),
             f"launch tier steps {steps} / draft tokens {steps + 1 if steps is not None else '?'}"
             + (" (steps not given: SGLang starts at the middle candidate)" if asked_steps is None and steps is not None
                and has_feature("adaptive_launch_resolution", v) else ""),
             f"{len(built)} more runtime state(s) built at start-up (steps {built})"]
    if zero:
        parts.append(f"batches routed to slot(s) {zero} can run steps 0 (no drafting: accept length 1.00 there "
                     "by design)")
    ctx.add("ADAPTIVE", "info", "; ".join(parts),
            "Each candidate gets its own runtime state (attention backends and CUDA graphs, "
            "srt/speculative/adaptive_runtime_state.py / eagle_worker_v2.py build_adaptive_runtime_state); "
            + ("decode batches are padded to a captured CUDA-graph size and routed to the largest slot key ≤ it "
               f"({_PARAMS_SRC} AdaptiveSpeculativeParams, 0.5.13+)" if cfg.keyed else
               f"one EMA decides for every batch ({_PARAMS_SRC}, 0.5.11–0.5.12)") + ".",
            "", slots=slots, launch_steps=steps, built=built, zero_step_slots=zero, version=v,
            config=ctx.flags.get("--speculative-adaptive-config"))
