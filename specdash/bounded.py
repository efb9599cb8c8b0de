"""Outside input, bounded: every read of a file or an HTTP body that specdash did not write itself
has a size cap and (over the network) a total deadline, every JSON value a depth limit, and every
number a user types a range — each with the limit and the fix in its error message.

This is the ground floor of the package (standard library only at import; ``orjson`` and ``httpx``
are imported by the functions that need them), so that the SGLang client, the profile and dataset
readers, the run-directory readers and the exporters all go through the same few helpers:

* :func:`read_bytes` / :func:`read_text` — a regular file, at most ``limit`` bytes.  A FIFO, a
  character device (``/dev/zero``), a socket or a directory is refused before a byte is read (the
  file is opened with ``O_NONBLOCK``, so a FIFO without a writer does not block the open), and a
  file larger than the cap is refused from its ``stat`` size, before it is read.
* :func:`iter_lines` — the lines of a regular file one at a time, each at most ``line_limit``
  bytes (JSON Lines files: memory is one line's, however long the file).
* :func:`loads_json` — JSON text → a value, or :class:`InputError`: bad JSON, nesting deeper than
  :data:`JSON_MAX_DEPTH` (Python's ``json`` raises ``RecursionError`` past ~1,000 levels; orjson
  refuses past 1,024 — either way the reader's own error, never a traceback), ``NaN`` accepted as
  :func:`json.loads` reads it.
* :func:`fetch` — one HTTP request through an ``httpx.AsyncClient`` whose whole answer (connect,
  headers and body) must arrive within ``deadline_s`` seconds — a *total* deadline, not httpx's
  per-read timeout, so a peer that sends a byte a second cannot hold the caller — and whose body
  may not exceed ``limit`` bytes (read in chunks and stopped at the cap: a 1.5 GB body costs at
  most ``limit`` bytes of memory).
* :func:`bounded_int` / :func:`bounded_float` — a number in ``[lo, hi]``, or :class:`InputError`
  naming the input, the range and why (:data:`MAX_CONCURRENCY` and the others below).

Errors are :class:`InputError` (a ``ValueError``), with subclasses for the kind of refusal; the
message starts with what was read (``what``), so callers can show it as it is.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from typing import Any

MiB = 1 << 20

# --- size caps (bytes) ----------------------------------------------------------------------------
#: A profile, a suite or another TOML file of the user's (the largest preset is a few KiB).
TOML_BYTES = 4 * MiB
#: A suite's ``prompts_file`` (JSON Lines of prompts).
PROMPTS_FILE_BYTES = 256 * MiB
#: A ``--dataset`` file (ShareGPT V3's unfiltered JSON is ~0.65 GB).
DATASET_BYTES = 2048 * MiB
#: ``chat_template.jinja`` (real templates are a few KiB; the largest seen are ~20 KiB).
CHAT_TEMPLATE_BYTES = 1 * MiB
#: ``tokenizer_config.json`` / ``config.json`` of a model directory (added-token tables reach a few MiB).
MODEL_JSON_BYTES = 32 * MiB
#: A prompt rendered by a chat template (a template that loops can render gigabytes).
RENDERED_PROMPT_CHARS = 16 * MiB
#: ``manifest.json``, ``summary.json``, ``comparison.json``, ``sweep.json`` and other run files.
RUN_FILE_BYTES = 256 * MiB
#: One line of ``requests.jsonl`` (a record of 100,000 tokens' ITLs is ~1 MB).
RECORD_LINE_BYTES = 64 * MiB
#: ``/metrics`` of an SGLang server (per-rank histograms of a 64-rank server are a few MiB).
METRICS_BYTES = 64 * MiB
#: ``/server_info``, ``/model_info`` and other small JSON answers of a server.
SERVER_JSON_BYTES = 16 * MiB
#: One GPU exporter's ``/metrics`` (dcgm-exporter with all counters on 8 GPUs is ~100 KiB).
EXPORTER_BYTES = 16 * MiB
#: Nesting depth of any JSON specdash reads (its own files nest ≤ 8 levels; SGLang's answers ≤ 6).
JSON_MAX_DEPTH = 64

# --- numeric ranges of what users type ---------------------------------------------------------------
#: Requests in flight (``--concurrency``, ``--sweep concurrency=…``, a suite's ``concurrency``): SGLang's
#: own default ``max_running_requests`` tops out at 4,096 (``scheduler.py``: ``max_total_num_tokens // 2``
#: capped by the request pool), so more waits in its queue and measures nothing new.
MAX_CONCURRENCY = 4096
#: Requests per second of an open-loop run (``--request-rate``, ``--sweep request_rate=…``).
MAX_REQUEST_RATE = 1000.0
#: The lowest request rate: below it a five-prompt suite takes more than eight minutes to send.
MIN_REQUEST_RATE = 0.01
#: Gamma shape of the arrivals (``--burstiness``): outside it the gaps are all ~0 or all equal anyway.
MIN_BURSTINESS, MAX_BURSTINESS = 0.01, 1000.0
#: ``max_tokens`` of a request (SGLang's longest context lengths are ~10 M tokens).
MAX_TOKENS = 16_777_216
#: Repeats of a suite (``--repeats``, ``repeats``) and requests of one run (prompts × repeats).
MAX_REPEATS = 100_000
MAX_RUN_REQUESTS = 1_000_000
#: Prompts of a dataset sample (``--num-prompts``) and tokens of one ``random:`` prompt (``in=``).
MAX_PROMPTS = 1_000_000
MAX_RANDOM_INPUT_TOKENS = 1_048_576
#: All ``random:`` input tokens of a run (in × prompts): the text is made in memory, ~3.6 bytes a token.
MAX_RANDOM_TOTAL_TOKENS = 64 * MiB
#: Warm-up requests of a suite.
MAX_WARMUP = 10_000
#: A/B launch rounds (``--rounds``) and a tune's exploration launches (``--budget``).
MAX_ROUNDS = 100
MAX_BUDGET = 1000
#: Seeds (``--seed``): numpy's and Python's generators take any, results files keep 64 bits.
MAX_SEED = 2**64 - 1
#: Seconds (``--max-time``, SLO milliseconds are checked against ``MAX_SECONDS × 1000``): a week.
MAX_SECONDS = 7 * 24 * 3600.0


class InputError(ValueError):
    """Outside input that specdash refuses: the message says what, where, the limit and the fix."""


class TooLarge(InputError):
    """A file, a line or a body over its size cap."""


class TooSlow(InputError):
    """A peer that did not answer in full within the total deadline."""


class NotARegularFile(InputError):
    """A path that is a FIFO, a device, a socket or a directory where a file was expected."""


class TooDeep(InputError):
    """JSON nested deeper than :data:`JSON_MAX_DEPTH`."""


def size_text(n: float) -> str:
    """``n`` bytes as ``"1.5 GiB"`` / ``"64 MiB"`` / ``"512 bytes"``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} bytes"


