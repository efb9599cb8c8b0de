"""Read a model directory without loading weights: ``config.json`` + safetensors headers.

A draft (EAGLE3 head) or target directory is inspected through its ``config.json``
(including nested ``eagle_config`` and speculators-style ``speculators_config`` /
``transformer_layer_config``) and the *headers* of its safetensors files (names,
shapes, dtypes; sharded checkpoints through ``model.safetensors.index.json``).  Only
small tensors the rules need (``d2t``, ``t2d``) are ever read, on demand.

``sim:NAME`` paths resolve to the simulator's virtual models
(:mod:`specdash.checkpoint.virtual`), so demo profiles can be checked like real ones.

Where the config keys are read follows SGLang 0.5.23: the target side reads aux layer ids
only from ``eagle_config.eagle_aux_hidden_state_layer_ids``
(``model_runner_components/spec_aux_hidden_state.py`` ``_resolve_eagle_aux_hidden_state``);
the draft's ``fc`` input width is ``(target_hidden_size or hidden_size) × num_aux`` with
num_aux from ``num_aux_hidden_states``, then ``len(eagle_config ids)``, then 3
(``srt/models/llama_eagle3.py``).

What a draft *is* is classified here, once, for the doctor, post-launch verification,
``specdash draft fix`` and the simulator: :attr:`DraftInfo.head_kind` (:data:`HEAD_KINDS`)
and the form of its ``d2t`` table, :func:`classify_d2t` / :meth:`DraftInfo.d2t_form`
(:data:`D2T_FORMS`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specdash.checkpoint.layout import EAGLE2_ARCHS, EAGLE3_ARCHS
from specdash.checkpoint.model import CheckpointError, ModelDir, TensorInfo

#: What :attr:`DraftInfo.head_kind` returns.
HEAD_KINDS = ("eagle3", "eagle2", "lm", "unknown")
#: What :func:`classify_d2t` and :meth:`DraftInfo.d2t_form` return.
D2T_FORMS = ("absent", "unreadable", "offsets", "absolute", "ambiguous", "invalid")


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
class DraftInfo:
    """A draft directory interpreted as an EAGLE/EAGLE3 head (SGLang 0.5.23 ``llama_eagle3.py``).

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
        else ``len(eagle_config ids)``, else 3 (``llama_eagle3.py`` ``LlamaModel.__init__``)."""
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

    @property
    def head_kind(self) -> str:
        """What the directory is as a draft, one of :data:`HEAD_KINDS`.

        ``"eagle3"``: :attr:`is_eagle3`.  ``"eagle2"``: an EAGLE-2 architecture
        (:data:`~specdash.checkpoint.layout.EAGLE2_ARCHS`) or ``fc`` in-features = 2 × hidden
        (SGLang's ``llama_eagle.py``: fc over concat(embeds, hidden)).  ``"lm"``: a full model
        (an architecture ending in ``ForCausalLM`` / ``ForConditionalGeneration``), what
        ``--speculative-algorithm STANDALONE`` serves.  ``"unknown"``: none of these.  The one
        classifier the doctor, post-launch verification and the simulator use.
        """
        archs = self.model.architectures
        if self.is_eagle3:
            return "eagle3"
        if any(a in EAGLE2_ARCHS for a in archs) or (self.fc_multiple is not None and abs(self.fc_multiple - 2) < 1e-6):
            return "eagle2"
        if any(a.endswith(("ForCausalLM", "ForConditionalGeneration")) for a in archs):
            return "lm"
        return "unknown"

    def d2t_form(self, target_vocab: int | None = None) -> str:
        """The form of the checkpoint's ``d2t`` table, one of :data:`D2T_FORMS`.

        ``"absent"``: no ``d2t`` tensor; ``"unreadable"``: its values cannot be read; else
        :func:`classify_d2t` of ``d2t`` and ``t2d`` (None when absent or unreadable) against
        ``target_vocab`` (default: this config's ``vocab_size``, which must equal the target's).
        """
        m = self.model
        if "d2t" not in m.tensors:
            return "absent"
        try:
            d2t = np.asarray(m.load_tensor("d2t"))
        except (CheckpointError, KeyError, ValueError, TypeError):
            return "unreadable"
        t2d = None
        if "t2d" in m.tensors:
            try:
                t2d = np.asarray(m.load_tensor("t2d"))
            except (CheckpointError, KeyError, ValueError, TypeError):
                t2d = None
        vocab = target_vocab if target_vocab else m.vocab_size
        return classify_d2t(d2t, t2d, int(vocab) if vocab else None)


def d2t_targets(d2t: np.ndarray) -> np.ndarray:
    """The target ids SGLang maps draft ids to: ``d2t + arange(len(d2t))`` (int64, shape ``[n]``).

    SGLang's ``srt/models/llama_eagle3.py`` ``load_weights``: ``hot_token_id = d2t +
    arange(d2t.shape[0])`` whenever the checkpoint has a ``d2t`` tensor, and drafting uses
    ``topk_index = hot_token_id[topk_index]``: target id = draft id + ``d2t[draft id]``.
    """
    d = np.asarray(d2t).astype(np.int64).reshape(-1)
    return d + np.arange(len(d), dtype=np.int64)


def _distinct_in_vocab(ids: np.ndarray, vocab: int | None) -> bool:
    return bool(ids.min(initial=0) >= 0 and (vocab is None or ids.max(initial=0) < vocab)
                and len(np.unique(ids)) == len(ids))


def t2d_marks(t2d: np.ndarray, ids: np.ndarray) -> bool:
    """True when the boolean mask ``t2d`` (one entry per target id) marks exactly ``ids``."""
    marked = np.flatnonzero(np.asarray(t2d).astype(bool).reshape(-1))
    ids = np.asarray(ids).reshape(-1)
    return len(marked) == len(ids) and bool(np.array_equal(np.sort(ids), marked))


def classify_d2t(d2t: np.ndarray, t2d: np.ndarray | None = None, target_vocab: int | None = None) -> str:
    """Which form an EAGLE3 ``d2t`` table (shape ``[draft_vocab]``, integers) is in.

    SGLang reads ``d2t`` as offsets, target id = draft id + ``d2t[draft id]``
    (:func:`d2t_targets`); some exporters write the target ids themselves.  A reading is
    *valid* when it gives distinct target ids in ``[0, target_vocab)`` (no upper bound when
    ``target_vocab`` is None).  ``t2d`` (a boolean mask over the target vocabulary, which
    SGLang skips but exporters write from the same id list) decides when both readings are.

    Returns one of :data:`D2T_FORMS` (never ``"absent"``/``"unreadable"``, which
    :meth:`DraftInfo.d2t_form` adds):

    - ``"absolute"``: the values are target ids: only the absolute reading is valid, or both
      are and ``t2d`` marks the values themselves and not the offset targets;
    - ``"invalid"``: the offset reading maps outside the vocabulary or onto one id twice;
    - ``"ambiguous"``: both readings are valid, there is no ``t2d``, and the values are
      strictly increasing: offsets of a sorted hot vocabulary repeat wherever two hot ids are
      adjacent, ids never do, so the table probably holds ids;
    - ``"offsets"``: the offset reading is valid and nothing points at ids.
    """
    d = np.asarray(d2t).astype(np.int64).reshape(-1)
    off = d2t_targets(d)
    valid_off, valid_abs = _distinct_in_vocab(off, target_vocab), _distinct_in_vocab(d, target_vocab)
    if t2d is not None:
        if valid_off and valid_abs and t2d_marks(t2d, d) and not t2d_marks(t2d, off):
            return "absolute"
    if valid_abs and not valid_off:
        return "absolute"
    if not valid_off:
        return "invalid"
    if t2d is None and len(d) > 1 and bool(np.all(np.diff(d) > 0)):
        return "ambiguous"
    return "offsets"


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
    except ValueError as exc:  # UnicodeDecodeError included
        raise CheckpointError(f"{cfg_path}: not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{cfg_path}: a JSON {type(config).__name__}, not an object of model settings "
                              "(Hugging Face config.json is {\"architectures\": [...], \"hidden_size\": ...}); "
                              "restore the file from the checkpoint's source")
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
        out = json.loads(cfg.read_text(encoding="utf-8")) if cfg.is_file() else None
        return out if isinstance(out, dict) else None
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


#: The config keys SGLang reads a model's context length from, in its order of preference
#: (``CONTEXT_LENGTH_KEYS``, ``srt/utils/hf_transformers_utils.py``, 0.5.x).
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")


def derived_context_length(config: dict | None) -> int | None:
    """The context length SGLang derives for a model from its ``config.json`` when ``--context-length``
    is not given (``get_context_length`` in ``srt/utils/hf_transformers_utils.py``, the value
    ``ModelConfig._derive_context_length`` starts from, 0.5.x): the first of :data:`CONTEXT_LENGTH_KEYS`
    present, of the text config for a multimodal model (``text_config``), times the ``rope_scaling``
    ``factor`` — except for ``rope_type = "llama3"`` or when ``original_max_position_embeddings`` is given
    (the length is then already the scaled one); 2048 when no key is there, as SGLang.  None when
    ``config`` is not a dict (no config to read).  Tokens."""
    if not isinstance(config, dict):
        return None
    cfg = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    rope = cfg.get("rope_scaling")
    factor = 1.0
    if isinstance(rope, dict) and rope:
        f = rope.get("factor", 1)
        factor = float(f) if isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f < 1e6 else 1.0
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1.0
    for key in CONTEXT_LENGTH_KEYS:
        v = cfg.get(key)
        if v is not None:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1e12:
                return None
            return int(factor * v)
    return 2048
