"""The draft vocabulary and its map to the target's: VOCAB_MAP."""

from __future__ import annotations

import numpy as np

from specdash.checkpoint.reader import CheckpointError, classify_d2t, d2t_targets, t2d_marks
from specdash.eagle3.rules.context import RuleContext


def _tied_reduced_head(ctx: RuleContext, d, dvs: int, V: int, lm) -> None:
    """VOCAB_MAP error: a reduced-vocabulary head saved with ``tie_word_embeddings: true``.

    The release's EAGLE3 loader (facts ``eagle3_loader.tie_word_embeddings``: ``self.lm_head =
    self.model.embed_tokens`` under ``if self.config.tie_word_embeddings``) ties the head to the
    embedding — the target's full vocabulary, which SGLang substitutes for the draft's — before it looks at
    ``draft_vocab_size``: the draft scores all V target ids while ``d2t`` maps only ``draft_vocab_size`` of
    them, so ids past it index ``hot_token_id`` out of bounds (SpecForge PR #140; Tencent/AngelSlim#16)."""
    from specdash.sglang.facts import facts_for

    facts = facts_for(ctx.version)
    tie = facts.eagle3_loader.get("tie_word_embeddings") if facts is not None else None
    quote = (f"'{tie['code']}' (SGLang {facts.release} {tie['src']}, under 'if self.config.tie_word_embeddings')"
             if tie else "lm_head = embed_tokens (llama_eagle3.py)")
    own = f"; the checkpoint's own lm_head.weight {list(lm.shape)} is never loaded" if lm is not None else ""
    ctx.add("VOCAB_MAP", "error",
            f"config.json sets tie_word_embeddings: true with draft_vocab_size {dvs} < target vocab {V}: SGLang ties the "
            f"draft's lm_head to the {V}-row embedding instead of a {dvs}-row head{own}",
            f"SGLang's EAGLE3 loader runs {quote} before it reads draft_vocab_size, and the embedding is the "
            f"target's ({V} ids, eagle_worker set_embed). The draft then proposes ids of the full vocabulary while "
            f"d2t maps only {dvs}: draft ids ≥ {dvs} index hot_token_id out of bounds (an index error in the draft's "
            "CUDA-graph capture, Tencent/AngelSlim#16) — SpecForge's fix: always save EAGLE3 heads with "
            "tie_word_embeddings false (sgl-project/SpecForge PR #140).",
            'set "tie_word_embeddings": false in the config.json of the draft, in a copy of it (the head needs its '
            f"own lm_head.weight with {dvs} rows" + ("" if lm is not None else ": this checkpoint has none") + ")",
            draft_vocab_size=dvs, target_vocab=V, lm_head_rows=lm.shape[0] if lm is not None else None,
            source=f"SGLang {facts.release} {tie['src']}" if tie else None, case="sgl-project/SpecForge#140")


