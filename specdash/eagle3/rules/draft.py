"""Which draft SGLang serves, and whether its head kind suits the algorithm: DRAFT_PATH, ALGO_MISMATCH."""

from __future__ import annotations

from specdash.checkpoint.reader import DraftInfo
from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.capture import eagle3_arch_release, sglang_eagle3_archs, sglang_eagle3_srcs, target_draft
from specdash.sglang.speculative import EAGLE_FAMILY

#: Config keys that count the MTP / NextN layers a checkpoint carries (top level or ``text_config``):
#: DeepSeek / GLM / MiMo ``num_nextn_predict_layers``, Qwen3.5 ``mtp_num_hidden_layers``, others ``num_mtp_layers``.
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers", "mtp_num_layers")


def mtp_layers(md) -> tuple[int | None, str | None, int]:
    """What a target checkpoint says of its own draft layers: ``(declared count, config key, MTP tensors)``.

    The count is the first of :data:`MTP_LAYER_KEYS` in config.json (None when none is there); MTP tensors are
    names with an ``mtp`` / ``nextn`` part or in decoder layer ``L`` (DeepSeek appends its NextN layer after the
    last decoder layer, ``model.layers.{L}.*``)."""
    declared, key = None, None
    for k in MTP_LAYER_KEYS:
        v = md.cfg(k)
        if isinstance(v, int) and not isinstance(v, bool):
            declared, key = v, k
            break
    L = md.num_hidden_layers
    extra = f".layers.{int(L)}." if isinstance(L, int) else None
    n = sum(1 for t in md.tensors if "mtp" in t.lower() or "nextn" in t.lower() or (extra and extra in f".{t}"))
    return declared, key, n


def rule_draft_path(ctx: RuleContext) -> None:
    """DRAFT_PATH: an EAGLE-family algorithm without ``--speculative-draft-model-path``.

    SGLang then drafts from the target's own checkpoint: the draft's model path falls back to the target's
    (``ModelConfig.from_server_args``: ``model_path=model_path or …``) and ``_config_draft_model`` rewrites
    the target architecture to its MTP / NextN class, or the speculative hook points the draft path at the
    model path (``_handle_eagle_family``) — both read per release from the generated facts
    (:func:`specdash.sglang.capture.target_draft`).  Fine for a target that carries those layers under
    EAGLE / NEXTN (checked against config.json and the tensor names), not an EAGLE3 head, and a start-up
    crash for any other target.
    """
    if ctx.algo not in EAGLE_FAMILY or ctx.draft_path:
        return
    archs = ctx.target_archs
    td = target_draft(archs, ctx.version)
    arch_txt = ", ".join(archs) or "unknown (target config unreadable)"
    where = f"SGLang {td.release} {td.src}" if td.src else f"SGLang {td.release}"
    ev = {"target_architectures": archs, "draft_architecture": td.draft_arch, "source": where}
    if td.bundled and ctx.algo == "EAGLE":
        how = f"loads it as {td.draft_arch}" if td.draft_arch else "points the draft path at the model path"
        t = ctx.target
        declared, key, n = mtp_layers(t) if t is not None else (None, None, 0)
        if t is not None and t.tensors and n == 0 and not declared:
            ctx.add("DRAFT_PATH", "error",
                    f"no draft path: SGLang drafts from the target's own checkpoint ({arch_txt}; it {how}), but "
                    f"this checkpoint carries no draft layers: config.json declares none "
                    f"({' / '.join(MTP_LAYER_KEYS)}) and none of its {len(t.tensors)} tensors is an MTP / NextN one",
                    f"The draft's model path falls back to the target's and its architecture is rewritten to the "
                    f"draft class ({where}); with no such weights in the checkpoint the draft layers stay "
                    "unloaded, so every draft is rejected or start-up fails.",
                    "use a checkpoint that ships its MTP layers, or pass [speculative] draft_model_path = a draft "
                    "trained for this target", **ev)
            return
        if t is not None and t.tensors and n == 0 and declared:
            ctx.add("DRAFT_PATH", "warning",
                    f"no draft path: config.json declares {key} = {declared}, but no tensor of the target looks like "
                    "an MTP / NextN layer (no 'mtp' / 'nextn' name, no decoder layer "
                    f"{t.num_hidden_layers})", f"SGLang drafts from the target's own checkpoint ({where}); weights "
                    "it cannot find stay unloaded.", "check that the checkpoint ships its MTP weights (some "
                    "quantized exports drop them)", mtp_layers_declared=declared, **ev)
            return
        ctx.add("DRAFT_PATH", "info",
                f"no draft path: SGLang drafts from the target's own checkpoint ({arch_txt}; it {how})"
                + (f", {key} = {declared}" if declared else "") + (f", {n} MTP tensors" if n else ""),
                f"The draft's model path falls back to the target's ({where}).", "",
                mtp_layers_declared=declared, mtp_tensors=n, **ev)
        return
    if td.bundled:
        ctx.add("DRAFT_PATH", "warning", f"--speculative-algorithm {ctx.algo} without a draft path: SGLang falls "
                f"back to the target's own draft layers ({arch_txt}), which are not an EAGLE3 head",
                f"Bundled MTP / NextN layers are EAGLE-style heads ({where}).",
                "pass [speculative] draft_model_path = an EAGLE3 head for this target, or use algorithm EAGLE "
                "(NEXTN) for the bundled MTP", **ev)
        return
    ctx.add("DRAFT_PATH", "error", f"--speculative-algorithm {ctx.algo} is given without "
            f"--speculative-draft-model-path, and the target ({arch_txt}) carries no draft layers SGLang "
            f"{td.release} knows of",
            "Without a draft path SGLang uses the target checkpoint as the draft, loads it twice and crashes at "
            "start-up with an architecture-specific AttributeError (sglang#36528; PR #36593 turns it into a "
            f"validation error); SGLang {td.release} maps no draft class to this architecture "
            "(configs/model_config.py _config_draft_model).",
            "set [speculative] draft_model_path to an EAGLE3 head trained for this target "
            "(--speculative-draft-model-path DIR)", case="sglang#36528", **ev)


