"""Parquet datasets (``.parquet``): the columns :func:`~specdash.profile.datasets.rows.row_prompt` reads
(``prompt``, ``text``, ``messages``, ``conversations``, ``turns``) plus ``category``, ``id`` and
``question_id``, through ``pyarrow`` (imported here only; the ``[datasets]`` extra installs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specdash.profile.datasets.rows import HINT, PROMPT_KEYS
from specdash.profile.schema import ProfileError

SUFFIXES = (".parquet", ".pq")


def read(path: Path) -> tuple[str, list[dict[str, Any]], dict]:
    """``("parquet", rows, {})`` of a Parquet file (only the columns used are read).

    Raises:
        ProfileError: pyarrow is not installed (how to install it), the file is not a regular file of at
            most :data:`specdash.bounded.DATASET_BYTES`, not Parquet, or it has no prompt column (the columns
            it has are listed).
    """
    from specdash.bounded import DATASET_BYTES, InputError, check_file

    try:
        check_file(path, limit=DATASET_BYTES, what="dataset")
    except InputError as exc:
        raise ProfileError(f"{exc}; {HINT}") from None
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ProfileError(f"dataset {path}: reading Parquet needs pyarrow, which is not installed: "
                           "pip install pyarrow (or pip install 'specdash[datasets]', or convert the file to "
                           "JSONL)") from None
    try:
        names = pq.read_schema(path).names
        wanted = [c for c in (*PROMPT_KEYS, "category", "id", "question_id") if c in names]
        if not any(c in names for c in PROMPT_KEYS):
            raise ProfileError(f"dataset {path}: no column named {', '.join(PROMPT_KEYS)} (columns: "
                               f"{', '.join(names[:12])}); {HINT}")
        return "parquet", pq.read_table(path, columns=wanted).to_pylist(), {}
    except ProfileError:
        raise
    except Exception as exc:  # pyarrow's errors (ArrowInvalid, OSError) for a file that is not Parquet
        raise ProfileError(f"dataset {path}: not a readable Parquet file ({exc})") from None