_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))


def _open_regular(path, what: str, limit: int | None) -> int:
    """An fd of ``path`` opened for reading, after checking it is a regular file within ``limit``."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise NotARegularFile(f"{what} {path}: a directory, not a file; give a file") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "special file")
            raise NotARegularFile(f"{what} {path}: a {kind}, not a regular file; specdash reads only regular "
                                  "files here (copy the data to a file first)")
        if limit is not None and st.st_size > limit:
            raise TooLarge(f"{what} {path}: {size_text(st.st_size)}, over the {size_text(limit)} specdash reads "
                           "for it; give a smaller file (or split it)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_file(path, *, limit: int | None = None, what: str = "file") -> int:
    """The size of ``path`` after checking it is a regular file (not a FIFO, device, socket or directory)
    of at most ``limit`` bytes — for readers that open the file themselves (Parquet, tokenizers).

    Raises:
        NotARegularFile / TooLarge / InputError: as :func:`read_bytes`.
    """
    fd = _open_regular(path, what, limit)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_bytes(path, *, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises:
        NotARegularFile: a FIFO, a device, a socket or a directory.
        TooLarge: the file is (or grew while read to) more than ``limit`` bytes.
        InputError: it cannot be opened (missing, no permission).
    """
    fd = _open_regular(path, what, limit)
    try:
        with os.fdopen(fd, "rb", closefd=True) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise TooLarge(f"{what} {path}: more than the {size_text(limit)} specdash reads for it (it grew while "
                       "being read); give a smaller file")
    return data


