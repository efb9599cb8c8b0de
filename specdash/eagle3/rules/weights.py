"""Draft tensors against SGLang's EAGLE3 loader: WEIGHT_KEYS, MISSING_WEIGHT, WEIGHT_SHAPE.

Which tensor names a release maps comes from :func:`specdash.sglang.versions.eagle3_param_for_key`
(SGLang's ``srt/models/llama_eagle3.py`` ``load_weights``: ``midlayer`` → ``layers.0``,
``aux_norm_*`` → ``fc_norm.*``, everything else under ``model.``; a name matching no parameter is
skipped silently).  :func:`guess_param` — which parameter a dropped name was meant for — is
shared with ``specdash draft fix``.
"""

from __future__ import annotations

import re
from typing import Any

from specdash.checkpoint.layout import EAGLE3_LAYER_PARTS
from specdash.checkpoint.reader import DraftInfo
from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.versions import DEFAULT_VERSION, eagle3_param_for_key, has_feature

#: Tensor-name prefixes other exporters put in front of SGLang's names.
FOREIGN_PREFIXES = ("module.", "draft_model.", "draft.", "eagle.", "eagle3.", "speculator.", "model.",
                    "transformer.", "decoder.")
_NORM_PARTS = ("input_layernorm.weight", "post_attention_layernorm.weight", "hidden_norm.weight")


def _cfg_flag(d: DraftInfo, key: str) -> bool:
    """A boolean config key: from ``eagle_config`` when set there, else from config.json."""
    ec = d.eagle_config or {}
    if key in ec:
        return bool(ec[key])
    return bool(d.model.cfg(key, False))


def guess_param(name: str) -> str | None:
    """The SGLang parameter a tensor name the loader would drop was probably meant for, or None.

    Tries the name as SGLang's newest loader maps it (:func:`specdash.sglang.versions.eagle3_param_for_key`
    at :data:`~specdash.sglang.versions.DEFAULT_VERSION`), then with up to three
    :data:`FOREIGN_PREFIXES` removed (``eagle.fc.weight`` → ``fc.weight``), then a decoder-layer
    part under any layer prefix (``decoder_layer.mlp.up_proj.weight`` → ``midlayer.mlp.up_proj.weight``).
    Used by the WEIGHT_KEYS rule and by ``specdash draft fix`` (:mod:`specdash.eagle3.convert`).
    """
    cand = name
    for _ in range(3):
        p = eagle3_param_for_key(cand, DEFAULT_VERSION)
        if p is not None:
            return p
        for pre in FOREIGN_PREFIXES:
            if cand.startswith(pre):
                cand = cand[len(pre):]
                break
        else:
            break
    m = re.match(r"^(?:.*\.)?(?:layers\.0|midlayer|decoder_layer|layer)\.(.+)$", name)
    if m and m.group(1) in EAGLE3_LAYER_PARTS:
        return f"midlayer.{m.group(1)}"
    return None


def _map_keys(ctx: RuleContext, d: DraftInfo) -> tuple[dict[str, str], list[tuple[str, str | None, str]]]:
    """What the judged release's loader does with each tensor name (``llama_eagle3.py`` ``load_weights``
    as :func:`~specdash.sglang.versions.eagle3_param_for_key` records it per release).

    Returns ``(provided, dropped)``: canonical parameter → tensor name, and ``(tensor name,
    guessed parameter or None, why it is dropped)`` for each name the loader skips.
    """
    v = ctx.version
    provided: dict[str, str] = {}
    dropped: list[tuple[str, str | None, str]] = []
    nlayers = int(d.model.num_hidden_layers or 1)
    multi = has_feature("draft_fc_norm", v)
    for name in sorted(d.model.tensors):
        p = eagle3_param_for_key(name, v)
        reason = "no parameter of that name"
        base = name.removeprefix("model.")
        m = re.match(r"^layers\.(\d+)\.(.+)$", base)
        if p is None and m and multi and 0 < int(m.group(1)) < nlayers and m.group(2) in EAGLE3_LAYER_PARTS:
            p = base  # 0.5.12+ builds num_hidden_layers decoder layers
        if p is None and m and m.group(1) == "0" and not has_feature("draft_layers0_keys", v):
            reason = f"SGLang {v} names the layer midlayer; layers.0.* is mapped from 0.5.12 (PR #24663)"
        if p == "input_norm.weight" and not (has_feature("draft_norm_before_fc", v) and _cfg_flag(d, "norm_before_fc")):
            reason = (f"SGLang {v} has no input_norm (norm_before_fc support came in 0.5.17, PR #32334)"
                      if not has_feature("draft_norm_before_fc", v) else
                      "config.json does not set norm_before_fc: true, so SGLang builds no input_norm")
            p = None
        if p is not None and p.startswith("fc_norm.") and not (
                has_feature("draft_fc_norm", v) and (_cfg_flag(d, "fc_norm") or _cfg_flag(d, "use_aux_norm"))):
            reason = (f"SGLang {v} has no fc_norm (added in 0.5.12)" if not has_feature("draft_fc_norm", v)
                      else "config.json sets neither fc_norm nor use_aux_norm, so SGLang builds no fc_norm")
            p = None
        if p == "lm_head.weight" and d.model.cfg("tie_word_embeddings", False):
            why_tie = ("tie_word_embeddings is true, so lm_head is the (target's) embedding and a trained "
                       "lm_head.weight is not loaded")
            dropped.append((name, None, why_tie))
            continue
        if p is None:
            dropped.append((name, guess_param(name), reason))
        else:
            provided.setdefault(p, name)
    return provided, dropped


