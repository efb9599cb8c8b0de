"""A tiny EAGLE3 draft whose correct wiring is known, plus a matching recorded sample.

``make_tiny_draft_and_sample(dir, seed)`` writes ``dir/draft/`` (``config.json`` +
``model.safetensors``: hidden 64, 4 heads / 2 KV heads, vocab 512, draft vocab 128, ``d2t``
offsets onto a random sorted "hot" subset of the vocabulary, ``t2d``) and ``dir/sample.safetensors``
in the self-test's sample format (:mod:`specdash.eagle3.selftest`), using numpy only.

How the wiring is made identifiable.  Each draft id ``d`` has a unit code vector ``c_d`` ∈ R^64 and
``lm_head`` row ``d`` is ``c_d``.  ``fc.weight = [W1 | W2 | W3]`` with random orthogonal blocks.
For each position the three aux states are ``s1, s2 ~ N(0, 1)`` and
``s3 = W3ᵀ (α·c_d − W1·s1 − W2·s2)``, so ``fc([s1, s2, s3]) = α·c_d`` exactly — and only for
that order: each state alone is dominated by noise, ``s3`` carries the code rotated by ``W3ᵀ``.
A fourth captured layer ``l3 ~ N(0, 1)`` (pure noise) completes ``hidden_states_all``.
Attention and MLP are random but scaled small (``o_proj``/``down_proj``), so the residual stays
near ``α·c_d`` and the final norm + ``lm_head`` recover ``d``.  Hence:

* wired right (``[s1, s2, s3]`` through fc): ≈ 95 % (5 % of targets lie outside the hot vocab);
* shifted by one layer (``[s2, s3, l3]``): chance (≈ 1/128);
* one layer fed (``l3`` alone, fc skipped because widths match — the EAGLE mistake): chance;
* d2t read as absolute ids: ≈ 0 %.

Token ids follow the raw layout: ``hidden_states[t]`` is what the target computed at position
``t``; the draft pairs it with ``input_ids[t+1]`` and must predict ``input_ids[t+2]``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HIDDEN, HEADS, KV_HEADS, INTER, VOCAB, DRAFT_VOCAB, K_AUX = 64, 4, 2, 128, 512, 128, 3
ALPHA = 6.0
OOV_FRACTION = 0.05


def _orthogonal(rng: np.random.Generator, n: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def _save(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> None:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path), metadata=metadata)


def make_tiny_draft_and_sample(dir: str | Path, seed: int = 0, *, positions: int = 400,
                               layer_prefix: str = "midlayer") -> tuple[Path, Path]:
    """Write ``dir/draft`` and ``dir/sample.safetensors``; returns their paths.

    ``positions`` is the number of scored positions (the sample holds ``positions + 2`` tokens);
    ``layer_prefix`` ``"layers.0"`` writes the speculators naming instead of ``midlayer``.
    """
    rng = np.random.default_rng(seed)
    root = Path(dir)
    draft_dir = root / "draft"
    draft_dir.mkdir(parents=True, exist_ok=True)
    H, hd = HIDDEN, HIDDEN // HEADS

    hot = np.sort(rng.choice(np.arange(4, VOCAB), size=DRAFT_VOCAB, replace=False)).astype(np.int64)
    d2t = hot - np.arange(DRAFT_VOCAB, dtype=np.int64)
    t2d = np.zeros(VOCAB, dtype=bool)
    t2d[hot] = True
    codes = rng.standard_normal((DRAFT_VOCAB, H)).astype(np.float32)
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    W = [_orthogonal(rng, H) for _ in range(K_AUX)]

    def n(*shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    ones = np.ones(H, dtype=np.float32)
    layer = {
        "self_attn.q_proj.weight": n(HEADS * hd, 2 * H, scale=1 / np.sqrt(2 * H)),
        "self_attn.k_proj.weight": n(KV_HEADS * hd, 2 * H, scale=1 / np.sqrt(2 * H)),
        "self_attn.v_proj.weight": n(KV_HEADS * hd, 2 * H, scale=1 / np.sqrt(2 * H)),
        "self_attn.o_proj.weight": n(H, HEADS * hd, scale=0.1),
        "mlp.gate_proj.weight": n(INTER, H, scale=1 / np.sqrt(H)),
        "mlp.up_proj.weight": n(INTER, H, scale=1 / np.sqrt(H)),
        "mlp.down_proj.weight": n(H, INTER, scale=0.1),
        "input_layernorm.weight": ones.copy(),
        "post_attention_layernorm.weight": ones.copy(),
        "hidden_norm.weight": ones.copy(),
    }
    tensors = {f"{layer_prefix}.{k}": v for k, v in layer.items()}
    tensors.update({
        "fc.weight": np.concatenate(W, axis=1),  # [H, 3H]
        "norm.weight": ones.copy(),
        "lm_head.weight": (codes * 4.0).astype(np.float32),
        "d2t": d2t,
        "t2d": t2d,
    })
    _save(draft_dir / "model.safetensors", tensors)
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": H,
        "intermediate_size": INTER,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": hd,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5], "use_aux_hidden_state": True},
    }
    (draft_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    # The sequence: row t (t = 0 … positions-1) pairs hidden_states[t] with input_ids[t+1] and predicts
    # input_ids[t+2].  Draft id d_t is encoded in hidden_states[t].
    T = positions + 2
    tokens = np.empty(T, dtype=np.int64)
    tokens[:2] = rng.integers(0, VOCAB, size=2)
    cold = np.setdiff1d(np.arange(VOCAB), hot)
    hs_all = np.zeros((T, (K_AUX + 1) * H), dtype=np.float32)
    for t in range(T):
        d = int(rng.integers(0, DRAFT_VOCAB))
        if t + 2 < T:
            tokens[t + 2] = hot[d] if rng.random() >= OOV_FRACTION else int(rng.choice(cold))
        s1 = rng.standard_normal(H).astype(np.float32)
        s2 = rng.standard_normal(H).astype(np.float32)
        s3 = W[2].T @ (ALPHA * codes[d] - W[0] @ s1 - W[1] @ s2)
        l3 = rng.standard_normal(H).astype(np.float32)
        hs_all[t] = np.concatenate([s1, s2, s3, l3])
    embed = rng.standard_normal((VOCAB, H)).astype(np.float32)
    sample = {
        "input_ids": tokens,
        "hidden_states": hs_all[:, : K_AUX * H].copy(),
        "hidden_states_all": hs_all,
        "embed_tokens": embed,
    }
    sample_path = root / "sample.safetensors"
    _save(sample_path, sample, {"layout": "raw", "aux_layers": "1,3,5", "all_layers": "1,3,5,7",
                                "generator": f"specdash.eagle3.sample seed={seed}"})
    return draft_dir, sample_path


# --- tiny model directories for tests and demos ------------------------------------------------------

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
                dtype: str = "bfloat16", extra_cfg: dict | None = None, scale_bytes: int = 1) -> Path:
    """A target directory (config.json + a header-true, zero-filled model.safetensors).

    ``scale_bytes`` multiplies one packed per-layer tensor so memory checks can see a large model.
    """
    root = Path(dir)
    root.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": [arch], "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": hidden // heads,
           "intermediate_size": inter, "vocab_size": vocab, "max_position_embeddings": max_pos,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": dtype,
           **(extra_cfg or {})}
    (root / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    hd, kv = hidden // heads, kv_heads * (hidden // heads)
    specs: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (vocab, hidden))}
    for i in range(layers):
        p = f"model.layers.{i}."
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


def write_profile(path: str | Path, *, model_path: str, draft_path: str | None = None, algorithm: str | None = "EAGLE3",
                  num_steps: int | None = 3, eagle_topk: int | None = 1, num_draft_tokens: int | None = 4,
                  sglang_version: str | None = "0.5.14", launcher: str = "sglang", tp_size: int = 1,
                  mem_fraction_static: float | None = None, context_length: int | None = None,
                  extra_args: list[str] | None = None, spec_extra_args: list[str] | None = None,
                  env: dict[str, str] | None = None, name: str = "tiny", testbed: bool | None = None) -> Path:
    """Write a profile TOML (tomlkit) for tests and demos; None values are left out."""
    import tomlkit

    server = {"launcher": launcher, "model_path": model_path, "tp_size": tp_size,
              "mem_fraction_static": mem_fraction_static, "context_length": context_length,
              "sglang_version": sglang_version, "extra_args": extra_args or []}
    doc: dict = {"name": name, **({"testbed": testbed} if testbed is not None else {}),
                 "server": {k: v for k, v in server.items() if v is not None}}
    if algorithm:
        spec = {"algorithm": algorithm, "draft_model_path": draft_path, "num_steps": num_steps,
                "eagle_topk": eagle_topk, "num_draft_tokens": num_draft_tokens,
                "extra_args": spec_extra_args or []}
        doc["speculative"] = {k: v for k, v in spec.items() if v is not None}
    if env:
        doc["env"] = dict(env)
    path = Path(path)
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


__all__ = ["make_tiny_draft_and_sample", "tiny_draft", "tiny_target", "write_profile", "write_safetensors"]
