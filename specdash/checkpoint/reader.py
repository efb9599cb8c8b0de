"""Read a model directory without loading weights: ``config.json`` + safetensors headers.

A draft (EAGLE3 head) or target directory is inspected through its ``config.json``
(including nested ``eagle_config`` and speculators-style ``speculators_config`` /
``transformer_layer_config``) and the *headers* of its safetensors files (names,
shapes, dtypes; sharded checkpoints through ``model.safetensors.index.json``).  Only
small tensors the rules need (``d2t``, ``t2d``) are ever read, on demand.

``sim:NAME`` paths resolve to the simulator's virtual models
(:mod:`specdash.checkpoint.virtual`), so demo profiles can be checked like real ones.

Where the config keys are read follows SGLang (FACTS.md §7–§8): the target side reads
aux layer ids only from ``eagle_config.eagle_aux_hidden_state_layer_ids``; the draft's
``fc`` input width is ``(target_hidden_size or hidden_size) × num_aux`` with num_aux
from ``num_aux_hidden_states``, then ``len(eagle_config ids)``, then 3.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specdash.checkpoint.layout import EAGLE3_ARCHS


class CheckpointError(Exception):
    """A model directory cannot be read at all (missing, no config.json, bad JSON)."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a checkpoint: ``shape`` in elements, ``dtype`` as safetensors names it
    (``BF16``, ``F32``, ``I64``, ``BOOL`` …), ``file`` the shard it is in."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    file: str | None = None


def _find_key(obj: Any, key: str, path: str = "") -> list[tuple[str, Any]]:
    """All (dotted location, value) pairs of ``key`` anywhere in a nested dict."""
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            loc = f"{path}.{k}" if path else k
            if k == key:
                out.append((loc, v))
            out.extend(_find_key(v, key, loc))
    return out


@dataclass
class ModelDir:
    """A model directory as read from disk (or a virtual ``sim:`` model).

    ``config``: parsed ``config.json``; ``tensors``: name → :class:`TensorInfo`;
    ``notes``: things that could not be read (e.g. ``*.bin`` files, unreadable shards).
    """

    path: str
    config: dict
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    virtual: bool = False
    notes: list[str] = field(default_factory=list)
    _values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    # -- config accessors (look in nested LLM configs too) --
    def cfg(self, key: str, default=None):
        """``config[key]``, else the same key in ``text_config`` / ``transformer_layer_config``."""
        if key in self.config:
            return self.config[key]
        for sub in ("text_config", "transformer_layer_config", "language_config", "llm_config"):
            inner = self.config.get(sub)
            if isinstance(inner, dict) and key in inner:
                return inner[key]
        return default

    @property
    def architectures(self) -> list[str]:
        """``architectures`` from config.json (empty list when absent)."""
        return list(self.config.get("architectures") or [])

    @property
    def hidden_size(self) -> int | None:
        """Hidden size (``hidden_size``)."""
        return self.cfg("hidden_size")

    @property
    def num_hidden_layers(self) -> int | None:
        """Decoder layers (``num_hidden_layers``)."""
        return self.cfg("num_hidden_layers")

    @property
    def vocab_size(self) -> int | None:
        """Vocabulary size (``vocab_size``)."""
        return self.cfg("vocab_size")

    @property
    def max_position_embeddings(self) -> int | None:
        """``max_position_embeddings`` (the length the model was built/trained for)."""
        return self.cfg("max_position_embeddings")

    @property
    def torch_dtype(self) -> str | None:
        """``torch_dtype`` / ``dtype`` from config.json."""
        return self.cfg("torch_dtype") or self.cfg("dtype")

    def weight_bytes(self) -> int | None:
        """Total bytes of all tensors from the headers (None when no tensor is known)."""
        if not self.tensors:
            return None
        sizes = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                 "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
        return sum(int(np.prod(t.shape, dtype=np.int64)) * sizes.get(t.dtype, 2) for t in self.tensors.values())

    def load_tensor(self, name: str) -> np.ndarray:
        """Read one (small) tensor's values: ``d2t``, ``t2d`` (numpy; BF16 is not supported).

        Raises:
            KeyError: no such tensor.  CheckpointError: the file cannot be read.
        """
        if name in self._values:
            return self._values[name]
        info = self.tensors[name]
        if self.virtual or info.file is None:
            raise CheckpointError(f"{self.path}: tensor {name} has no stored values")
        from safetensors import safe_open

        try:
            with safe_open(str(Path(self.path) / info.file), framework="numpy") as fh:
                arr = fh.get_tensor(name)
        except Exception as exc:  # safetensors raises its own error types
            raise CheckpointError(f"{self.path}/{info.file}: cannot read tensor {name}: {exc}") from None
        self._values[name] = arr
        return arr


