"""``specdash draft fix SRC --out DST``: write a corrected copy of an EAGLE3 draft directory.

The source is never modified (opened read-only) and an existing destination is refused; the
copy is assembled in a temporary sibling directory and renamed into place at the end, so a
failure leaves nothing half-written.  What it fixes (each reported as a :class:`Change`):

* tensor names the judged SGLang release drops silently (``llama_eagle3.py`` ``load_weights``): ``layers.0.*`` →
  ``midlayer.*`` (the form every release loads; SGLang PR #24663 added ``layers.0`` only in
  0.5.12), and names under a foreign prefix (``eagle.fc.weight`` → ``fc.weight``) when the
  parameter they belong to is otherwise missing;
* aux layer ids at the top level of ``config.json`` → ``eagle_config.eagle_aux_hidden_state_layer_ids``
  (the only place the target reads them, ``spec_aux_hidden_state.py``);
* ``d2t`` holding absolute target ids → offsets (``d2t[i] − i``; SGLang computes
  ``target = i + d2t[i]``), when :func:`specdash.checkpoint.reader.classify_d2t` (the classifier the
  doctor and the simulator use) says ``"absolute"`` (or forced with ``d2t_absolute=True``);
* a missing ``d2t`` from a list of hot target ids (``hot_token_ids``: the sorted target ids of
  the draft vocabulary; NVIDIA-NeMo/Automodel#2447), with a matching ``t2d`` mask;
* a missing ``draft_vocab_size`` (from ``lm_head.weight`` rows, else ``len(d2t)``, else null =
  borrow the target's head);
* every other file (tokenizer, generation config, README …) is copied unchanged.

Safetensors files are rewritten without torch and without loading the weights: the 8-byte
little-endian header length and JSON header are rewritten (renamed keys, recomputed
``data_offsets``, padded with spaces to 8 bytes, ``__metadata__`` kept) and each tensor's bytes
are copied verbatim from the source buffer, so dtypes (BF16 included) stay exact.  Format:
https://github.com/huggingface/safetensors#format.  Sharded checkpoints are handled shard by
shard and ``model.safetensors.index.json``'s ``weight_map`` is rewritten to match.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specdash.checkpoint.reader import CheckpointError, classify_d2t, read_model_dir
from specdash.eagle3.rules.weights import guess_param
from specdash.sglang.versions import DEFAULT_VERSION, eagle3_param_for_key, has_feature

_DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}
_CHUNK = 8 << 20


class ConvertError(Exception):
    """The fix cannot be written (existing destination, unreadable source, inconsistent inputs)."""


@dataclass(frozen=True)
class Change:
    """One modification: ``kind`` is ``rename`` | ``config`` | ``d2t`` | ``t2d`` | ``copy``."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass
class ConvertResult:
    """What :func:`fix_draft` wrote: the destination and the list of changes."""

    src: str
    dst: str
    version: str
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when anything besides plain copies changed."""
        return any(c.kind != "copy" for c in self.changes)

    def render(self) -> str:
        """Human-readable summary."""
        lines = [f"specdash draft fix: {self.src} → {self.dst} (names for SGLang {self.version})"]
        real = [c for c in self.changes if c.kind != "copy"]
        copies = [c for c in self.changes if c.kind == "copy"]
        if not real:
            lines.append("  nothing needed fixing; the copy is identical in content")
        lines += [f"  {c}" for c in real]
        if copies:
            lines.append(f"  copied unchanged: {', '.join(c.detail for c in copies)}")
        lines.append(f"next: specdash doctor --profile P (with draft_model_path = {self.dst})")
        return "\n".join(lines)


# --- raw safetensors ------------------------------------------------------------------------------


def read_safetensors_header(path: str | Path) -> tuple[dict, int]:
    """``(header dict, byte offset where the data buffer starts)`` of a safetensors file.

    Raises:
        ConvertError: not a safetensors file.
    """
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ConvertError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 << 20:
            raise ConvertError(f"{path}: implausible safetensors header length {n}")
        try:
            header = json.loads(fh.read(n))
        except ValueError as exc:
            raise ConvertError(f"{path}: bad safetensors header: {exc}") from None
    return header, 8 + n


def write_safetensors_raw(dst: str | Path, entries: list[tuple[str, dict, tuple]], metadata: dict | None) -> int:
    """Write a safetensors file from ``(name, {"dtype", "shape"}, source)`` entries.

    ``source`` is ``("copy", src_path, absolute_offset, nbytes)`` or ``("bytes", data)``.
    Offsets are assigned in entry order.  Returns the data-buffer size in bytes.
    """
    header: dict = {}
    off = 0
    for name, info, src in entries:
        size = src[3] if src[0] == "copy" else len(src[1])
        header[name] = {"dtype": info["dtype"], "shape": list(info["shape"]), "data_offsets": [off, off + size]}
        off += size
    if metadata:
        header["__metadata__"] = metadata
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(dst, "wb") as out:
        out.write(struct.pack("<Q", len(hb)))
        out.write(hb)
        handles: dict[str, object] = {}
        try:
            for _, _, src in entries:
                if src[0] == "bytes":
                    out.write(src[1])
                    continue
                _, spath, start, nbytes = src
                fh = handles.get(spath)
                if fh is None:
                    fh = handles[spath] = open(spath, "rb")
                fh.seek(start)
                left = nbytes
                while left:
                    buf = fh.read(min(_CHUNK, left))
                    if not buf:
                        raise ConvertError(f"{spath}: truncated data buffer")
                    out.write(buf)
                    left -= len(buf)
        finally:
            for fh in handles.values():
                fh.close()
    return off


# --- planning -------------------------------------------------------------------------------------


def _rename_plan(names: list[str], version: str, num_layers: int) -> dict[str, str]:
    """old name → new name for tensors the judged release would drop."""
    plan: dict[str, str] = {}
    provided = {eagle3_param_for_key(n, version) for n in names} - {None}
    for n in names:
        base = n.removeprefix("model.")
        if base.startswith("layers.0.") and num_layers <= 1:
            new = ("model." if n.startswith("model.") else "") + "midlayer." + base[len("layers.0."):]
            if eagle3_param_for_key(new, "0.5.10") is not None:
                plan[n] = new
            continue
        if eagle3_param_for_key(n, version) is not None:
            continue
        if base.startswith("layers.") and has_feature("draft_fc_norm", version):
            continue  # multi-layer drafts keep layers.N on 0.5.12+
        guess = guess_param(n)
        if guess and guess not in provided and guess not in plan.values():
            plan[n] = guess
            provided.add(guess)
    return plan


def _load_hot_ids(path: str) -> np.ndarray:
    p = Path(path)
    try:
        if p.suffix == ".npy":
            ids = np.load(p)
        else:
            obj = json.loads(p.read_text(encoding="utf-8"))
            if isinstance(obj, dict):
                obj = obj.get("selected_token_ids") or obj.get("hot_token_ids") or obj.get("ids")
            ids = np.asarray(obj)
    except (OSError, ValueError) as exc:
        raise ConvertError(f"{path}: cannot read hot token ids ({exc}); expected a JSON list or .npy array") from None
    ids = np.asarray(ids).astype(np.int64).reshape(-1)
    if len(np.unique(ids)) != len(ids):
        raise ConvertError(f"{path}: hot token ids contain duplicates")
    return np.sort(ids)


# --- entry point ----------------------------------------------------------------------------------


def fix_draft(src: str | Path, dst: str | Path, *, sglang_version: str | None = None,
              d2t_absolute: bool | None = None, hot_token_ids: str | None = None,
              target_vocab_size: int | None = None) -> ConvertResult:
    """Write a corrected copy of the draft directory ``src`` to ``dst`` (module docstring).

    Args:
        sglang_version: the release whose loader the names must suit (default: newest known).
        d2t_absolute: True forces the absolute→offset rewrite, False forbids it, None detects.
        hot_token_ids: JSON list / ``.npy`` of the draft vocabulary's target ids, to add a
            missing ``d2t``/``t2d``.
        target_vocab_size: the target's vocabulary (default: the draft config's ``vocab_size``).

    Raises:
        ConvertError: ``dst`` exists, ``src`` is unreadable or not a directory, inputs disagree.
    """
    version = sglang_version or DEFAULT_VERSION
    src_p, dst_p = Path(src).expanduser(), Path(dst).expanduser()
    if str(src).startswith("sim:"):
        raise ConvertError(f"{src} is a virtual simulator model; there are no files to fix")
    if dst_p.exists():
        raise ConvertError(f"{dst_p} already exists; choose a new --out directory (the source is never overwritten)")
    if src_p.resolve() == dst_p.resolve():
        raise ConvertError("--out must differ from the source directory")
    try:
        md = read_model_dir(src_p)
    except CheckpointError as exc:
        raise ConvertError(str(exc)) from None
    cfg = json.loads((src_p / "config.json").read_text(encoding="utf-8"))
    changes: list[Change] = []
    vocab = target_vocab_size or md.vocab_size
    nlayers = int(md.num_hidden_layers or 1)

    # tensor renames
    plan = _rename_plan(sorted(md.tensors), version, nlayers)
    for old, new in plan.items():
        changes.append(Change("rename", f"{old} → {new}"))

    # d2t
    new_bytes: dict[str, bytes] = {}
    added: dict[str, tuple[dict, bytes]] = {}
    if "d2t" in md.tensors:
        d2t = np.asarray(md.load_tensor("d2t")).astype(np.int64).reshape(-1)
        t2d = np.asarray(md.load_tensor("t2d")).astype(bool).reshape(-1) if "t2d" in md.tensors else None
        absolute = classify_d2t(d2t, t2d, vocab) == "absolute" if d2t_absolute is None else d2t_absolute
        if absolute:
            info = md.tensors["d2t"]
            offsets = d2t - np.arange(len(d2t), dtype=np.int64)
            new_bytes["d2t"] = offsets.astype(_np_dtype(info.dtype)).tobytes()
            changes.append(Change("d2t", f"absolute target ids → offsets (d2t[i] − i); d2t[:3] {d2t[:3].tolist()} → "
                                  f"{offsets[:3].tolist()}"))
        if hot_token_ids:
            changes.append(Change("d2t", "kept the existing d2t; --hot-token-ids ignored"))
    elif hot_token_ids:
        ids = _load_hot_ids(hot_token_ids)
        lm = md.tensors.get("lm_head.weight")
        if lm is not None and lm.shape[0] != len(ids):
            raise ConvertError(f"{hot_token_ids}: {len(ids)} ids but lm_head.weight has {lm.shape[0]} rows")
        if vocab and ids.max(initial=0) >= vocab:
            raise ConvertError(f"{hot_token_ids}: id {int(ids.max())} ≥ target vocab {vocab}")
        offsets = ids - np.arange(len(ids), dtype=np.int64)
        added["d2t"] = ({"dtype": "I64", "shape": [len(ids)]}, offsets.astype("<i8").tobytes())
        changes.append(Change("d2t", f"added d2t [{len(ids)}] (offsets) from {hot_token_ids}"))
        if "t2d" not in md.tensors and vocab:
            mask = np.zeros(int(vocab), dtype=bool)
            mask[ids] = True
            added["t2d"] = ({"dtype": "BOOL", "shape": [int(vocab)]}, mask.tobytes())
            changes.append(Change("t2d", f"added t2d [{vocab}] marking the {len(ids)} hot ids"))

    # config.json
    new_cfg = json.loads(json.dumps(cfg))
    top = new_cfg.get("eagle_aux_hidden_state_layer_ids")
    ec = new_cfg.get("eagle_config") if isinstance(new_cfg.get("eagle_config"), dict) else None
    if isinstance(top, list) and not (ec and ec.get("eagle_aux_hidden_state_layer_ids")):
        ec = dict(ec or {})
        ec["eagle_aux_hidden_state_layer_ids"] = top
        ec.setdefault("use_aux_hidden_state", True)
        new_cfg["eagle_config"] = ec
        del new_cfg["eagle_aux_hidden_state_layer_ids"]
        changes.append(Change("config", f"moved eagle_aux_hidden_state_layer_ids {top} from the top level into "
                              "eagle_config (the only place the target reads them)"))
    if "draft_vocab_size" not in _keys(new_cfg) and not new_cfg.get("tie_word_embeddings", False):
        lm = md.tensors.get("lm_head.weight")
        if lm is not None:
            dvs, why = int(lm.shape[0]), "lm_head.weight rows"
        elif "d2t" in md.tensors or "d2t" in added:
            dvs = int(md.tensors["d2t"].shape[0]) if "d2t" in md.tensors else int(added["d2t"][0]["shape"][0])
            why = "len(d2t)"
        else:
            dvs, why = None, "no lm_head: borrow the target's head"
        new_cfg["draft_vocab_size"] = dvs
        changes.append(Change("config", f"added draft_vocab_size = {dvs} ({why})"))

    # write
    dst_p.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst_p.name}.", dir=dst_p.parent))
    try:
        _write_tensors(src_p, tmp, plan, new_bytes, added)
        (tmp / "config.json").write_text(json.dumps(new_cfg, indent=2) + "\n", encoding="utf-8")
        skip = {"config.json", "model.safetensors.index.json"} | {p.name for p in src_p.glob("*.safetensors")}
        for p in sorted(src_p.iterdir()):
            if p.name in skip:
                continue
            if p.is_dir():
                shutil.copytree(p, tmp / p.name, symlinks=True)
            else:
                shutil.copy2(p, tmp / p.name)
            changes.append(Change("copy", p.name))
        os.rename(tmp, dst_p)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ConvertResult(str(src_p), str(dst_p), version, changes)


def _keys(obj) -> set[str]:
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(k)
            out |= _keys(v)
    return out


def _np_dtype(st_dtype: str) -> str:
    return {"I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "<i1", "U8": "<u1"}.get(st_dtype, "<i8")


def _write_tensors(src: Path, out: Path, plan: dict[str, str], new_bytes: dict[str, bytes],
                   added: dict[str, tuple[dict, bytes]]) -> None:
    index_path = src / "model.safetensors.index.json"
    shards = sorted(p.name for p in src.glob("*.safetensors"))
    index = None
    if index_path.is_file():
        index = json.loads(index_path.read_text(encoding="utf-8"))
        listed = sorted(set(index.get("weight_map", {}).values()))
        shards = [s for s in listed if (src / s).is_file()] or shards
    target_shard = None
    if added:
        target_shard = shards[0] if shards else "model.safetensors"
    total = 0
    written_map: dict[str, str] = {}
    for shard in shards:
        header, start = read_safetensors_header(src / shard)
        meta = header.pop("__metadata__", None)
        items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
        entries = []
        for name, info in items:
            b, e = info["data_offsets"]
            new_name = plan.get(name, name)
            if name in new_bytes:
                if len(new_bytes[name]) != e - b:
                    raise ConvertError(f"{shard}: replacement for {name} has the wrong size")
                entries.append((new_name, info, ("bytes", new_bytes[name])))
            else:
                entries.append((new_name, info, ("copy", str(src / shard), start + b, e - b)))
            written_map[new_name] = shard
        if shard == target_shard:
            for name, (info, data) in added.items():
                entries.append((name, info, ("bytes", data)))
                written_map[name] = shard
        total += write_safetensors_raw(out / shard, entries, meta)
    if not shards and added:
        entries = [(name, info, ("bytes", data)) for name, (info, data) in added.items()]
        total += write_safetensors_raw(out / "model.safetensors", entries, None)
    if index is not None:
        index["weight_map"] = dict(sorted(written_map.items()))
        if isinstance(index.get("metadata"), dict) and "total_size" in index["metadata"]:
            index["metadata"]["total_size"] = total
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")


__all__ = ["Change", "ConvertError", "ConvertResult", "fix_draft", "read_safetensors_header", "write_safetensors_raw"]