def _fix_cmd(d: DraftInfo, version: str, suffix: str = "-fixed") -> str:
    if d.path.startswith("sim:"):
        return "re-export the checkpoint (this is a virtual simulator model; `specdash draft fix` works on real directories)"
    return f"specdash draft fix {d.path} --out {d.path.rstrip('/')}{suffix} --sglang-version {version}"


def rule_weight_keys(ctx: RuleContext) -> None:
    """WEIGHT_KEYS, MISSING_WEIGHT and WEIGHT_SHAPE for an EAGLE3 head (and CHECKPOINT for a
    multi-layer draft before 0.5.12).

    SGLang's ``llama_eagle3.py`` ``load_weights`` skips every name it cannot map without a warning,
    so dropped tensors leave parameters uninitialised; its weight loaders assert shapes, so a
    tensor of the wrong shape stops start-up.
    """
    d = ctx.draft
    if d is None or not ctx.eagle_algo or d.head_kind != "eagle3" or not d.model.tensors:
        return
    nl = d.model.num_hidden_layers
    if isinstance(nl, int) and nl > 1 and not has_feature("draft_fc_norm", ctx.version):
        ctx.add("CHECKPOINT", "error", f"the draft has num_hidden_layers {nl}; {ctx.judged} supports 1 draft layer",
                "llama_eagle3.py raises ValueError('EAGLE3 currently only supports 1 layer') before 0.5.12 (wheel "
                "sglang-0.5.11 L212; multi-layer drafts load from 0.5.12).", "run SGLang ≥ 0.5.12",
                num_hidden_layers=nl)
    provided, dropped = _map_keys(ctx, d)
    ctx_provided = set(provided)
    layers0 = [(n, g, r) for n, g, r in dropped if re.match(r"^(model\.)?layers\.0\.", n) and g and g not in provided]
    if layers0:
        ctx.add("WEIGHT_KEYS", "error",
                f"{len(layers0)} tensors named layers.0.* are silently dropped by the loader of {ctx.judged}: "
                + "; ".join(f"{n} → {g}" for n, g, _ in layers0),
                f"{ctx.judged} loads the draft's decoder layer only from midlayer.* (llama_eagle3.py "
                "load_weights); a name that matches no parameter is skipped without a warning, so the layer keeps "
                "uninitialised weights and acceptance collapses to ≈1 (SGLang 0.5.23; a reported Kimi-K2.5 head; "
                "layers.0.* is mapped from 0.5.12, SGLang PR #24663).",
                f"{_fix_cmd(d, ctx.version, '-midlayer')} (renames layers.0.* → midlayer.*, which every release "
                "loads), or run SGLang ≥ 0.5.12",
                judged_version=ctx.version, version_source=ctx.source,
                renames={n: g for n, g, _ in layers0})
    for n, g, r in dropped:
        if (n, g, r) in layers0:
            continue
        base = n.removeprefix("model.")
        in_norm = base == "input_norm.weight"
        fc_norm = base.startswith(("fc_norm.", "aux_norm_"))
        ev = {"tensor": n, "maps_to": g, "judged_version": ctx.version, "version_source": ctx.source}
        if in_norm or fc_norm:
            cfg_on = _cfg_flag(d, "norm_before_fc") if in_norm else (_cfg_flag(d, "fc_norm") or _cfg_flag(d, "use_aux_norm"))
            supported = has_feature("draft_norm_before_fc" if in_norm else "draft_fc_norm", ctx.version)
            key, since = ("norm_before_fc", "0.5.17") if in_norm else ("fc_norm", "0.5.12")
            ctx.add("WEIGHT_KEYS", "error" if cfg_on and not supported else "warning",
                    f"tensor {n} is dropped silently by {ctx.judged}: {r}",
                    "The loader skips it without a warning (llama_eagle3.py load_weights), so the normalisation the head was trained "
                    "with is never applied and acceptance stays low (sglang#32226: norm_before_fc and input_norm "
                    "ignored, accept length ≈ 1.1; SGLang PR #32334).",
                    (f"run SGLang ≥ {since}" if cfg_on and not supported else
                     f"set \"{key}\": true in config.json if the head was trained with it (SGLang ≥ {since}), "
                     f"else remove {n}"), case="sglang#32226", **ev)
            continue
        if g and g not in ctx_provided:
            sev, tail = "error", f"so {g} stays uninitialised"
        elif g:
            sev, tail = "warning", f"{g} is provided by {provided.get(g)}, so this copy is ignored"
        else:
            sev, tail = "warning", "it is ignored"
        ctx.add("WEIGHT_KEYS", sev,
                f"tensor {n} is dropped silently by {ctx.judged}: {r}" + (f"; it should map to {g}" if g else ""),
                f"SGLang's EAGLE3 loader skips names it cannot map without a warning (llama_eagle3.py load_weights); {tail}.",
                (f"{_fix_cmd(d, ctx.version)} (renames {n} → {g})"
                 if g and sev == "error" else f"remove {n} or rename it to the parameter it holds"), **ev)
    _missing(ctx, d, provided, dropped)
    _shapes(ctx, d, provided)


