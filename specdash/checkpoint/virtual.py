"""Virtual models for the simulator: ``sim:NAME`` paths in profiles.

Real EAGLE3 drafts and targets are gigabytes; demo profiles and the README's main job
must run on a laptop with nothing downloaded.  A virtual model is a ``config.json`` and
a tensor list (names, shapes, dtypes) with the shapes of the real model it stands for,
so the preflight doctor and the simulator treat it exactly like a directory on disk.
Shapes follow the public configs of the models named (Llama-3.1-8B-Instruct and its
EAGLE3 head ``lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B``; Kimi-K2.5 and a trained
1.2 B-parameter EAGLE3 head for it with hidden 7168, fc [7168, 21504], draft vocab 32000).
"""

from __future__ import annotations

import numpy as np

from specdash.checkpoint.layout import EAGLE3_LAYER_PARTS
from specdash.checkpoint.model import ModelDir, TensorInfo


def _llama_target(hidden, layers, heads, kv_heads, inter, vocab, max_pos, arch="LlamaForCausalLM", **extra) -> dict:
    return {
        "architectures": [arch],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "torch_dtype": "bfloat16",
        "rms_norm_eps": 1e-5,
        **extra,
    }


def _target_tensors(cfg: dict, *, quant_bytes: float = 2.0) -> dict[str, TensorInfo]:
    """A coarse tensor list: one fused entry per layer (enough for weight-size estimates)."""
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = h * cfg["num_key_value_heads"] // cfg["num_attention_heads"]
    per_layer = h * h * 2 + 2 * h * kv + 3 * h * inter
    dtype = "BF16" if quant_bytes >= 2 else "I8"
    scale = quant_bytes / (2.0 if quant_bytes >= 2 else 1.0)
    t = {
        "model.embed_tokens.weight": TensorInfo("model.embed_tokens.weight", (vocab, h), "BF16", "virtual"),
        "lm_head.weight": TensorInfo("lm_head.weight", (vocab, h), "BF16", "virtual"),
        "model.norm.weight": TensorInfo("model.norm.weight", (h,), "BF16", "virtual"),
    }
    for i in range(cfg["num_hidden_layers"]):
        name = f"model.layers.{i}.packed"
        t[name] = TensorInfo(name, (int(per_layer * scale),), dtype, "virtual")
    return t


def _eagle3_draft(hidden, target_hidden, heads, kv_heads, inter, vocab, draft_vocab, max_pos, *,
                  layer_prefix="midlayer", eagle_config=None, extra_cfg=None):
    head_dim = hidden // heads
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": 1,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab,
        "max_position_embeddings": max_pos,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "rms_norm_eps": 1e-5,
    }
    if target_hidden != hidden:
        cfg["target_hidden_size"] = target_hidden
    if eagle_config is not None:
        cfg["eagle_config"] = eagle_config
    cfg.update(extra_cfg or {})
    kv = kv_heads * head_dim
    shapes = {
        "self_attn.q_proj.weight": (hidden, 2 * hidden),
        "self_attn.k_proj.weight": (kv, 2 * hidden),
        "self_attn.v_proj.weight": (kv, 2 * hidden),
        "self_attn.o_proj.weight": (hidden, hidden),
        "mlp.gate_proj.weight": (inter, hidden),
        "mlp.up_proj.weight": (inter, hidden),
        "mlp.down_proj.weight": (hidden, inter),
        "input_layernorm.weight": (hidden,),
        "post_attention_layernorm.weight": (hidden,),
        "hidden_norm.weight": (hidden,),
    }
    assert set(shapes) == set(EAGLE3_LAYER_PARTS)
    t: dict[str, TensorInfo] = {}
    for part, shape in shapes.items():
        name = f"{layer_prefix}.{part}"
        t[name] = TensorInfo(name, shape, "BF16", "virtual")
    for name, shape, dtype in (
        ("fc.weight", (hidden, 3 * target_hidden), "BF16"),
        ("norm.weight", (hidden,), "BF16"),
        ("lm_head.weight", (draft_vocab, hidden), "BF16"),
        ("d2t", (draft_vocab,), "I64"),
        ("t2d", (vocab,), "BOOL"),
    ):
        t[name] = TensorInfo(name, shape, dtype, "virtual")
    # d2t as offsets: draft id i → target id i + d2t[i]; the hot vocabulary is ids [1000, 1000 + draft_vocab).
    d2t = np.full(draft_vocab, 1000, dtype=np.int64)
    t2d = np.zeros(vocab, dtype=bool)
    t2d[1000:1000 + draft_vocab] = True
    return cfg, t, {"d2t": d2t, "t2d": t2d}


