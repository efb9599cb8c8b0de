"""Text JSON datasets: JSON Lines (``.jsonl``, ``.ndjson``: one object a line) and JSON lists
(``.json``: ShareGPT's ``[{"conversations": […]}, …]`` or a list of JSONL-style objects; a ``.json``
file holding JSON Lines is read as such).  Rows are mapped to prompts by
:func:`specdash.profile.datasets.rows.row_prompt`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specdash.profile.datasets.rows import _MAX_SHOWN, HINT
from specdash.profile.schema import ProfileError

SUFFIXES = (".jsonl", ".ndjson", ".json")


def read(path: Path) -> tuple[str, Sequence[Any], dict]:
    """``(format, rows, extra record fields)`` of a JSON or JSON Lines file; ``format`` is ``jsonl``,
    ``sharegpt`` or ``json``.  The file must be a regular file (a FIFO or ``/dev/zero`` is refused before
    a byte is read) of at most :data:`specdash.bounded.DATASET_BYTES`; JSON Lines are read a line at a
    time; values nested deeper than :data:`specdash.bounded.JSON_MAX_DEPTH` are refused.

    Raises:
        ProfileError: unreadable, not a regular file, too large, not UTF-8, empty, not valid JSON (the line
            number for JSON Lines), or a JSON value that is not a list.
    """
    from specdash.bounded import DATASET_BYTES, InputError, read_bytes

    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            return "jsonl", parse_lines(path), {}
        raw = read_bytes(path, limit=DATASET_BYTES, what="dataset")
    except InputError as exc:
        raise ProfileError(f"{exc}; {HINT}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ProfileError(f"dataset {path}: not UTF-8 text; {HINT}") from None
    del raw
    head = text.lstrip()[:1]
    if not head:
        raise ProfileError(f"dataset {path}: the file is empty; {HINT}")
    if suffix != ".json" and head == "{":
        return "jsonl", parse_lines(path), {}
    data = _loads(text, path)
    if isinstance(data, _ExtraData):  # a .json file holding JSON Lines
        return "jsonl", parse_lines(path), {}
    if not isinstance(data, list):
        keys = f" with keys {', '.join(map(str, list(data)[:_MAX_SHOWN]))}" if isinstance(data, dict) else ""
        raise ProfileError(f"dataset {path}: the JSON is a {type(data).__name__}{keys}, not a list of "
                           f"conversations or prompt objects; {HINT}")
    fmt = "sharegpt" if data and isinstance(data[0], dict) and "conversations" in data[0] else "json"
    return fmt, data, {}


class _ExtraData:
    """:func:`_loads`' answer for JSON followed by more JSON (JSON Lines in a ``.json`` file)."""


def _loads(text: str, path: Path) -> Any:
    from specdash.bounded import InputError, loads_json

    try:
        return loads_json(text, what=f"dataset {path}")
    except InputError as exc:
        if text.lstrip()[:1] == "{" and ("Extra data" in str(exc) or "trailing" in str(exc).lower()):
            return _ExtraData()
        raise ProfileError(f"{exc}; {HINT}") from None


def parse_lines(path: Path) -> list[Any]:
    """The objects of a JSON Lines file, read a line at a time (blank lines skipped; each line at most
    :data:`specdash.bounded.RECORD_LINE_BYTES`, nested at most :data:`specdash.bounded.JSON_MAX_DEPTH`).

    Raises:
        ProfileError: a line that is not JSON or too long (``path:line`` named), a file that is not a regular
            file or too large, or no row at all.
    """
    from specdash.bounded import (
        DATASET_BYTES,
        RECORD_LINE_BYTES,
        InputError,
        iter_lines,
        loads_json,
        size_text,
    )

    rows = []
    try:
        for n, (_, line) in enumerate(iter_lines(path, line_limit=RECORD_LINE_BYTES, what="dataset",
                                                 total_limit=DATASET_BYTES), 1):
            if line == b"":
                raise ProfileError(f"dataset {path}:{n}: a line longer than {size_text(RECORD_LINE_BYTES)}; each "
                                   "line of a JSONL dataset is one prompt object")
            if n == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.strip():
                continue
            try:
                rows.append(loads_json(line, what=f"dataset {path}:{n}"))
            except InputError as exc:
                why = str(exc).removeprefix(f"dataset {path}:{n}: ")
                raise ProfileError(f"dataset {path}:{n}: not a JSON object ({why}); each line of a JSONL dataset "
                                   "is one object such as {\"prompt\": \"…\", \"category\": \"coding\"}") from None
    except InputError as exc:
        raise ProfileError(f"{exc}; {HINT}") from None
    if not rows:
        raise ProfileError(f"dataset {path}: the file is empty; {HINT}")
    return rows