def _missing(ctx: RuleContext, d: DraftInfo, provided: dict[str, str], dropped: list) -> None:
    """MISSING_WEIGHT: parameters no tensor provides (``provided``/``dropped`` from :func:`_map_keys`)."""
    guessed = {g for _, g, _ in dropped if g}
    cfg = d.model
    absent = [p for p in ("fc.weight",) + tuple(f"midlayer.{x}" for x in EAGLE3_LAYER_PARTS)
              if p not in provided and p not in guessed]
    linear = [p for p in absent if not p.endswith(_NORM_PARTS)]
    norms = [p for p in absent if p.endswith(_NORM_PARTS)]
    if "norm.weight" not in provided and "norm.weight" not in guessed:
        norms.append("norm.weight")
    if linear:
        ctx.add("MISSING_WEIGHT", "error",
                f"no tensor provides {', '.join(linear)}",
                "SGLang allocates these parameters with torch.empty (fc: torch.nn.Linear's random init) and the "
                "loader never reports missing names, so the head runs on uninitialised weights: accept length ≈ 1 "
                "(llama_eagle3.py load_weights, SGLang 0.5.23).",
                "re-export the draft with these tensors (midlayer.* names, fc.weight)", missing=linear)
    if norms:
        ctx.add("MISSING_WEIGHT", "warning", f"no tensor provides {', '.join(norms)}",
                "RMSNorm weights start at 1.0 in SGLang (layernorm.py), not at the trained scale: the head runs, "
                "but not as trained.", "re-export the draft with its norm weights", missing=norms)
    tie = bool(cfg.cfg("tie_word_embeddings", False))
    dvs_set = any(k == "draft_vocab_size" for k in _all_keys(cfg.config))
    if not tie and d.draft_vocab_size is not None and "lm_head.weight" not in provided \
            and "lm_head.weight" not in guessed:
        ctx.add("MISSING_WEIGHT", "error",
                f"config.json sets draft_vocab_size = {d.draft_vocab_size} with tie_word_embeddings false, but the "
                f"checkpoint has no lm_head.weight",
                "With draft_vocab_size set SGLang allocates the draft's own lm_head (ParallelLMHead, torch.empty) "
                "instead of borrowing the target's, and the loader never reports the missing tensor: the head is "
                "uninitialised and no draft token is accepted (sglang#27829; PR #27908 borrows the "
                "target head only for MLA drafts with a full vocabulary).",
                "ship the lm_head.weight the head was trained with, or — if it was trained with the target's head — "
                "set \"draft_vocab_size\": null so SGLang borrows the target's lm_head",
                draft_vocab_size=d.draft_vocab_size, case="sglang#27829")
    if not tie and not dvs_set:
        lm = cfg.tensors.get("lm_head.weight")
        ctx.add("MISSING_WEIGHT", "warning",
                "config.json has no draft_vocab_size key" + (f" (lm_head.weight has {lm.shape[0]} rows)" if lm else ""),
                "SGLang reads config.draft_vocab_size as a plain attribute when tie_word_embeddings is false "
                "(llama_eagle3.py); a missing key can raise AttributeError at start-up [inferred from llama_eagle3.py]; "
                "null means 'borrow the target's lm_head'.",
                f"specdash draft fix {d.path} --out DST (adds draft_vocab_size from lm_head rows or len(d2t))",
                lm_head_rows=lm.shape[0] if lm else None)
    if d.target_hidden_size and d.model.hidden_size and d.target_hidden_size != d.model.hidden_size \
            and "embed_tokens.weight" not in provided:
        ctx.add("MISSING_WEIGHT", "error",
                f"target_hidden_size {d.target_hidden_size} ≠ hidden_size {d.model.hidden_size} but the checkpoint "
                f"has no embed_tokens.weight",
                "SGLang shares the target's embedding only when the widths match; otherwise the draft keeps its own "
                "(eagle_worker_v2.py init_lm_head, llama.py set_embed; SGLang 0.5.23), which is then uninitialised.",
                "ship embed_tokens.weight [vocab_size, hidden_size] with the draft")
    if has_feature("draft_norm_before_fc", ctx.version) and _cfg_flag(d, "norm_before_fc") \
            and "input_norm.weight" not in provided:
        ctx.add("MISSING_WEIGHT", "warning", "norm_before_fc is true but the checkpoint has no input_norm.weight",
                "SGLang ≥ 0.5.17 applies an RMSNorm over the concatenated aux states; without the tensor its weight "
                "stays 1.0 (llama_eagle3.py).", "ship input_norm.weight or set norm_before_fc false")