@dataclass
class DraftInfo:
    """A draft directory interpreted as an EAGLE/EAGLE3 head (FACTS.md §7–§8).

    ``aux_layer_ids``: every place aux ids were found → the ids
    (``eagle_config`` is the one the target side reads; ``top_level`` is NOT read there).
    """

    model: ModelDir
    draft_vocab_size: int | None
    target_hidden_size: int | None
    num_aux_declared: int | None
    aux_layer_ids: dict[str, list[int]]
    eagle_config: dict | None

    @property
    def path(self) -> str:
        """The draft directory."""
        return self.model.path

    @property
    def fc_in_features(self) -> int | None:
        """Columns of ``fc.weight`` ([out, in] layout), None when absent."""
        fc = self.model.tensors.get("fc.weight")
        return fc.shape[1] if fc is not None and len(fc.shape) == 2 else None

    @property
    def hidden_in(self) -> int | None:
        """The target hidden size the head was built for (``target_hidden_size`` or ``hidden_size``)."""
        return self.target_hidden_size or self.model.hidden_size

    @property
    def num_aux(self) -> int:
        """The aux-state count SGLang's ``fc`` is built with: ``num_aux_hidden_states``,
        else ``len(eagle_config ids)``, else 3 (``llama_eagle3.py``; FACTS.md §7)."""
        if self.num_aux_declared:
            return int(self.num_aux_declared)
        ids = self.aux_layer_ids.get("eagle_config")
        return len(ids) if ids else 3

    @property
    def declares_eagle3(self) -> bool:
        """True when the architecture names an EAGLE3 head."""
        return any(a in EAGLE3_ARCHS for a in self.model.architectures) or "speculators_config" in self.model.config

    @property
    def fc_multiple(self) -> float | None:
        """``fc`` in-features ÷ hidden size: 3.0 for an EAGLE3 head, 2.0 for EAGLE-2."""
        if self.fc_in_features and self.hidden_in:
            return self.fc_in_features / self.hidden_in
        return None

    @property
    def is_eagle3(self) -> bool:
        """An EAGLE3 head: EAGLE3 architecture, or ``fc`` in-features ≥ 3 × hidden."""
        return self.declares_eagle3 or (self.fc_multiple is not None and self.fc_multiple >= 3)


def _read_safetensors_headers(root: Path, notes: list[str]) -> dict[str, TensorInfo]:
    from safetensors import safe_open

    tensors: dict[str, TensorInfo] = {}
    index = root / "model.safetensors.index.json"
    files: list[str]
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError) as exc:
            notes.append(f"{index.name}: unreadable index ({exc})")
            weight_map = {}
        files = sorted(set(weight_map.values())) or sorted(p.name for p in root.glob("*.safetensors"))
        for shard in files:
            if not (root / shard).is_file():
                notes.append(f"{index.name} names shard {shard}, which is missing")
    else:
        files = sorted(p.name for p in root.glob("*.safetensors"))
    for fname in files:
        fpath = root / fname
        if not fpath.is_file():
            continue
        try:
            with safe_open(str(fpath), framework="numpy") as fh:
                for key in fh.keys():  # noqa: SIM118 - safe_open is not a dict
                    sl = fh.get_slice(key)
                    tensors[key] = TensorInfo(key, tuple(int(x) for x in sl.get_shape()), str(sl.get_dtype()), fname)
        except Exception as exc:
            notes.append(f"{fname}: cannot read safetensors header ({exc})")
    for p in sorted(root.glob("*.bin")) + sorted(root.glob("*.pt")):
        notes.append(f"{p.name}: pickle checkpoint; tensor names not read (convert to safetensors)")
    return tensors


