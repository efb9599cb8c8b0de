"""Tiny, header-true model directories (``config.json`` + ``model.safetensors``) for tests and demos.

Checkpoint writers beside the reader (:mod:`specdash.checkpoint.reader`), numpy and the standard
library only:

- :func:`write_safetensors`: a safetensors file whose header declares any shapes and dtypes, the
  bulk left as a sparse zero-filled hole (a header can declare gigabytes at no cost);
- :func:`tiny_target`: a Llama-style target directory;
- :func:`tiny_draft`: an EAGLE3 (or EAGLE-2) draft directory, with the usual faults on request
  (renamed or missing tensors, absolute ``d2t``, aux ids at the top level, …).

The doctor's tests and the simulator's (through :mod:`specdash.sim.testing`) build their inputs
with these.  The self-test's sample with known wiring is :mod:`specdash.eagle3.sample`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_ST_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def write_safetensors(path: str | Path, specs: dict[str, tuple[str, tuple[int, ...]]],
                      values: dict[str, np.ndarray] | None = None) -> Path:
    """Write a safetensors file declaring ``specs`` (name → (dtype, shape)) without numpy for the bulk.

    Tensors named in ``values`` get those bytes (numpy arrays of the matching item size, written
    little-endian); every other tensor is zeros, left as a sparse hole in the file, so a header
    can declare gigabytes (real dtypes such as BF16 included) at no cost.
    """
    import json as _json
    import struct

    values = values or {}
    header: dict = {}
    off = 0
    for name, (dtype, shape) in specs.items():
        size = int(np.prod(shape, dtype=np.int64)) * _ST_BYTES[dtype]
        if name in values and values[name].nbytes != size:
            raise ValueError(f"{name}: {values[name].nbytes} bytes given, {size} declared")
        header[name] = {"dtype": dtype, "shape": [int(x) for x in shape], "data_offsets": [off, off + size]}
        off += size
    hb = _json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    path = Path(path)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hb)))
        fh.write(hb)
        base = fh.tell()
        for name, arr in values.items():
            fh.seek(base + header[name]["data_offsets"][0])
            fh.write(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes())
        fh.truncate(base + off)
    return path


def tiny_target(dir: str | Path, *, hidden: int = 64, layers: int = 8, heads: int = 4, kv_heads: int = 2,
                inter: int = 128, vocab: int = 512, max_pos: int = 4096, arch: str = "LlamaForCausalLM",
                dtype: str = "bfloat16", extra_cfg: dict | None = None, scale_bytes: int = 1,
                mtp_layers: int = 0) -> Path:
    """A target directory (config.json + a header-true, zero-filled model.safetensors).

    ``scale_bytes`` multiplies one packed per-layer tensor so memory checks can see a large model.
    ``mtp_layers`` > 0 adds DeepSeek-style NextN layers: ``num_nextn_predict_layers`` in config.json and
    decoder layers ``L … L + n − 1`` with their ``eh_proj`` / ``enorm`` / ``hnorm`` tensors.
    """
    root = Path(dir)
    root.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": [arch], "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": hidden // heads,
           "intermediate_size": inter, "vocab_size": vocab, "max_position_embeddings": max_pos,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": dtype,
           **({"num_nextn_predict_layers": mtp_layers} if mtp_layers else {}), **(extra_cfg or {})}
    (root / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    hd, kv = hidden // heads, kv_heads * (hidden // heads)
    specs: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (vocab, hidden))}
    for i in range(layers + mtp_layers):
        p = f"model.layers.{i}."
        if i >= layers:
            specs.update({p + "eh_proj.weight": ("BF16", (hidden, 2 * hidden)), p + "enorm.weight": ("BF16", (hidden,)),
                          p + "hnorm.weight": ("BF16", (hidden,))})
        specs.update({p + "self_attn.q_proj.weight": ("BF16", (heads * hd, hidden)),
                      p + "self_attn.k_proj.weight": ("BF16", (kv, hidden)),
                      p + "self_attn.v_proj.weight": ("BF16", (kv, hidden)),
                      p + "self_attn.o_proj.weight": ("BF16", (hidden, heads * hd)),
                      p + "mlp.gate_proj.weight": ("BF16", (inter * scale_bytes, hidden)),
                      p + "mlp.up_proj.weight": ("BF16", (inter, hidden)),
                      p + "mlp.down_proj.weight": ("BF16", (hidden, inter)),
                      p + "input_layernorm.weight": ("BF16", (hidden,)),
                      p + "post_attention_layernorm.weight": ("BF16", (hidden,))})
    specs["model.norm.weight"] = ("BF16", (hidden,))
    specs["lm_head.weight"] = ("BF16", (vocab, hidden))
    write_safetensors(root / "model.safetensors", specs)
    return root


def tiny_draft(dir: str | Path, *, hidden: int = 64, heads: int = 4, kv_heads: int = 2, inter: int = 128,
               vocab: int = 512, draft_vocab: int | None = 128, layer_prefix: str = "midlayer",
               arch: str = "LlamaForCausalLMEagle3", fc_mult: int = 3, target_hidden: int | None = None,
               d2t: str | None = "offsets", t2d: bool = True, lm_head: bool = True,
               draft_vocab_in_config: str = "value", tie: bool = False, eagle_ids: list[int] | None = None,
               top_ids: list[int] | None = None, max_pos: int = 4096, dtype: str = "bfloat16",
               extra_cfg: dict | None = None, extra_tensors: dict[str, tuple[str, tuple]] | None = None,
               drop: tuple[str, ...] = (), rename: dict[str, str] | None = None, seed: int = 0) -> Path:
    """An EAGLE3 (or, with ``fc_mult=2``, EAGLE-2) draft directory at tiny shapes, header-true.

    ``d2t``: ``"offsets"`` (correct), ``"absolute"`` (the ids themselves), None (absent); the hot
    vocabulary is a seeded random sorted subset of the target vocabulary.
    ``draft_vocab_in_config``: ``"value"`` | ``"null"`` | ``"absent"``.  ``drop`` removes tensors,
    ``rename`` renames them, ``extra_tensors`` adds zero-filled ones.
    """
    rng = np.random.default_rng(seed)
    root = Path(dir)
    root.mkdir(parents=True, exist_ok=True)
    hd = hidden // heads
    hin = target_hidden or hidden
    cfg: dict = {"architectures": [arch], "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": 1,
                 "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": hd,
                 "intermediate_size": inter, "hidden_act": "silu", "max_position_embeddings": max_pos,
                 "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": vocab, "tie_word_embeddings": tie,
                 "torch_dtype": dtype}
    if draft_vocab_in_config == "value":
        cfg["draft_vocab_size"] = draft_vocab
    elif draft_vocab_in_config == "null":
        cfg["draft_vocab_size"] = None
    if target_hidden:
        cfg["target_hidden_size"] = target_hidden
    if eagle_ids is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": eagle_ids, "use_aux_hidden_state": True}
    if top_ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = top_ids
    cfg.update(extra_cfg or {})
    (root / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    kv = kv_heads * hd
    layer = {"self_attn.q_proj.weight": (heads * hd, 2 * hidden), "self_attn.k_proj.weight": (kv, 2 * hidden),
             "self_attn.v_proj.weight": (kv, 2 * hidden), "self_attn.o_proj.weight": (hidden, heads * hd),
             "mlp.gate_proj.weight": (inter, hidden), "mlp.up_proj.weight": (inter, hidden),
             "mlp.down_proj.weight": (hidden, inter), "input_layernorm.weight": (hidden,),
             "post_attention_layernorm.weight": (hidden,), "hidden_norm.weight": (hidden,)}
    specs: dict[str, tuple[str, tuple]] = {f"{layer_prefix}.{k}": ("BF16", v) for k, v in layer.items()}
    specs["fc.weight"] = ("BF16", (hidden, fc_mult * hin))
    specs["norm.weight"] = ("BF16", (hidden,))
    dv = draft_vocab or vocab
    if lm_head and not tie:
        specs["lm_head.weight"] = ("BF16", (dv, hidden))
    values: dict[str, np.ndarray] = {}
    if d2t is not None and draft_vocab:
        hot = np.sort(rng.choice(np.arange(4, vocab), size=draft_vocab, replace=False)).astype(np.int64)
        arr = hot - np.arange(draft_vocab) if d2t == "offsets" else hot
        specs["d2t"] = ("I64", (draft_vocab,))
        values["d2t"] = arr.astype(np.int64)
        if t2d:
            mask = np.zeros(vocab, dtype=bool)
            mask[hot] = True
            specs["t2d"] = ("BOOL", (vocab,))
            values["t2d"] = mask
    specs.update(extra_tensors or {})
    for name in drop:
        specs.pop(name, None)
        values.pop(name, None)
    for old, new in (rename or {}).items():
        if old in specs:
            specs[new] = specs.pop(old)
            if old in values:
                values[new] = values.pop(old)
    write_safetensors(root / "model.safetensors", specs, values)
    return root


__all__ = ["tiny_draft", "tiny_target", "write_safetensors"]