def _all_keys(obj: Any) -> list[str]:
    out: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(k)
            out.extend(_all_keys(v))
    return out


def _shapes(ctx: RuleContext, d: DraftInfo, provided: dict[str, str]) -> None:
    """WEIGHT_SHAPE: each provided tensor's shape against what ``config.json`` builds (layer 0
    attention reads 2 × hidden, ``llama_eagle3.py``)."""
    m = d.model
    h = m.hidden_size
    heads = m.cfg("num_attention_heads")
    if not h or not heads:
        return
    kv = m.cfg("num_key_value_heads") or heads
    hd = m.cfg("head_dim") or h // heads
    inter = m.cfg("intermediate_size")
    expect = {
        "midlayer.self_attn.q_proj.weight": (heads * hd, 2 * h),
        "midlayer.self_attn.k_proj.weight": (kv * hd, 2 * h),
        "midlayer.self_attn.v_proj.weight": (kv * hd, 2 * h),
        "midlayer.self_attn.o_proj.weight": (h, heads * hd),
        "midlayer.input_layernorm.weight": (h,),
        "midlayer.post_attention_layernorm.weight": (h,),
        "midlayer.hidden_norm.weight": (h,),
        "norm.weight": (h,),
    }
    if inter:
        expect.update({"midlayer.mlp.gate_proj.weight": (inter, h), "midlayer.mlp.up_proj.weight": (inter, h),
                       "midlayer.mlp.down_proj.weight": (h, inter)})
    bad = []
    for p, shape in expect.items():
        name = provided.get(p)
        if name is None:
            continue
        got = tuple(m.tensors[name].shape)
        if got != shape:
            bad.append((name, list(got), list(shape)))
    if bad:
        ctx.add("WEIGHT_SHAPE", "error",
                "tensor shapes differ from what config.json builds: "
                + "; ".join(f"{n} is {g}, expected {e}" for n, g, e in bad),
                "SGLang builds the draft from config.json (hidden_size, heads, head_dim, intermediate_size; layer 0 "
                "attention reads 2 × hidden — llama_eagle3.py) and its weight loaders assert the shapes: start-up fails.",
                "make config.json match the checkpoint (or re-export the checkpoint)",
                mismatches=[{"tensor": n, "shape": g, "expected": e} for n, g, e in bad])
