"""A local Hugging Face dataset directory (written by ``Dataset.save_to_disk``), read with
``datasets.load_from_disk``: the ``train`` split of a ``DatasetDict`` (else its first).  ``datasets`` is
imported here only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specdash.profile.datasets.rows import HINT, PROMPT_KEYS
from specdash.profile.schema import ProfileError

MARKS = ("dataset_info.json", "state.json", "dataset_dict.json")
"""Files one of which ``save_to_disk`` leaves in the directory."""


def read(path: Path) -> tuple[str, Sequence[Any], dict]:
    """``("hf-dir", rows, {"split", "splits"})`` of a ``save_to_disk`` directory.

    Raises:
        ProfileError: not such a directory, ``datasets`` not installed, ``load_from_disk`` fails, or no
            prompt column.
    """
    if not any((path / m).is_file() for m in MARKS):
        raise ProfileError(f"dataset {path}: a directory, but not a Hugging Face dataset saved with "
                           f"save_to_disk (none of {', '.join(MARKS)} there); give the dataset's directory, "
                           "or a ShareGPT JSON / JSONL / Parquet file")
    try:
        import datasets
    except ImportError:
        raise ProfileError(f"dataset {path}: reading a Hugging Face dataset directory needs the datasets "
                           "library, which is not installed: pip install datasets (or export it to JSONL "
                           "with Dataset.to_json)") from None
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as exc:  # the library's own errors for a damaged or foreign directory
        raise ProfileError(f"dataset {path}: datasets.load_from_disk failed: {exc}") from None
    extra: dict = {}
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        if not splits:
            raise ProfileError(f"dataset {path}: the DatasetDict has no split")
        split = "train" if "train" in splits else splits[0]
        ds, extra = ds[split], {"split": split, "splits": splits}
    cols = list(getattr(ds, "column_names", []) or [])
    if not any(c in cols for c in PROMPT_KEYS):
        raise ProfileError(f"dataset {path}: no column named {', '.join(PROMPT_KEYS)} (columns: "
                           f"{', '.join(cols[:12])}); {HINT}")
    return "hf-dir", ds, extra