def _catalogue() -> dict[str, tuple[dict, dict, dict]]:
    llama8b = _llama_target(4096, 32, 32, 8, 14336, 128256, 131072)
    kimi = _llama_target(7168, 61, 64, 64, 18432, 163840, 262144, arch="DeepseekV3ForCausalLM",
                         model_type="deepseek_v3", quantization_config={"quant_method": "compressed-tensors",
                                                                         "bits": 4})
    cat: dict[str, tuple[dict, dict, dict]] = {
        "llama-3.1-8b": (llama8b, _target_tensors(llama8b), {}),
        "kimi-k2.5-int4": (kimi, _target_tensors(kimi, quant_bytes=0.55 * 16), {}),
    }
    cat["llama-3.1-8b-eagle3"] = _eagle3_draft(4096, 4096, 32, 8, 14336, 128256, 32000, 2048)
    cat["llama-3.1-8b-eagle3-layers0"] = _eagle3_draft(4096, 4096, 32, 8, 14336, 128256, 32000, 2048,
                                                       layer_prefix="layers.0")
    # The tiny models the real-server recordings were made with: a 155.7 M-parameter Llama and its EAGLE3
    # heads (random weights, shapes as here).
    tiny = _llama_target(1024, 8, 16, 4, 2816, 32000, 4096)
    cat["tiny-llama"] = (tiny, _target_tensors(tiny), {})
    cat["tiny-llama-eagle3"] = _eagle3_draft(1024, 1024, 16, 4, 2816, 32000, 8000, 4096)
    cat["tiny-llama-eagle3-layers0"] = _eagle3_draft(1024, 1024, 16, 4, 2816, 32000, 8000, 4096,
                                                     layer_prefix="layers.0")
    # The real-draft test bed (benchmarks/real/): SmolLM2-135M-Instruct (HuggingFaceTB's public config, tied
    # embeddings) and the EAGLE3 head trained for it with SpecForge 0.2.0 (12288-token draft vocabulary).
    smol = _llama_target(576, 30, 9, 3, 1536, 49152, 8192, tie_word_embeddings=True, rope_theta=100000.0)
    cat["smollm2-135m"] = (smol, _target_tensors(smol), {})
    cat["smollm2-135m-eagle3"] = _eagle3_draft(576, 576, 9, 3, 1536, 49152, 12288, 8192,
                                               eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 14, 26],
                                                             "use_aux_hidden_state": True})
    cat["kimi-k2.5-eagle3"] = _eagle3_draft(7168, 7168, 64, 8, 18432, 163840, 32000, 131072,
                                            eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57],
                                                          "use_aux_hidden_state": True})
    return cat


_CACHE: dict[str, tuple[dict, dict, dict]] | None = None


def virtual_model(name: str) -> ModelDir:
    """The virtual model ``name`` as a :class:`ModelDir` (``virtual=True``).

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    global _CACHE
    _CACHE = _CACHE or _catalogue()
    if name not in _CACHE:
        raise KeyError(f"sim:{name}: no such virtual model (known: {', '.join('sim:' + n for n in sorted(_CACHE))})")
    cfg, tensors, values = _CACHE[name]
    md = ModelDir(f"sim:{name}", dict(cfg), dict(tensors), virtual=True)
    md._values.update(values)
    return md
