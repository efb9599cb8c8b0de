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

:func:`write_profile` writes a profile TOML for tests and demos; the tiny model directories
(``tiny_target``, ``tiny_draft``, ``write_safetensors``) are :mod:`specdash.checkpoint.tiny`.
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


# --- a profile for tests and demos ---------------------------------------------------------------

def write_profile(path: str | Path, *, model_path: str, draft_path: str | None = None, algorithm: str | None = "EAGLE3",
                  num_steps: int | None = 3, eagle_topk: int | None = 1, num_draft_tokens: int | None = 4,
                  sglang_version: str | None = "0.5.14", launcher: str = "sglang", tp_size: int = 1,
                  mem_fraction_static: float | None = None, context_length: int | None = None,
                  extra_args: list[str] | None = None, spec_extra_args: list[str] | None = None,
                  env: dict[str, str] | None = None, name: str = "tiny", testbed: bool | None = None,
                  sim_scenario: str | None = None) -> Path:
    """Write a profile TOML (tomlkit) for tests and demos; None values are left out (``sim_scenario``:
    ``[sim] scenario`` of a ``launcher = "sim"`` profile)."""
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
    if sim_scenario is not None:
        doc["sim"] = {"scenario": sim_scenario}
    path = Path(path)
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


__all__ = ["make_tiny_draft_and_sample", "write_profile"]
