"""How the draft is quantized: QUANT.

SGLang 0.5.14 (``srt/server_args.py``, after ``_handle_modelscope_paths``): when
``--speculative-draft-model-quantization`` is not given the draft takes the target's ``--quantization``;
``unquant`` means none.  The draft is then loaded with that method
(``ModelConfig.from_server_args(..., is_draft_model=True)`` in ``srt/configs/model_config.py``), and a
``quantization_config`` in the draft's own ``config.json`` selects its method as for any model.
Public reports (sglang#39087, with #36599): a 4-bit drafter loads and serves without a warning while its
accept length collapses to about 1.0, slower than no speculation; a BF16 drafter next to a quantized
target either fails to load or accepts nothing when the target's method is inherited.
"""

from __future__ import annotations

from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.speculative import EAGLE_FAMILY


def _draft_quant_config(ctx: RuleContext) -> dict | None:
    d = ctx.draft
    if d is None:
        return None
    q = d.model.cfg("quantization_config")
    return q if isinstance(q, dict) else None


def _bits(q: dict) -> int | None:
    """The weight bit width of a ``quantization_config`` where it says one (``bits``, ``num_bits`` of a
    compressed-tensors config group, ``w_bit``)."""
    for key in ("bits", "w_bit", "num_bits"):
        if isinstance(q.get(key), int):
            return q[key]
    for group in (q.get("config_groups") or {}).values():
        w = (group or {}).get("weights") if isinstance(group, dict) else None
        if isinstance(w, dict) and isinstance(w.get("num_bits"), int):
            return w["num_bits"]
    return None


def rule_quant(ctx: RuleContext) -> None:
    """QUANT: a quantized draft, or a target quantization the draft inherits (module docstring)."""
    if ctx.algo not in EAGLE_FAMILY and ctx.algo != "STANDALONE":
        return
    target_q = ctx.flags.get("--quantization")
    draft_q = ctx.flags.get("--speculative-draft-model-quantization")
    own = _draft_quant_config(ctx)
    if own is not None:
        method = own.get("quant_method") or "unknown method"
        bits = _bits(own)
        ctx.add("QUANT", "warning",
                f"the draft is quantized ({method}{f', {bits}-bit weights' if bits else ''}, from its config.json "
                "quantization_config)",
                "Quantized drafters have been reported to load and serve without a warning while accept length "
                "falls to about 1.0, slower than no speculation, where the BF16 drafter of the same head works "
                "(sglang#39087). The draft is a small share of the memory and the time; its acceptance is the "
                "whole gain.",
                "serve the BF16 draft, or measure both: specdash --bench --profile P --vs P-bf16 (the accept "
                "length decides)", quant_method=method, bits=bits, case="sglang#39087")
    if target_q not in (None, True, False) and draft_q in (None, True) and own is None and ctx.draft is not None:
        ctx.add("QUANT", "warning",
                f"the draft inherits the target's --quantization {target_q}: it has no quantization_config of its "
                "own and no --speculative-draft-model-quantization is given",
                "SGLang 0.5.14 sets speculative_draft_model_quantization = quantization when it is not given "
                "(srt/server_args.py) and loads the draft with it; an unquantized (BF16) draft then fails to load "
                "or gets no acceptance (sglang#39087, #36599).",
                "add --speculative-draft-model-quantization unquant to [speculative] extra_args (or the method the "
                "draft was really quantized with)", target_quantization=target_q, case="sglang#36599")