def rule_vocab(ctx: RuleContext) -> None:
    """VOCAB_MAP for an EAGLE3 head: vocab sizes, ``lm_head`` rows vs ``draft_vocab_size``, and the
    ``d2t``/``t2d`` map (its form from :func:`~specdash.checkpoint.reader.classify_d2t`, the classifier
    the simulator and ``specdash draft fix`` use too).

    SGLang's ``llama_eagle3.py``: ``lm_head`` has ``draft_vocab_size`` rows (the target's head when
    it is null); ``load_weights`` turns ``d2t`` into ``hot_token_id = d2t + arange`` and skips ``t2d``.
    A ``d2t`` that cannot be read becomes a CHECKPOINT warning.
    """
    d = ctx.draft
    if d is None or not ctx.eagle_algo or d.head_kind != "eagle3":
        return
    m = d.model
    V = ctx.target_vocab
    dvs = d.draft_vocab_size
    tie = bool(m.cfg("tie_word_embeddings", False))
    lm = m.tensors.get("lm_head.weight")
    has_d2t = "d2t" in m.tensors
    tv_txt = f"target vocab {V}" if V else "target vocab unknown"
    if ctx.target is not None and ctx.target.vocab_size and m.vocab_size and ctx.target.vocab_size != m.vocab_size:
        ctx.add("VOCAB_MAP", "error", f"draft vocab_size {m.vocab_size} ≠ target vocab_size {ctx.target.vocab_size}",
                "The draft's vocab_size must be the target's: SGLang substitutes the target's embedding "
                "(eagle_worker_v2.py init_lm_head) and maps draft ids into the target vocabulary.",
                f"set \"vocab_size\": {ctx.target.vocab_size} in the draft's config.json (if the head was trained "
                f"for this target)", draft_vocab=m.vocab_size, target_vocab=ctx.target.vocab_size)
    if tie and dvs is not None and V and dvs < V:
        _tied_reduced_head(ctx, d, dvs, V, lm)
    if not tie and lm is not None:
        rows = lm.shape[0]
        if dvs is not None and rows != dvs:
            ctx.add("VOCAB_MAP", "error", f"lm_head.weight has {rows} rows but draft_vocab_size is {dvs}",
                    "SGLang allocates lm_head with draft_vocab_size rows and the weight loader asserts the shape: "
                    "start-up fails (llama_eagle3.py, ParallelLMHead).",
                    f"set \"draft_vocab_size\": {rows} in config.json (if the head has {rows} outputs)",
                    lm_head_rows=rows, draft_vocab_size=dvs)
        elif dvs is None and V and rows == V:
            ctx.add("VOCAB_MAP", "warning",
                    f"draft_vocab_size is null/absent, so SGLang replaces the draft's own lm_head.weight ({rows} rows) "
                    f"with the target's lm_head",
                    "load_lm_head_from_target is set when draft_vocab_size is null (llama_eagle3.py; "
                    "eagle_worker_v2.py set_embed_and_head): a trained draft head is discarded.",
                    f"if the head was trained, set \"draft_vocab_size\": {rows}", lm_head_rows=rows)
        elif dvs is None and V and rows != V:
            ctx.add("VOCAB_MAP", "error",
                    f"lm_head.weight has {rows} rows but draft_vocab_size is not set ({tv_txt})",
                    "Without draft_vocab_size SGLang sizes the draft head with vocab_size rows and the loader asserts "
                    "the shape (or the missing attribute raises): start-up fails.",
                    f"specdash draft fix {d.path} --out DST (sets draft_vocab_size = {rows})", lm_head_rows=rows)
    eff_dvs = dvs if dvs is not None else (lm.shape[0] if lm is not None and not tie else None)
    if eff_dvs and V and eff_dvs < V and not has_d2t:
        ctx.add("VOCAB_MAP", "error",
                f"draft_vocab_size {eff_dvs} < {tv_txt} but the checkpoint has no d2t (and no t2d)",
                "SGLang builds the draft→target token map only from a d2t tensor in the checkpoint "
                "(hot_token_id = d2t + arange; llama_eagle3.py load_weights); without it draft id i is used as "
                "target id i for the first N ids and almost every draft token is wrong. --speculative-token-map is "
                "ignored for EAGLE3 (speculative_hook.py). Reported in NVIDIA-NeMo/Automodel PR #2447.",
                "re-export the draft with d2t (offsets: target_id − draft_id) and t2d inside model.safetensors, e.g. "
                f"specdash draft fix {d.path} --out DST --hot-token-ids IDS.json (the sorted target ids of the draft "
                "vocabulary)", draft_vocab_size=eff_dvs, target_vocab=V, d2t_form="absent", case="NVIDIA-NeMo/Automodel#2447")
        return
    if not has_d2t:
        return
    try:
        d2t = np.asarray(m.load_tensor("d2t")).astype(np.int64).reshape(-1)
    except (CheckpointError, KeyError, ValueError, TypeError) as exc:
        ctx.add("CHECKPOINT", "warning", f"d2t could not be read: {exc}", "The mapping checks were skipped.", "")
        return
    n = len(d2t)
    if eff_dvs and n != eff_dvs:
        ctx.add("VOCAB_MAP", "error", f"len(d2t) = {n} but the draft vocabulary has {eff_dvs} ids",
                "SGLang indexes hot_token_id (d2t + arange) with the draft's top-k ids (llama_eagle3.py): every draft id "
                "needs exactly one entry.", "re-export d2t with one offset per draft id", d2t_len=n,
                draft_vocab_size=eff_dvs)
    off = d2t_targets(d2t)
    t2d = None
    if "t2d" in m.tensors:
        try:
            t2d = np.asarray(m.load_tensor("t2d")).astype(bool).reshape(-1)
        except (CheckpointError, KeyError, ValueError, TypeError):
            t2d = None
    form = classify_d2t(d2t, t2d, V)
    cons_off = t2d_marks(t2d, off) if t2d is not None else None
    ev = {"d2t_len": n, "d2t_head": d2t[:5].tolist(), "targets_as_offsets_head": off[:5].tolist(), "target_vocab": V,
          "d2t_form": form}
    if form == "absolute":
        ctx.add("VOCAB_MAP", "error",
                f"d2t holds absolute target ids (d2t[:5] = {d2t[:5].tolist()}), not offsets",
                "SGLang reads d2t as offsets: target_id = draft_id + d2t[draft_id] (SGLang 0.5.23 "
                "llama_eagle3.py load_weights). Absolute ids are shifted by the draft id"
                + (f" ({int((off >= V).sum())} of {n} land outside the target vocabulary)" if V else "")
                + " and every proposed token is wrong (a reported Kimi-K2.5 deployment's standalone test read them the other way).",
                f"specdash draft fix {d.path} --out DST (rewrites d2t[i] := d2t[i] − i)", **ev)
    elif form == "invalid":
        out_of_range = int(((off < 0) | ((off >= V) if V else False)).sum())
        dups = int(len(off) - len(np.unique(off)))
        ctx.add("VOCAB_MAP", "error",
                f"d2t maps draft ids outside the target vocabulary or onto the same target id "
                f"({out_of_range} out of range, {dups} duplicates; {tv_txt})",
                "target_id = draft_id + d2t[draft_id] must be a distinct id < target vocab_size (llama_eagle3.py load_weights).",
                "re-export d2t from the sorted list of target ids of the draft vocabulary: d2t[i] = ids[i] − i",
                out_of_range=out_of_range, duplicates=dups, **ev)
    elif t2d is not None and not cons_off:
        ctx.add("VOCAB_MAP", "warning",
                f"t2d marks {int(t2d.sum())} target ids, not exactly the {n} targets of d2t",
                "SGLang skips t2d, but t2d is written from the same list as d2t: disagreement means one of them "
                "was exported wrong (llama_eagle3.py load_weights).", "re-export d2t and t2d from the same id list",
                t2d_marked=int(t2d.sum()), **ev)
    elif form == "ambiguous":
        ctx.add("VOCAB_MAP", "warning",
                f"d2t is strictly increasing (d2t[:5] = {d2t[:5].tolist()}): it may hold absolute ids",
                "Offsets of a sorted hot vocabulary repeat whenever two hot ids are adjacent; strictly increasing "
                "values look like the ids themselves. SGLang adds the draft id (llama_eagle3.py load_weights).",
                "check the exporter; if they are ids, specdash draft fix … --d2t-absolute", **ev)
    if t2d is not None and V and len(t2d) != V:
        ctx.add("VOCAB_MAP", "warning", f"t2d has {len(t2d)} entries, target vocab {V}",
                "t2d is a mask over the target vocabulary (SGLang skips it; other engines use it).",
                "re-export t2d with one entry per target id", t2d_len=len(t2d))
    if eff_dvs and V and eff_dvs < V and form in ("offsets", "ambiguous"):
        ctx.add("VOCAB_MAP", "info",
                f"reduced draft vocabulary: {eff_dvs} of {V} target ids, mapped by d2t (offsets)",
                "SGLang maps draft ids through hot_token_id = d2t + arange (llama_eagle3.py load_weights). The "
                "mapping lives only in the checkpoint: an engine build that drops it still runs, with acceptance "
                "≈ 1.1 (vllm-project/vllm PR #18909). If acceptance collapses after launch, suspect the mapping.",
                "", draft_vocab_size=eff_dvs, target_vocab=V, d2t_form=form, case="vllm-project/vllm#18909")
