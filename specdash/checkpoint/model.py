"""What a model directory is once read: :class:`ModelDir` (``config.json`` + tensor list) and :class:`TensorInfo`.

The shapes both makers fill: :mod:`specdash.checkpoint.reader` from a directory on disk,
:mod:`specdash.checkpoint.virtual` from the simulator's ``sim:NAME`` models as plain data.  Below
both, so that the reader can hand ``sim:`` paths to the virtual models without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


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
