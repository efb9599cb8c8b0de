#!/usr/bin/env python3
"""Config-only model directories for the 8B-shaped EAGLE-3 tuning testbed (lent H200).

Writes, under ``--root`` (default ``/root/models``), two directories without weight files
(SGLang fills the weights with ``--load-format dummy`` / ``--speculative-draft-load-format
dummy``, and the acceptance comes from ``SGLANG_SIMULATE_ACC_LEN``; see
``profiles/h200-8b-*.toml``):

``llama8b-dummy/``
    ``LlamaForCausalLM`` with Llama-3.1-8B shapes (hidden 4096, 32 layers, 32 heads, 8 KV heads,
    intermediate 14336, max positions 8192, bf16) but vocab 32000, so the tiny target's
    tokenizer (``--source``, default ``<root>/target``, built by the device's ``make_models.py``)
    serves it.  Every tokenizer file is copied from there — ``tokenizer.json``,
    ``tokenizer_config.json``, ``chat_template.jinja``, ``generation_config.json`` and
    ``special_tokens_map.json`` when present — or SGLang / transformers reach for the hub.
``llama8b-eagle3-dummy/``
    ``LlamaForCausalLMEagle3`` draft: hidden 4096, one layer, 32 heads / 8 KV heads,
    intermediate 14336, vocab 32000, ``draft_vocab_size`` 32000 (no ``d2t`` map needed) and
    ``eagle_config.eagle_aux_hidden_state_layer_ids`` = [1, 15, 28] — the layer outputs SGLang's
    Llama captures by default for 32 layers (``python/sglang/srt/models/llama.py``,
    ``set_eagle3_layers_to_capture``: the inputs of layers 2, L/2 and L − 3).

Idempotent: a file whose content is already right is left alone ("unchanged"); every file
is reported.  ``--check`` validates an existing pair (shapes, architectures, aux ids, the
tokenizer files, no weight files expected) and exits 1 listing every problem.

Usage::

    python3 benchmarks/h200/testbed.py [--root DIR] [--source DIR]
    python3 benchmarks/h200/testbed.py --check [--root DIR]

Standard library only (runs on the device before anything else is set up).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TARGET_DIR = "llama8b-dummy"
DRAFT_DIR = "llama8b-eagle3-dummy"
DEFAULT_ROOT = "/root/models"

HIDDEN, LAYERS, HEADS, KV_HEADS, INTER, VOCAB, MAX_POS = 4096, 32, 32, 8, 14336, 32000, 8192
HEAD_DIM = HIDDEN // HEADS
AUX_IDS = [1, 15, 28]

#: Tokenizer files SGLang / transformers read from the target directory.
TOKENIZER_REQUIRED = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
#: Copied when the source has them (``save_pretrained`` writes some of them only in some releases).
TOKENIZER_OPTIONAL = ("special_tokens_map.json", "added_tokens.json", "tokenizer.model", "vocab.json", "merges.txt")
#: Files that must NOT be there: the weights are dummy, a stray file would be loaded instead.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def target_config() -> dict:
    """config.json of the target (the tiny target's key set, Llama-3.1-8B shapes)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "dtype": "bfloat16",
        "eos_token_id": 2,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTER,
        "max_position_embeddings": MAX_POS,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "pad_token_id": 3,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
        "tie_word_embeddings": False,
        "transformers_version": "5.8.1",
        "use_cache": True,
        "vocab_size": VOCAB,
    }