def _fc_desc(d: DraftInfo) -> str:
    fc = d.model.tensors.get("fc.weight")
    if fc is None:
        return "no fc.weight"
    mult = d.fc_multiple
    return f"fc.weight {list(fc.shape)}: in_features {fc.shape[-1]}" + (
        f" = {mult:g} × hidden {d.hidden_in}" if mult else "")


def rule_algo(ctx: RuleContext) -> None:
    """ALGO_MISMATCH: the draft's head kind (:attr:`~specdash.checkpoint.reader.DraftInfo.head_kind`)
    against ``--speculative-algorithm``, and whether SGLang has a model class for the draft
    architecture in the judged release (:func:`specdash.sglang.capture.eagle3_arch_release`, from the facts).

    An EAGLE3 head under EAGLE starts and accepts nothing (``llama_eagle3.py`` runs ``fc`` only when
    the input width differs from ``hidden_size``); an EAGLE-2 head under EAGLE3 fails with a shape
    error at the first forward.
    """
    d = ctx.draft
    if d is None or not ctx.eagle_algo:
        return
    kind = d.head_kind
    arch = ", ".join(d.model.architectures) or "no architectures"
    ev = {"draft_architectures": d.model.architectures, "fc_in_features": d.fc_in_features,
          "hidden_size": d.hidden_in, "algorithm": ctx.algo, "head_kind": kind}
    if ctx.algo == "EAGLE" and kind == "eagle3":
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft is an EAGLE3 head ({arch}; {_fc_desc(d)}) but it is served with "
                f"--speculative-algorithm EAGLE",
                "With EAGLE the target captures no auxiliary hidden states and sends its final hidden state "
                "(1 × hidden); the draft's fc runs only when the input width differs from hidden_size, so it is "
                "skipped silently, and the draft's lm_head/d2t are replaced by the target's. SGLang starts, "
                "warns nothing, and every draft token is rejected: accept length 1.00 (llama_eagle3.py "
                "LlamaModel.forward, SGLang 0.5.23; sglang PR #21272; measured on SGLang 0.5.14: "
                "accept len 1.00 where EAGLE3 gets 2.0).",
                "set [speculative] algorithm = \"EAGLE3\" (--speculative-algorithm EAGLE3) with the same draft",
                case="sglang#21272", **ev)
    elif ctx.algo == "EAGLE3" and kind == "eagle2":
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft is an EAGLE-2 head ({arch}; {_fc_desc(d)}) but it is served with "
                f"--speculative-algorithm EAGLE3",
                "EAGLE3 makes the target send K = 3 concatenated aux states (3 × hidden); an EAGLE-2 fc expects "
                "concat(embedding, hidden) = 2 × hidden, so the first draft forward fails with a shape error "
                "(llama_eagle3.py LlamaModel, SGLang 0.5.23).",
                "set [speculative] algorithm = \"EAGLE\" for this head, or use an EAGLE3 head", **ev)
    elif ctx.algo == "EAGLE3" and kind != "eagle3":
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft ({arch}; {_fc_desc(d)}) is not an EAGLE3 head, but it is served with "
                f"--speculative-algorithm EAGLE3",
                "SGLang builds the draft from config.json's architectures; an EAGLE3 draft is "
                "LlamaForCausalLMEagle3 (llama_eagle3.py) with fc.weight [hidden, 3 × hidden] (SGLang 0.5.23).",
                "point draft_model_path at an EAGLE3 head; a full small LM is served with algorithm STANDALONE",
                **ev)
    elif ctx.algo == "STANDALONE" and kind in ("eagle3", "eagle2"):
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft is an EAGLE head ({arch}) but it is served with --speculative-algorithm STANDALONE",
                "STANDALONE runs a complete small language model as the draft; an EAGLE head has no embedding "
                "stack of its own and needs the target's hidden states (speculative/spec_info.py).",
                f"set [speculative] algorithm = \"{'EAGLE3' if kind == 'eagle3' else 'EAGLE'}\"", **ev)
    elif ctx.algo == "EAGLE" and kind == "lm":
        ctx.add("ALGO_MISMATCH", "warning",
                f"the draft ({arch}) looks like a full language model, served with --speculative-algorithm EAGLE",
                "EAGLE expects an EAGLE head fed by the target's hidden state; a separate small LM is what "
                "STANDALONE serves (speculative/spec_info.py).", "set [speculative] algorithm = \"STANDALONE\"", **ev)
    if ctx.algo in ("EAGLE", "EAGLE3") and kind == "eagle3" and d.model.architectures:
        _arch_in_release(ctx, d, arch, ev)


