#!/usr/bin/env python3
"""The doctor on the real trainer's output: the healthy draft and each fault that can be made from it.

Takes the real draft (SpecForge 0.2.0 output: ``config.json`` + ``model.safetensors``) and the real target
directory (``benchmarks/real/build_target.py``), writes one draft copy per fault into a work directory and
one profile per case, runs ``specdash doctor --json`` on each and prints (or writes) one verdict per case:
``{"case", "expect", "exit", "errors", "warnings", "codes", "caught"}``.

The copies keep the real draft's header (every tensor name, shape and dtype) and its real ``d2t`` / ``t2d`` values;
the weight bytes are left zero (the doctor reads ``config.json``, the safetensors header, ``d2t`` and ``t2d``, never
the weights), so a faulted copy costs no disk.  Cases:

healthy           the draft as trained: no error expected
aux_out_of_range  eagle_config aux ids [1, 14, 30]: SGLang would capture layer 31 of a 30-layer target
aux_top_level     the ids moved out of eagle_config to the config's top level (SGLang reads only eagle_config)
d2t_dropped       the ``d2t`` tensor removed: a 12288-row head with no map to the 49152-token vocabulary
d2t_absolute      ``d2t`` holding absolute target ids instead of SGLang's offsets
tied_head         ``tie_word_embeddings: true`` on the reduced-vocabulary head (SGLang would tie the head to
                  the 49152-row embedding)
eagle_not_eagle3  ``--speculative-algorithm EAGLE`` with this EAGLE3 draft (the seeds' fault)
steps1_draft16    steps 1 / top-k 1 / draft tokens 16 (SGLang shrinks draft tokens to 2)

Either directory may be the committed description instead of the weights: ``config.json`` +
``tensors.json`` (+ ``vocab_map.npz`` for the draft), as under ``benchmarks/results/real-2026-12-02/``
(``tests/test_real_bed.py`` runs it that way in CI).

Usage::

    python3 benchmarks/real/doctor_faults.py --draft DIR --target DIR [--work DIR] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CASES = {
    "healthy": "no error",
    "aux_out_of_range": "error",
    "aux_top_level": "warning or error",
    "d2t_dropped": "error",
    "d2t_absolute": "error",
    "tied_head": "error",
    "eagle_not_eagle3": "error",
    "steps1_draft16": "warning",
}


def read_specs(d: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Tensor name → (dtype, shape) from ``model.safetensors``'s header, else from ``tensors.json``."""
    import struct

    if (d / "model.safetensors").is_file():
        with open(d / "model.safetensors", "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        return {k: (v["dtype"], tuple(v["shape"])) for k, v in header.items() if k != "__metadata__"}
    listing = json.loads((d / "tensors.json").read_text())
    return {k: (dtype, tuple(shape)) for k, (shape, dtype) in listing.items()}


def read_maps(d: Path) -> tuple[np.ndarray, np.ndarray]:
    """The real ``d2t`` (offsets, I64) and ``t2d`` (BOOL) of the draft (weights, else ``vocab_map.npz``)."""
    if (d / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(d / "model.safetensors"), "np") as f:
            return f.get_tensor("d2t"), f.get_tensor("t2d")
    z = np.load(d / "vocab_map.npz")
    return z["d2t"], z["t2d"]


def header_true_target(src: Path, dst: Path) -> Path:
    """The target as config + tokenizer files + a zero-filled safetensors with its real header."""
    from specdash.checkpoint.tiny import write_safetensors

    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix in (".json", ".jinja") and f.name != "tensors.json":
            shutil.copy(f, dst / f.name)
    write_safetensors(dst / "model.safetensors", read_specs(src))
    return dst


def write_copy(src: Path, dst: Path, *, cfg_edit=None, d2t: str | None = "offsets") -> Path:
    from specdash.checkpoint.tiny import write_safetensors

    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    if cfg_edit:
        cfg_edit(cfg)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    specs = read_specs(src)
    offsets, t2d = read_maps(src)
    values = {"t2d": t2d.astype(np.uint8)}
    if d2t is None:
        specs.pop("d2t")
    elif d2t == "absolute":
        values["d2t"] = (offsets + np.arange(len(offsets))).astype(np.int64)
    else:
        values["d2t"] = offsets.astype(np.int64)
    write_safetensors(dst / "model.safetensors", specs, values)
    return dst


def profile(path: Path, name: str, target: Path, draft: Path, *, algo="EAGLE3", steps=3, topk=1, ndt=4) -> Path:
    path.write_text(f"""name = "{name}"
description = "real bed doctor case {name}"
[server]
launcher = "sglang"
model_path = "{target}"
mem_fraction_static = 0.5
sglang_version = "0.5.14"
[speculative]
algorithm = "{algo}"
draft_model_path = "{draft}"
num_steps = {steps}
eagle_topk = {topk}
num_draft_tokens = {ndt}
""")
    return path


def run(draft: Path, target: Path, work: Path) -> list[dict]:
    """One verdict per case (see the module docstring); ``target`` may hold only config + ``tensors.json``."""
    if not (target / "model.safetensors").is_file():
        target = header_true_target(target, work / "target")
    def aux(ids):
        return lambda c: c["eagle_config"].update({"eagle_aux_hidden_state_layer_ids": ids})

    def top_level(c):
        c["eagle_aux_hidden_state_layer_ids"] = c.pop("eagle_config")["eagle_aux_hidden_state_layer_ids"]

    def tie(c):
        c["tie_word_embeddings"] = True

    copies = {
        "healthy": write_copy(draft, work / "healthy"),
        "aux_out_of_range": write_copy(draft, work / "aux_out_of_range", cfg_edit=aux([1, 14, 30])),
        "aux_top_level": write_copy(draft, work / "aux_top_level", cfg_edit=top_level),
        "d2t_dropped": write_copy(draft, work / "d2t_dropped", d2t=None),
        "d2t_absolute": write_copy(draft, work / "d2t_absolute", d2t="absolute"),
        "tied_head": write_copy(draft, work / "tied_head", cfg_edit=tie),
    }
    profiles = {k: profile(work / f"{k}.toml", f"real-{k}", target, v) for k, v in copies.items()}
    profiles["eagle_not_eagle3"] = profile(work / "eagle.toml", "real-eagle", target, copies["healthy"], algo="EAGLE")
    profiles["steps1_draft16"] = profile(work / "s1d16.toml", "real-s1d16", target, copies["healthy"], steps=1,
                                         ndt=16)
    out = []
    for case, prof in profiles.items():
        p = subprocess.run([sys.executable, "-m", "specdash", "doctor", "--profile", str(prof), "--json",
                            "--gpu-memory-mib", "143771", "--gpus", "1"], capture_output=True, text=True,
                           timeout=120)
        try:
            rep = json.loads(p.stdout)
        except ValueError:
            out.append({"case": case, "expect": CASES[case], "exit": p.returncode, "error": p.stderr[-400:]})
            continue
        fs = rep.get("findings", [])
        errs = [f["code"] for f in fs if f["severity"] == "error"]
        warns = [f["code"] for f in fs if f["severity"] == "warning"]
        exp = CASES[case]
        caught = (not errs) if exp == "no error" else bool(errs) if exp == "error" else bool(errs or warns)
        out.append({"case": case, "expect": exp, "exit": p.returncode, "errors": errs, "warnings": warns,
                    "caught": caught,
                    "messages": [f["message"] for f in fs if f["severity"] in ("error", "warning")]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draft", required=True, type=Path)
    ap.add_argument("--target", required=True, type=Path)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="real-doctor-"))
    try:
        res = run(a.draft.resolve(), a.target.resolve(), work.resolve())
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(res, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    for r in res:
        print(r["case"], "caught" if r.get("caught") else "MISSED", r.get("errors"), r.get("warnings"))
    return 0 if all(r.get("caught") for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