def read_text(path, *, limit: int, what: str = "file") -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading BOM dropped).

    Raises:
        InputError: as :func:`read_bytes`, or the bytes are not UTF-8 (the offset is named).
    """
    data = read_bytes(path, limit=limit, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
                         "save it as UTF-8") from None


def iter_lines(path, *, line_limit: int, what: str = "file", offset: int = 0,
               total_limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, line)`` of each line of the regular file ``path`` from byte ``offset``, the line
    with its ``\\n`` (the last one maybe without); a line longer than ``line_limit`` bytes is yielded as
    ``b""`` with the offset of its start (the caller counts it as unreadable) and skipped to its end.

    Raises:
        NotARegularFile / TooLarge (``total_limit``) / InputError: as :func:`read_bytes`, at the start.
    """
    fd = _open_regular(path, what, total_limit)
    with os.fdopen(fd, "rb", closefd=True) as fh:
        fh.seek(offset)
        pos = offset
        while True:
            line = fh.readline(line_limit + 1)
            if not line:
                return
            if len(line) > line_limit and not line.endswith(b"\n"):
                start = pos
                pos += len(line)
                while line and not line.endswith(b"\n"):  # skip the rest of the long line
                    line = fh.readline(1 << 20)
                    pos += len(line)
                yield start, b""
                continue
            yield pos, line
            pos += len(line)


def json_depth_error(value: Any, max_depth: int = JSON_MAX_DEPTH) -> int | None:
    """The depth at which ``value`` (parsed JSON) first exceeds ``max_depth`` nested containers, or
    None when it does not (iterative: no recursion limit is reached however deep the value)."""
    if not isinstance(value, (dict, list)):
        return None
    stack = [(value, 1)]
    containers = (dict, list)
    while stack:
        v, d = stack.pop()
        if d > max_depth:
            return d
        items = v.values() if isinstance(v, dict) else v
        stack.extend([(x, d + 1) for x in items if isinstance(x, containers)])
    return None


