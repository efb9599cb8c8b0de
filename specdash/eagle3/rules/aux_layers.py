"""Which target layers SGLang captures for the head: AUX_LAYERS.

(Not ``aux.py``: ``AUX`` is a reserved device name on Windows, where a file of that name
cannot be checked out.)
"""

from __future__ import annotations

from specdash.checkpoint.reader import DraftInfo
from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.capture import capture_plan, capture_source, default_aux_ids, target_family
from specdash.sglang.versions import has_feature


def rule_aux(ctx: RuleContext) -> None:
    """AUX_LAYERS for an EAGLE3 head under EAGLE3: which target layers SGLang captures
    (:func:`specdash.sglang.capture.capture_plan`) against what the head's ``fc`` expects.

    Sources: ``spec_aux_hidden_state.py`` ``_resolve_eagle_aux_hidden_state`` (the target reads ids
    only from ``eagle_config``), ``llama_eagle3.py`` (``fc`` = Linear(hidden_in × num_aux, hidden)),
    ``models/llama.py`` / ``gpt_oss.py`` / ``deepseek_v2.py`` ``set_eagle3_layers_to_capture``.
    Always ends with an info finding stating the capture plan.
    """
    d, t = ctx.draft, ctx.target
    if d is None or ctx.algo != "EAGLE3" or d.head_kind != "eagle3":
        return
    ids_by = d.aux_layer_ids
    ec_ids = ids_by.get("eagle_config")
    top_ids = ids_by.get("top_level")
    others = {k: v for k, v in ids_by.items() if k not in ("eagle_config", "top_level")}
    ec = d.eagle_config or {}
    v = ctx.version
    if ec.get("use_aux_hidden_state") is False:
        ctx.add("AUX_LAYERS", "error", "eagle_config.use_aux_hidden_state is false",
                "The target then captures no aux states and sends 1 × hidden: the EAGLE3 fc is skipped as with "
                "--speculative-algorithm EAGLE (spec_aux_hidden_state.py, SGLang 0.5.23).",
                "set \"use_aux_hidden_state\": true in eagle_config")
    # fc width SGLang builds vs the checkpoint's fc.
    sg_aux = d.num_aux if has_feature("draft_fc_norm", v) else 3
    hidden_in = d.hidden_in
    fc_in = d.fc_in_features
    if hidden_in and fc_in and fc_in != sg_aux * hidden_in and abs((d.fc_multiple or 0) - 2) > 1e-6:
        src = ("num_aux_hidden_states" if d.num_aux_declared else "len(eagle_config ids)" if ec_ids else "default 3") \
            if has_feature("draft_fc_norm", v) else f"fixed 3 in SGLang {v}"
        ctx.add("AUX_LAYERS", "error",
                f"fc.weight takes {fc_in} inputs = {fc_in / hidden_in:g} × {hidden_in}, but SGLang {v} builds fc for "
                f"{sg_aux} aux states ({src}) = {sg_aux * hidden_in}",
                "fc is Linear(hidden_in × num_aux, hidden); num_aux = num_aux_hidden_states, else "
                "len(eagle_config.eagle_aux_hidden_state_layer_ids), else 3 (0.5.12+; before, always 3) — llama_eagle3.py "
                "LlamaModel. The weight loader asserts the shape: start-up fails.",
                "make eagle_config.eagle_aux_hidden_state_layer_ids list exactly the layers the head was trained on "
                f"({int(fc_in // hidden_in)} ids)", fc_in_features=fc_in, built_for=sg_aux * hidden_in)
    if t is None or not t.num_hidden_layers:
        if ec_ids is None and top_ids:
            _top_level_finding(ctx, d, top_ids, None, None)
        return
    L = int(t.num_hidden_layers)
    archs = t.architectures
    th = t.hidden_size
    if th and hidden_in and th != hidden_in:
        ctx.add("AUX_LAYERS", "error",
                f"the head was built for target hidden size {hidden_in}, the target has {th}",
                "The target sends K × its hidden size; fc expects K × (target_hidden_size or hidden_size) "
                "(llama_eagle3.py LlamaModel).", "use a head trained for this target (or set target_hidden_size correctly)",
                draft_hidden_in=hidden_in, target_hidden=th)
    capable, arch, src = capture_source(archs, v)
    if capable is False:
        ctx.add("AUX_LAYERS", "error",
                f"SGLang {v} serves the target as {arch} ({src}), a class that neither defines nor inherits "
                "set_eagle3_layers_to_capture: an EAGLE3 head cannot be fed",
                "The target runner calls model.set_eagle3_layers_to_capture(ids) before CUDA-graph capture; "
                "without it start-up fails (0.5.23 attention_backend_setup.py configure_aux_hidden_state_capture: "
                "ValueError 'Model … does not implement set_eagle3_layers_to_capture, which EAGLE3 aux hidden-state "
                "capture requires.'; older releases an AttributeError in model_runner.py). Read from SGLang "
                f"{v}'s model classes and their bases.",
                "serve this target with EAGLE (NEXTN) / STANDALONE, or use a release whose class implements the "
                "capture", target_architecture=arch, source=src)
    elif capable is None:
        ctx.add("AUX_LAYERS", "warning",
                f"SGLang {v} registers no model class for the target architecture {', '.join(archs) or '?'}",
                "SGLang builds the target from config.json's architectures (the EntryClass of srt/models/*.py); "
                "with none registered it fails at start-up, or a plugin supplies the class (then whether it "
                "captures aux hidden states for EAGLE3 is unknown).",
                "check the architecture name, or the release (--sglang-version)", target_architectures=archs)
    cap, valid = capture_plan(archs, L, ec_ids, v)
    default_cfg = default_aux_ids(L)
    where = "eagle_config" if ec_ids is not None else "defaults (no eagle_config ids)"
    k_sent = len(valid)
    k_need = int(fc_in // hidden_in) if fc_in and hidden_in else sg_aux
    plan_ev = {"num_hidden_layers": L, "ids": ec_ids, "capture_indices": cap, "captured": valid,
               "outputs_of_layers": [c - 1 for c in valid], "states_sent": k_sent, "states_expected": k_need,
               "family": target_family(archs)}
    if len(valid) != len(cap):
        missing = [c for c in cap if c not in valid]
        dup = len(cap) != len(set(cap))
        boundary = ec_ids is not None and max(ec_ids) == L
        why = (f"SGLang captures the residual stream at the input of the listed decoder layers and skips indices that "
               f"do not exist, so only {k_sent} × {th or hidden_in} = {k_sent * (th or hidden_in or 0)} values reach "
               f"an fc expecting {k_need} × {hidden_in} = {k_need * (hidden_in or 0)}: a size-mismatch RuntimeError "
               "at the warm-up request (sglang#32226: '8640 vs 5760').")
        if boundary:
            why += (f" An id equal to num_hidden_layers ({L}) is the boundary convention (boundary {L} = output of the "
                    "last block); "
                    + ("gpt-oss targets read it so from 0.5.17 (PR #32334)." if target_family(archs) == "gpt_oss" else
                       "this target family shifts every id by +1 and has no final-boundary capture."))
        fix = ("run SGLang ≥ 0.5.17 (PR #32334: boundary ids, final-boundary capture, norm_before_fc); do not hand-shift "
               "the ids" if boundary and target_family(archs) == "gpt_oss" else
               f"list ids in 0 … {L - 2} (\"output of layer id\"; SGLang captures id + 1) matching the layers the "
               "head was trained on")
        ctx.add("AUX_LAYERS", "error",
                f"aux ids {ec_ids} on a {L}-layer target become capture indices {cap}: "
                f"{missing if missing else 'duplicates'} {'are' if len(missing) != 1 else 'is'} never captured"
                + (" (duplicate ids are captured once)" if dup else ""),
                why, fix, case="sglang#32226", **plan_ev)
    if ec_ids is not None and ec_ids != sorted(ec_ids):
        ctx.add("AUX_LAYERS", "warning", f"aux ids {ec_ids} are not in ascending order",
                "The target appends captured states in layer order while running the layers, so the fc receives "
                f"them ordered {sorted(cap)}, not in the listed order (models/llama.py forward).",
                "list the ids in ascending order and make sure the head was trained in that order", **plan_ev)
    if ec_ids is not None and ec_ids == capture_plan(archs, L, None, v)[0]:
        ctx.add("AUX_LAYERS", "warning",
                f"aux ids {ec_ids} equal SGLang's default capture indices, but explicit ids are shifted by +1: SGLang "
                f"captures {cap} (outputs of layers {[c - 1 for c in cap]})",
                "Defaults are capture indices [2, L//2, L−3] = config ids [1, L//2−1, L−4]; explicit ids mean 'output "
                "of layer id' and become id + 1 (models/llama.py L929, SGLang 0.5.23). One of the two conventions is off "
                "by one.", f"if the head was trained on SGLang's defaults, write {default_cfg} (or omit the ids)",
                **plan_ev)
    if target_family(archs) == "deepseek" and ec_ids and has_feature("deepseek_aux_ids_unshifted", v) and ec_ids[0] != 1:
        ctx.add("AUX_LAYERS", "warning",
                f"on DeepSeek-family targets SGLang {v} uses ids {ec_ids} unchanged as capture indices "
                f"(= outputs of layers {[c - 1 for c in cap]}), because the first id is not 1",
                "deepseek_v2.py set_eagle3_layers_to_capture shifts by +1 only when layer_ids[0] == 1 (0.5.13+); "
                "Llama-family targets always shift. The same config means different layers on the two families.",
                "check which convention the training used; ids starting with 1 are shifted like on Llama", **plan_ev)
    if ec_ids is None and top_ids:
        _top_level_finding(ctx, d, top_ids, L, archs)
    elif ec_ids is not None and top_ids and top_ids != ec_ids:
        ctx.add("AUX_LAYERS", "warning",
                f"config.json lists aux ids twice: eagle_config {ec_ids}, top level {top_ids}",
                "The target captures from eagle_config; eagle_utils.py (buffer sizing) falls back to the top level — "
                "SGLang 0.5.23. Two lists invite the wrong one being edited.",
                "keep one list, inside eagle_config", eagle_config=ec_ids, top_level=top_ids)
    for loc, ids in others.items():
        used = ec_ids if ec_ids is not None else None
        cap_o, _ = capture_plan(archs, L, ids, v)
        if cap_o != cap:
            ctx.add("AUX_LAYERS", "error",
                    f"the training recorded aux ids {ids} ({loc}) but SGLang will capture {cap} "
                    f"(from {where}{': ' + str(used) if used is not None else ''})",
                    "The head only works on the layers it was trained on; SGLang reads only "
                    "eagle_config.eagle_aux_hidden_state_layer_ids on the target side (spec_aux_hidden_state.py).",
                    f"set eagle_config.eagle_aux_hidden_state_layer_ids = {ids} (specdash draft fix moves them)",
                    recorded_at=loc, recorded=ids, **plan_ev)
    boundary_ok = ec_ids is not None and max(ec_ids) == L and L in valid
    ctx.add("AUX_LAYERS", "info",
            f"SGLang {v} will capture target layers {cap} (residual stream at their input = outputs of layers "
            f"{[c - 1 for c in cap]}) of {L}, from {where}: {k_sent} × {th} → fc expects {k_need} × {hidden_in}"
            + (f"; ids {ec_ids} use the boundary convention (max id = num_hidden_layers), which this target reads "
               "as such" if boundary_ok else ""),
            "SGLang 0.5.23 (models/llama.py L929; gpt_oss.py / deepseek_v2.py variants, versions.py).", "", **plan_ev)


def _top_level_finding(ctx: RuleContext, d: DraftInfo, top_ids: list[int], L: int | None, archs: list[str] | None) -> None:
    """Aux ids only at the top level of config.json: the target ignores them and captures its
    defaults (an error when that means other layers; L None = target unknown)."""
    if L is None:
        ctx.add("AUX_LAYERS", "error",
                f"aux ids {top_ids} are at the top level of config.json, not inside eagle_config",
                "The target reads only eagle_config.eagle_aux_hidden_state_layer_ids and otherwise captures its "
                "defaults (spec_aux_hidden_state.py, SGLang 0.5.23).",
                f"specdash draft fix {d.path} --out DST (moves them into eagle_config)", top_level=top_ids)
        return
    cap_default, _ = capture_plan(archs or [], L, None, ctx.version)
    cap_meant, _ = capture_plan(archs or [], L, top_ids, ctx.version)
    same = cap_default == cap_meant
    ctx.add("AUX_LAYERS", "warning" if same else "error",
            f"aux ids {top_ids} are at the top level of config.json: the target does not read them and captures its "
            + (f"defaults {cap_default}, which here are the layers the ids name (harmless until the target or the ids "
               "change)" if same else f"defaults {cap_default} instead of {cap_meant}"),
            "Only eagle_config.eagle_aux_hidden_state_layer_ids is read on the target side "
            "(spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state); eagle_utils.py's buffer sizing does read "
            "the top level, so the two can disagree (SGLang 0.5.23).",
            f"specdash draft fix {d.path} --out DST (moves them into eagle_config)",
            top_level=top_ids, default_capture=cap_default, intended_capture=cap_meant)