def _arch_in_release(ctx: RuleContext, d: DraftInfo, arch: str, ev: dict) -> None:
    """ALGO_MISMATCH: the draft architecture has no model class in any SGLang release, or not yet in
    the judged one (public case sglang#25673: an MLA EAGLE-3 head on 0.5.11 fails while its config is
    read, on every TP rank)."""
    known = [(a, *eagle3_arch_release(a, ctx.version)) for a in d.model.architectures]
    if any(ok for _, ok, _ in known):
        return
    later = [(a, since) for a, _, since in known if since]
    if later:
        a, since = later[0]
        src = dict(zip(sglang_eagle3_archs(since), sglang_eagle3_srcs(since))).get(a, "srt/models/*eagle3*.py")
        ctx.add("ALGO_MISMATCH", "error",
                f"SGLang {ctx.version} has no model class for the draft architecture {a}: it first appears in "
                f"SGLang {since}",
                f"SGLang builds the draft from config.json's architectures; {a} is registered from {since} on "
                f"(SGLang {since} {src} EntryClass), so on this release every rank fails at start-up "
                "while the draft's config is read (sglang#25673).",
                f"serve with SGLang {since} or later (pin [server] sglang_version once installed), or use an "
                "EAGLE3 head in the LlamaForCausalLMEagle3 layout", first_release=since, case="sglang#25673",
                **ev)
        return
    have = sglang_eagle3_archs(ctx.version)
    ctx.add("ALGO_MISMATCH", "error",
            f"SGLang has no model class for the draft architecture {arch}",
            f"SGLang {ctx.version} loads EAGLE3 heads only as {' or '.join(have)} (the EntryClass of its "
            "srt/models/*eagle3*.py); a speculators-format export (Eagle3Speculator) fails with 'Model architectures "
            "… are not supported'.",
            "re-export the head in SGLang's layout: architectures [\"LlamaForCausalLMEagle3\"], Llama config "
            "keys at the top level of config.json, tensors midlayer.*/fc/norm/lm_head/d2t", **ev)