def loads_json(data: bytes | str, *, what: str, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """JSON text → value (orjson; lines it refuses that :func:`json.loads` reads — ``NaN``, integers past
    64 bits — through the latter).

    Raises:
        TooDeep: nested more than ``max_depth`` levels (arrays and objects).
        InputError: not JSON (the parser's message, with the position).
    """
    import json

    import orjson

    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as first:
        if "recursion" in str(first).lower():
            raise TooDeep(f"{what}: JSON nested deeper than {max_depth} levels; specdash does not read such "
                          "files (is it the right file?)") from None
        try:
            value = json.loads(data)
        except RecursionError:
            raise TooDeep(f"{what}: JSON nested deeper than {max_depth} levels; specdash does not read such "
                          "files (is it the right file?)") from None
        except (ValueError, TypeError) as exc:
            raise InputError(f"{what}: not valid JSON ({exc})") from None
    if json_depth_error(value, max_depth) is not None:
        raise TooDeep(f"{what}: JSON nested deeper than {max_depth} levels; specdash does not read such files "
                      "(is it the right file?)")
    return value


def read_json(path, *, limit: int, what: str = "file", max_depth: int = JSON_MAX_DEPTH) -> Any:
    """:func:`read_bytes` then :func:`loads_json` (the error names ``what`` and ``path``)."""
    return loads_json(read_bytes(path, limit=limit, what=what), what=f"{what} {path}", max_depth=max_depth)


async def fetch(client, method: str, url: str, *, limit: int, deadline_s: float, what: str, **kw):
    """One request through ``client`` (an ``httpx.AsyncClient``) whose complete answer must arrive within
    ``deadline_s`` seconds in all (connect + headers + body) and whose body may not exceed ``limit``
    bytes (decoded; the stream is stopped at the cap).  Returns an ``httpx.Response`` holding the body.

    Raises:
        TooSlow: the deadline passed (however slowly the bytes came).
        TooLarge: the body exceeded ``limit`` (also when ``Content-Length`` says it will).
        httpx.HTTPError: connection and protocol errors, as httpx raises them.
    """
    import asyncio

    import httpx

    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream(method, url, **kw) as r:
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit and not r.headers.get("content-encoding"):
                    raise TooLarge(f"{what}: the answer is {size_text(int(declared))} (Content-Length), over the "
                                   f"{size_text(limit)} specdash reads from it")
                body = bytearray()
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise TooLarge(f"{what}: the answer exceeded the {size_text(limit)} specdash reads from "
                                       "it; stopped reading")
    except TimeoutError:
        raise TooSlow(f"{what}: no complete answer within {deadline_s:g} s (a total deadline: the peer is "
                      "down, overloaded or sending slowly)") from None
    headers = [(k, v) for k, v in r.headers.multi_items() if k.lower() not in ("content-encoding", "content-length",
                                                                                "transfer-encoding")]
    return httpx.Response(r.status_code, headers=headers, content=bytes(body), request=r.request,
                          extensions={"reason_phrase": r.reason_phrase.encode("ascii", "replace")})


def _num_text(n) -> str:
    """``1000000`` → ``1,000,000``; ``0.01`` → ``0.01``; ``1e300`` → ``1e+300``."""
    if isinstance(n, int) or (isinstance(n, float) and n.is_integer() and abs(n) < 1e15):
        return f"{int(n):,}"
    return f"{n:g}"


def _out_of_range(what: str, v, lo, hi, unit: str, why: str, extra: str = "") -> InputError:
    u = f" {unit}" if unit else ""
    shown = f"a {len(str(abs(v)))}-digit number" if isinstance(v, int) and abs(v) >= 10**30 else _num_text(v)
    side = f"at least {_num_text(lo)}{u}" if v < lo else f"at most {_num_text(hi)}{u}"
    return InputError(f"{what} must be {side}{extra} (got {shown})" + (f": {why}" if why and v > hi else ""))


def bounded_int(value, *, lo: int, hi: int, what: str, why: str = "") -> int:
    """``value`` (an int, or text such as ``"16"``) as an int in ``[lo, hi]``.

    Raises:
        InputError: not a whole number, or outside the range (the message gives the range and ``why``).
    """
    if isinstance(value, bool):
        raise InputError(f"{what} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise InputError(f"{what} must be a whole number, got {value!r}")
        value = int(value)
    if isinstance(value, str):
        s = value.strip().replace("_", "")
        if not s.lstrip("+-").isdigit() or len(s) > 40:
            raise InputError(f"{what} must be a whole number, got {value!r}")
        value = int(s)
    if not isinstance(value, int):
        raise InputError(f"{what} must be a whole number, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise _out_of_range(what, value, lo, hi, "", why)
    return value


def bounded_float(value, *, lo: float, hi: float, what: str, unit: str = "", allow_inf: bool = False,
                  why: str = "") -> float:
    """``value`` (a number, or text such as ``"2.5"`` / ``"inf"``) as a finite float in ``[lo, hi]``
    (``inf`` too when ``allow_inf``).

    Raises:
        InputError: not a number, NaN, infinite when not allowed, or outside the range.
    """
    if isinstance(value, bool):
        raise InputError(f"{what} must be a number, got {value!r}")
    try:
        f = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{what} must be a number{f' of {unit}' if unit else ''}, got {value!r}") from None
    if math.isnan(f):
        raise InputError(f"{what} must be a number, got NaN")
    if math.isinf(f) and f > 0 and allow_inf:
        return f
    if not lo <= f <= hi:
        raise _out_of_range(what, f, lo, hi, unit, why, ", or inf for all at once" if allow_inf else "")
    return f


__all__ = [
    "CHAT_TEMPLATE_BYTES",
    "DATASET_BYTES",
    "EXPORTER_BYTES",
    "JSON_MAX_DEPTH",
    "MAX_BUDGET",
    "MAX_BURSTINESS",
    "MAX_CONCURRENCY",
    "MAX_PROMPTS",
    "MAX_RANDOM_INPUT_TOKENS",
    "MAX_RANDOM_TOTAL_TOKENS",
    "MAX_REPEATS",
    "MAX_REQUEST_RATE",
    "MAX_ROUNDS",
    "MAX_RUN_REQUESTS",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_TOKENS",
    "MAX_WARMUP",
    "METRICS_BYTES",
    "MIN_BURSTINESS",
    "MIN_REQUEST_RATE",
    "MODEL_JSON_BYTES",
    "PROMPTS_FILE_BYTES",
    "RECORD_LINE_BYTES",
    "RENDERED_PROMPT_CHARS",
    "RUN_FILE_BYTES",
    "SERVER_JSON_BYTES",
    "TOML_BYTES",
    "InputError",
    "NotARegularFile",
    "TooDeep",
    "TooLarge",
    "TooSlow",
    "bounded_float",
    "bounded_int",
    "check_file",
    "fetch",
    "iter_lines",
    "json_depth_error",
    "loads_json",
    "read_bytes",
    "read_json",
    "read_text",
    "size_text",
]