def read_model_dir(path: str | Path) -> ModelDir:
    """Read ``config.json`` and all safetensors headers of a model directory.

    ``sim:NAME`` returns the simulator's virtual model of that name.

    Raises:
        CheckpointError: the directory or its config.json is missing or not JSON.
    """
    spath = str(path)
    if spath.startswith("sim:"):
        from specdash.checkpoint.virtual import virtual_model

        try:
            return virtual_model(spath[4:])
        except KeyError as exc:
            raise CheckpointError(str(exc.args[0])) from None
    root = Path(spath).expanduser()
    if not root.is_dir():
        raise CheckpointError(f"{root}: no such model directory")
    cfg_path = root / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{root}: no config.json (is this a Hugging Face model directory?)")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{cfg_path}: not valid JSON: {exc}") from None
    notes: list[str] = []
    tensors = _read_safetensors_headers(root, notes)
    return ModelDir(str(root), config, tensors, virtual=False, notes=notes)


def interpret_draft(model: ModelDir) -> DraftInfo:
    """Interpret a model directory as an EAGLE/EAGLE3 draft head."""
    cfg = model.config
    eagle_cfg = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else None
    ids: dict[str, list[int]] = {}
    for loc, val in _find_key(cfg, "eagle_aux_hidden_state_layer_ids"):
        if isinstance(val, list):
            where = "eagle_config" if loc == "eagle_config.eagle_aux_hidden_state_layer_ids" else (
                "top_level" if loc == "eagle_aux_hidden_state_layer_ids" else loc
            )
            ids[where] = [int(x) for x in val]
    for loc, val in _find_key(cfg, "aux_hidden_state_layer_ids"):
        if isinstance(val, list) and loc not in ids:
            ids[loc] = [int(x) for x in val]
    dvs = [v for _, v in _find_key(cfg, "draft_vocab_size")]
    ths = [v for _, v in _find_key(cfg, "target_hidden_size")]
    nas = [v for _, v in _find_key(cfg, "num_aux_hidden_states")]
    return DraftInfo(
        model=model,
        draft_vocab_size=dvs[0] if dvs else None,
        target_hidden_size=ths[0] if ths else None,
        num_aux_declared=nas[0] if nas else None,
        aux_layer_ids=ids,
        eagle_config=eagle_cfg,
    )


def read_draft(path: str | Path) -> DraftInfo:
    """:func:`read_model_dir` + :func:`interpret_draft`.

    Raises:
        CheckpointError: unreadable directory or config.
    """
    return interpret_draft(read_model_dir(path))


def read_target(path: str | Path) -> ModelDir:
    """Read a target model directory (config + headers).

    Raises:
        CheckpointError: unreadable directory or config.
    """
    return read_model_dir(path)


def peek_config(path: str | None) -> dict | None:
    """config.json of ``path`` (or the virtual model), or None — never raises."""
    if not path:
        return None
    try:
        if str(path).startswith("sim:"):
            return read_model_dir(path).config
        cfg = Path(str(path)).expanduser() / "config.json"
        return json.loads(cfg.read_text(encoding="utf-8")) if cfg.is_file() else None
    except (CheckpointError, OSError, ValueError):
        return None


def peek_architectures(path: str | None) -> list[str] | None:
    """``architectures`` of a model directory, or None when unreadable (never raises)."""
    cfg = peek_config(path)
    return list(cfg.get("architectures") or []) if cfg else None


def peek_vocab(path: str | None, key: str) -> int | None:
    """An integer config key (``vocab_size``, ``draft_vocab_size``) or None (never raises)."""
    cfg = peek_config(path)
    if not cfg:
        return None
    vals = [v for _, v in _find_key(cfg, key) if isinstance(v, int)]
    return vals[0] if vals else None
