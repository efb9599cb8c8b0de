"""Text JSON datasets: JSON Lines (``.jsonl``, ``.ndjson``: one object a line) and JSON lists
(``.json``: ShareGPT's ``[{"conversations": […]}, …]`` or a list of JSONL-style objects; a ``.json``
file holding JSON Lines is read as such).  Rows are mapped to prompts by
:func:`specdash.profile.datasets.rows.row_prompt`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specdash.profile.datasets.rows import _MAX_SHOWN, HINT
from specdash.profile.schema import ProfileError

SUFFIXES = (".jsonl", ".ndjson", ".json")


def read(path: Path) -> tuple[str, Sequence[Any], dict]:
    """``(format, rows, extra record fields)`` of a JSON or JSON Lines file; ``format`` is ``jsonl``,
    ``sharegpt`` or ``json``.

    Raises:
        ProfileError: unreadable, not UTF-8, empty, not valid JSON (the line number for JSON Lines),
            or a JSON value that is not a list.
    """
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ProfileError(f"dataset {path}: not UTF-8 text; {HINT}") from None
    except OSError as exc:
        raise ProfileError(f"dataset {path}: cannot read: {exc.strerror}") from None
    head = text.lstrip()[:1]
    if not head:
        raise ProfileError(f"dataset {path}: the file is empty; {HINT}")
    if suffix in (".jsonl", ".ndjson") or (suffix != ".json" and head == "{"):
        return "jsonl", parse_lines(path, text), {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        if head == "{" and "Extra data" in str(exc):  # a .json file holding JSON Lines
            return "jsonl", parse_lines(path, text), {}
        raise ProfileError(f"dataset {path}: not valid JSON ({exc}); {HINT}") from None
    if not isinstance(data, list):
        keys = f" with keys {', '.join(list(data)[:_MAX_SHOWN])}" if isinstance(data, dict) else ""
        raise ProfileError(f"dataset {path}: the JSON is a {type(data).__name__}{keys}, not a list of "
                           f"conversations or prompt objects; {HINT}")
    fmt = "sharegpt" if data and isinstance(data[0], dict) and "conversations" in data[0] else "json"
    return fmt, data, {}


def parse_lines(path: Path, text: str) -> list[Any]:
    """The objects of a JSON Lines text (blank lines skipped).

    Raises:
        ProfileError: a line that is not JSON (``path:line`` named).
    """
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise ProfileError(f"dataset {path}:{n}: not a JSON object ({exc}); each line of a JSONL dataset is "
                               "one object such as {\"prompt\": \"…\", \"category\": \"coding\"}") from None
    return rows