def draft_config() -> dict:
    """config.json of the EAGLE-3 draft (the device's tiny drafts' key set, 8B shapes)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POS,
        "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0,
        "vocab_size": VOCAB,
        "draft_vocab_size": VOCAB,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
        "attention_bias": False,
        "mlp_bias": False,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(AUX_IDS), "use_aux_hidden_state": True},
    }


def _dump(obj: dict) -> str:
    return json.dumps(obj, indent=2) + "\n"


def _put(path: Path, data: bytes, report: list[str]) -> None:
    """Write ``data`` to ``path`` unless it is already there; record what happened."""
    if path.is_file() and path.read_bytes() == data:
        report.append(f"unchanged {path}")
        return
    existed = path.exists()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    report.append(f"{'rewrote' if existed else 'wrote'} {path} ({len(data)} bytes)")


def write_testbed(root: Path, source: Path | None = None) -> list[str]:
    """Write (or refresh) both directories under ``root``; return one line per file.

    Raises:
        FileNotFoundError: the tokenizer source lacks a required file.
    """
    root = Path(root)
    source = Path(source) if source is not None else root / "target"
    missing = [n for n in TOKENIZER_REQUIRED if not (source / n).is_file()]
    if missing:
        raise FileNotFoundError(
            f"tokenizer source {source} lacks {', '.join(missing)} (build the tiny models first: "
            "device_up.sh runs make_models.py, or pass --source DIR)")
    report: list[str] = []
    tgt, drf = root / TARGET_DIR, root / DRAFT_DIR
    tgt.mkdir(parents=True, exist_ok=True)
    drf.mkdir(parents=True, exist_ok=True)
    _put(tgt / "config.json", _dump(target_config()).encode(), report)
    for name in TOKENIZER_REQUIRED + TOKENIZER_OPTIONAL:
        src = source / name
        if src.is_file():
            _put(tgt / name, src.read_bytes(), report)
    _put(drf / "config.json", _dump(draft_config()).encode(), report)
    return report


def _read_json(path: Path, problems: list[str]) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(f"{path}: missing")
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: unreadable or not JSON ({exc})")
    return None


def _expect(cfg: dict, path: Path, want: dict, problems: list[str]) -> None:
    for key, val in want.items():
        if cfg.get(key) != val:
            problems.append(f"{path}: {key} = {cfg.get(key)!r}, expected {val!r}")


def check_testbed(root: Path) -> list[str]:
    """Problems with the pair under ``root`` (empty when it is right)."""
    root = Path(root)
    problems: list[str] = []
    tgt, drf = root / TARGET_DIR, root / DRAFT_DIR
    for d in (tgt, drf):
        if not d.is_dir():
            problems.append(f"{d}: missing directory (run benchmarks/h200/testbed.py --root {root})")
    if problems:
        return problems
    keys = ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "vocab_size", "max_position_embeddings", "head_dim")
    tcfg = _read_json(tgt / "config.json", problems)
    if tcfg is not None:
        want = {k: target_config()[k] for k in keys}
        _expect(tcfg, tgt / "config.json", want, problems)
        if tcfg.get("dtype", tcfg.get("torch_dtype")) != "bfloat16":
            problems.append(f"{tgt / 'config.json'}: dtype {tcfg.get('dtype', tcfg.get('torch_dtype'))!r}, "
                            "expected 'bfloat16'")
    dcfg = _read_json(drf / "config.json", problems)
    if dcfg is not None:
        want = {k: draft_config()[k] for k in (*keys, "draft_vocab_size")}
        _expect(dcfg, drf / "config.json", want, problems)
        aux = (dcfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        if aux != AUX_IDS:
            problems.append(f"{drf / 'config.json'}: eagle_config.eagle_aux_hidden_state_layer_ids = {aux!r}, "
                            f"expected {AUX_IDS}")
    for name in TOKENIZER_REQUIRED:
        p = tgt / name
        if not p.is_file():
            problems.append(f"{p}: missing tokenizer file (SGLang would reach for the hub)")
        elif p.suffix == ".json":
            _read_json(p, problems)
    for d in (tgt, drf):
        for f in sorted(d.iterdir()):
            if f.suffix in WEIGHT_SUFFIXES or f.name.endswith(".index.json"):
                problems.append(f"{f}: weight file in a dummy-weights directory (SGLang would try to load it)")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=DEFAULT_ROOT, help=f"parent directory of the pair (default {DEFAULT_ROOT})")
    p.add_argument("--source", default=None, help="tokenizer source directory (default <root>/target)")
    p.add_argument("--check", action="store_true", help="validate an existing pair instead of writing it")
    args = p.parse_args(argv)
    root = Path(args.root)
    if args.check:
        problems = check_testbed(root)
        for line in problems:
            print(f"PROBLEM {line}")
        print(f"testbed check {root}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    try:
        report = write_testbed(root, Path(args.source) if args.source else None)
    except FileNotFoundError as exc:
        print(f"testbed: {exc}", file=sys.stderr)
        return 2
    for line in report:
        print(line)
    problems = check_testbed(root)
    for line in problems:
        print(f"PROBLEM {line}")
    print(f"testbed {root}: {TARGET_DIR}/ + {DRAFT_DIR}/ {'OK' if not problems else 'NOT OK'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
