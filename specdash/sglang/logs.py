"""SGLang server log lines → typed samples and line kinds.

Format (SGLang's ``utils/common.py::configure_logger`` and
``managers/scheduler_components/metrics_reporter.py`` in 0.5.23)::

    [2026-05-10 12:00:05 DP0 TP1] Decode batch, #running-req: 8, #token: 5120, token usage: 0.03,
        accept len: 3.42, accept rate: 0.61, cuda graph: True, gen throughput (token/s): 1234.56,
        #queue-req: 0

* the time is ``%Y-%m-%d %H:%M:%S`` (``.mmm`` appended with ``SGLANG_LOG_MS=1``);
* the prefix parts are `` DP{n}``, `` PP{n}``, `` ATTN_CP{n}``, `` MOE_DP{n}``, `` TP{n}``
  (only when tp > 1), `` EP{n}``;
* ``Decode batch [iter],`` with ``SGLANG_LOG_FORWARD_ITERS=1``; hybrid models log
  ``#full token``/``full token usage``/``#swa token``/``swa token usage`` or
  ``mamba num``/``mamba usage`` instead of ``#token``/``token usage``; ``cuda graph`` may
  read ``cpu graph``/``npu graph``/``musa graph``; PD-decode and MFU add fields.

Fields are read generically (``key: value`` parts split on ``", "``), so fields a
version adds land in ``extra`` instead of breaking the parser.  Checked against the ``server.log``
of real SGLang 0.5.14 runs on an H200.
"""

from __future__ import annotations

import collections
import enum
import itertools
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

__all__ = [
    "DecodeSample",
    "LineKind",
    "LogEntry",
    "LogRing",
    "PrefillSample",
    "classify_line",
    "parse_line",
    "split_prefix",
]

# "[2026-11-29 13:47:09.123 DP0 TP1] message"; anything before the bracket is allowed
# (e.g. Ray's "(SGLangEngine pid=35555) ").
_PREFIX_RE = re.compile(
    r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?((?: [A-Z][A-Z_]*\d+)*)\] ?"
)
_PART_RE = re.compile(r"([A-Z][A-Z_]*?)(\d+)")
_BATCH_RE = re.compile(r"(Decode|Prefill) batch(?: \[([^\]]*)\])?[,.] ?")
_UNIT_RE = re.compile(r"\s*\([^)]*\)\s*$")
_KEY_RE = re.compile(r"[^0-9a-z]+")
_GRAPH_KINDS = ("cuda", "cpu", "npu", "musa", "xpu", "hpu")


def split_prefix(line: str) -> tuple[datetime | None, dict[str, int], str]:
    """Split ``[time prefix] message`` → ``(timestamp, {"DP": 0, "TP": 1, …}, message)``.

    Lines without SGLang's prefix (tracebacks, warnings printed by Python, tqdm bars)
    give ``(None, {}, line)``.  Milliseconds (``SGLANG_LOG_MS=1``) become microseconds
    of the datetime; the timestamp is naive local time as SGLang prints it.
    """
    m = _PREFIX_RE.search(line)
    if m is None:
        return None, {}, line
    y, mo, d, h, mi, s, frac, parts = m.groups()
    us = int(frac.ljust(6, "0")) if frac else 0
    try:
        ts = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), us)
    except ValueError:
        ts = None
    prefix = {p: int(n) for p, n in _PART_RE.findall(parts)} if parts else {}
    return ts, prefix, line[m.end():]


def _fields(text: str) -> dict[str, str]:
    """``"#running-req: 8, token usage: 0.03, …"`` → ``{"running_req": "8", …}``."""
    out: dict[str, str] = {}
    for part in text.split(", "):
        key, sep, value = part.partition(": ")
        if not sep:
            key, sep, value = part.partition(":")
            if not sep:
                continue
        key = _KEY_RE.sub("_", _UNIT_RE.sub("", key).lower()).strip("_")
        out[key] = value.strip().rstrip(",").strip()
    return out


def _num(v: str | None, kind: type = float) -> float | int | None:
    if v is None:
        return None
    try:
        return kind(v)
    except ValueError:
        try:
            return kind(float(v))  # "12.0" for an int field
        except ValueError:
            return None


def _graph(f: dict[str, str]) -> tuple[bool | None, str | None]:
    for kind in _GRAPH_KINDS:
        v = f.pop(f"{kind}_graph", None)
        if v is not None:
            return v == "True", kind
    return None, None


@dataclass(frozen=True, slots=True)
class DecodeSample:
    """One ``Decode batch`` line (``metrics_reporter.py``), printed every ``--decode-log-interval``
    decode iterations (default 40; with speculation one iteration = one draft+verify round).

    ``accept_len`` (tokens per request-round, bonus included) and ``accept_rate``
    (accepted / proposed drafts) are window values, None without speculation.
    ``gen_throughput`` is tokens/s over the window.  ``num_token``/``token_usage`` are the
    KV pool figures; hybrid models fill ``full_*``/``swa_*``/``mamba_*`` instead.
    ``cuda_graph`` is the graph flag whatever the device (``graph_kind`` says which:
    cuda, cpu, npu, musa).  ``iteration`` is the ``[iter]`` tag (int, or the raw text
    such as ``"first graph replay"``).  Unknown fields are kept as text in ``extra``.
    """

    timestamp: datetime | None
    prefix: dict[str, int]
    running_req: int | None
    num_token: int | None = None
    token_usage: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    cuda_graph: bool | None = None
    graph_kind: str | None = None
    gen_throughput: float | None = None
    queue_req: int | None = None
    iteration: int | str | None = None
    full_num_token: int | None = None
    full_token_usage: float | None = None
    swa_num_token: int | None = None
    swa_token_usage: float | None = None
    mamba_num: int | None = None
    mamba_usage: float | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PrefillSample:
    """One ``Prefill batch`` line (``metrics_reporter.py``), printed for every prefill batch.

    ``new_seq`` requests with ``new_token`` uncached and ``cached_token`` cached prompt
    tokens; ``input_throughput`` in tokens/s; KV usage as in :class:`DecodeSample`.
    """

    timestamp: datetime | None
    prefix: dict[str, int]
    new_seq: int | None
    new_token: int | None = None
    cached_token: int | None = None
    token_usage: float | None = None
    running_req: int | None = None
    queue_req: int | None = None
    pending_token: int | None = None
    cuda_graph: bool | None = None
    graph_kind: str | None = None
    input_throughput: float | None = None
    iteration: int | str | None = None
    full_token_usage: float | None = None
    swa_token_usage: float | None = None
    mamba_usage: float | None = None
    extra: dict[str, str] = field(default_factory=dict)


def parse_line(line: str) -> DecodeSample | PrefillSample | None:
    """Parse one log line; None unless it is a ``Decode batch`` / ``Prefill batch`` line.

    Accepts the 0.5.x formats (0.5.10 to 0.5.23) and the older ``Decode batch.`` form;
    never raises on odd values (an unreadable number becomes None).
    """
    if "batch" not in line:
        return None
    ts, prefix, msg = split_prefix(line)
    m = _BATCH_RE.match(msg)
    if m is None:
        return None
    kind, it = m.group(1), m.group(2)
    iteration: int | str | None = None if it is None else (int(it) if it.isdigit() else it)
    f = _fields(msg[m.end():])
    graph, graph_kind = _graph(f)
    if kind == "Decode":
        return DecodeSample(
            timestamp=ts,
            prefix=prefix,
            running_req=_num(f.pop("running_req", None), int),
            num_token=_num(f.pop("token", None), int),
            token_usage=_num(f.pop("token_usage", None)),
            accept_len=_num(f.pop("accept_len", None)),
            accept_rate=_num(f.pop("accept_rate", None)),
            cuda_graph=graph,
            graph_kind=graph_kind,
            gen_throughput=_num(f.pop("gen_throughput", None)),
            queue_req=_num(f.pop("queue_req", None), int),
            iteration=iteration,
            full_num_token=_num(f.pop("full_token", None), int),
            full_token_usage=_num(f.pop("full_token_usage", None)),
            swa_num_token=_num(f.pop("swa_token", None), int),
            swa_token_usage=_num(f.pop("swa_token_usage", None)),
            mamba_num=_num(f.pop("mamba_num", None), int),
            mamba_usage=_num(f.pop("mamba_usage", None)),
            extra=f,
        )
    return PrefillSample(
        timestamp=ts,
        prefix=prefix,
        new_seq=_num(f.pop("new_seq", None), int),
        new_token=_num(f.pop("new_token", None), int),
        cached_token=_num(f.pop("cached_token", None), int),
        token_usage=_num(f.pop("token_usage", None)),
        running_req=_num(f.pop("running_req", None), int),
        queue_req=_num(f.pop("queue_req", None), int),
        pending_token=_num(f.pop("pending_token", None), int),
        cuda_graph=graph,
        graph_kind=graph_kind,
        input_throughput=_num(f.pop("input_throughput", None)),
        iteration=iteration,
        full_token_usage=_num(f.pop("full_token_usage", None)),
        swa_token_usage=_num(f.pop("swa_token_usage", None)),
        mamba_usage=_num(f.pop("mamba_usage", None)),
        extra=f,
    )


class LineKind(enum.Enum):
    """What a log line is, for highlighting and post-launch verification.

    ``ACCESS`` (uvicorn access lines such as ``"GET /health HTTP/1.1" 503``) is kept
    apart so that request paths and status texts never count as warnings or errors.
    """

    DECODE = "decode"
    PREFILL = "prefill"
    READY = "ready"
    ADJUSTMENT = "adjustment"
    WARNING = "warning"
    ERROR = "error"
    WEIGHT_SKIP = "weight_skip"
    ACCESS = "access"
    #: ``Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2`` (the active tier changed).
    ADAPTIVE_SWITCH = "adaptive_switch"
    #: ``Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=1.33)`` (a slot's EMA decision).
    ADAPTIVE_UPDATE = "adaptive_update"
    #: ``AdaptiveSpeculativeParams initialized: …`` / ``Built adaptive runtime state steps=N: …`` /
    #: 0.5.12's ``Adding initial speculative_num_steps=…`` (start-up of the adaptive controller).
    ADAPTIVE_INIT = "adaptive_init"
    OTHER = "other"


#: Ordered rules (first match wins) applied to the message after the prefix.  Sources:
#: SGLang 0.5.23's scheduler, ``speculative_hook.py`` (adjustment warnings) and loader, the
#: golden server.log files, and public reports (sglang#27829, #14077, #6875: OOM / shape errors).
_RULES: tuple[tuple[LineKind, re.Pattern[str]], ...] = (
    (LineKind.ACCESS, re.compile(r'^INFO: +\S+:\d+ - "[A-Z]+ \S* HTTP/[\d.]+" \d{3}')),
    (LineKind.OTHER, re.compile(r"^server_args=")),  # one huge line of flag values
    # SGLang's adaptive controller (speculative/eagle_worker_v2.py apply_runtime_state /
    # build_adaptive_runtime_state, adaptive_spec_params.py); parsed by specdash.sglang.adaptive.
    (LineKind.ADAPTIVE_SWITCH, re.compile(r"^Switch adaptive runtime state: steps \d+ -> \d+, draft_tokens \d+ -> \d+")),
    (LineKind.ADAPTIVE_UPDATE, re.compile(r"^Adaptive spec params updated: steps \d+ -> \d+ \(ema_accept_len=")),
    (LineKind.ADAPTIVE_INIT, re.compile(
        r"^(?:AdaptiveSpeculativeParams initialized: steps=\d+|Built adaptive runtime state steps=\d+:|"
        r"Adding initial speculative_num_steps=\d+ to candidate_steps=)")),
    (LineKind.READY, re.compile(r"The server is fired up and ready to roll!")),
    (LineKind.ERROR, re.compile(
        r"Traceback \(most recent call last\)|\b\w*Error\b(?!\w)|\b\w*Exception\b|"
        r"(?i:out of memory|not enough memory|segmentation fault|core dumped|\bfatal\b|"
        r"crashed|scheduler hit an exception)"
    )),
    (LineKind.WEIGHT_SKIP, re.compile(
        r"(?i)\bskip(?:ping|ped|s)? (?:loading )?(?:weight|param|tensor|key)|"
        r"not found in params_dict|(?:missing|unexpected) (?:weight|key|tensor|param)s?\b|"
        r"weights? (?:of|in) .* (?:were|was) not (?:used|initialized)|"
        r"(?:were|was) not (?:used|initialized) (?:when|from)"
    )),
    (LineKind.ADJUSTMENT, re.compile(
        r"(?i)\b(?:is|are|was|has been) (?:adjusted|reset|changed|overridden|overwritten|forced|"
        r"automatically (?:set|adjusted|enabled|disabled)|auto-?(?:set|disabled|enabled))\b|"
        r"\b(?:is|are) (?:disabled|enabled|turned off) because\b"
    )),
    (LineKind.WARNING, re.compile(
        r"Warning\b|\bWARNING\b|warnings\.warn|(?i:deprecated|will be removed|\bfail(?:ed|s|ure)?\b|"
        r"falling back|fall back|not available|not installed|ignore import error|"
        r"the state was deleted|\bwarn\b)|^\[W\d{4} "
    )),
)


def classify_line(line: str, prev: LineKind | None = None) -> LineKind:
    """Classify one SGLang log line.

    ``prev`` is the kind of the line before: an indented line without SGLang's prefix
    (a traceback frame, a Python warning's source line) takes the kind of a preceding
    ERROR/WARNING line.  Decode/Prefill lines are recognised by :func:`parse_line`'s
    pattern; everything else by an ordered rule table (access line, ready, error, weight
    skip, adjustment, warning, other).
    """
    ts, _prefix, msg = split_prefix(line)
    if ts is None and prev in (LineKind.ERROR, LineKind.WARNING) and line[:1] in (" ", "\t"):
        return prev
    if "batch" in msg:
        m = _BATCH_RE.match(msg)
        if m is not None:
            return LineKind.DECODE if m.group(1) == "Decode" else LineKind.PREFILL
    for kind, rule in _RULES:
        if rule.search(msg):
            return kind
    return LineKind.OTHER


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line in a :class:`LogRing`: sequence number (from 1), kind, text (a tqdm
    ``\\r``-redrawn line is reduced to its last frame), parsed sample, arrival time
    (``time.monotonic()``)."""

    seq: int
    kind: LineKind
    text: str
    sample: DecodeSample | PrefillSample | None
    t: float


class LogRing:
    """A bounded, thread-safe buffer of recent log lines with their kinds and samples.

    The process wrapper's reader thread appends; the TUI and the verification read
    snapshots.  ``counts`` and ``ready`` cover every line ever appended, not only the
    ones still held.

    Args:
        maxlen: lines kept.
        max_samples: Decode/Prefill samples kept (separately, so a noisy log does not
            push them out).
    """

    def __init__(self, maxlen: int = 5000, max_samples: int = 5000) -> None:
        self._lock = threading.Lock()
        self._lines: collections.deque[LogEntry] = collections.deque(maxlen=maxlen)
        self._decode: collections.deque[DecodeSample] = collections.deque(maxlen=max_samples)
        self._prefill: collections.deque[PrefillSample] = collections.deque(maxlen=max_samples)
        self._seq = 0
        self._prev: LineKind | None = None
        self.counts: collections.Counter[LineKind] = collections.Counter()
        #: Set when the "fired up and ready to roll" line arrives.
        self.ready = threading.Event()
        self.ready_at: float | None = None

    def append(self, line: str) -> LogEntry:
        """Classify and parse one line (trailing newline optional) and keep it."""
        line = line.rstrip("\n")
        if "\r" in line:
            frames = [f for f in line.split("\r") if f.strip()]
            text = frames[-1] if frames else ""
        else:
            text = line
        sample = parse_line(line)
        now = time.monotonic()
        with self._lock:
            if isinstance(sample, DecodeSample):
                kind = LineKind.DECODE
            elif isinstance(sample, PrefillSample):
                kind = LineKind.PREFILL
            else:
                kind = classify_line(line, self._prev)
            self._seq += 1
            entry = LogEntry(self._seq, kind, text, sample, now)
            self._lines.append(entry)
            self._prev = kind
            self.counts[kind] += 1
            if isinstance(sample, DecodeSample):
                self._decode.append(sample)
            elif isinstance(sample, PrefillSample):
                self._prefill.append(sample)
        if kind is LineKind.READY and not self.ready.is_set():
            self.ready_at = now
            self.ready.set()
        return entry

    def extend(self, lines: Iterable[str]) -> None:
        """Append several lines (e.g. a whole log file's ``splitlines()``)."""
        for line in lines:
            self.append(line)

    def entries(self, since: int = 0, kinds: Iterable[LineKind] | None = None) -> list[LogEntry]:
        """Held entries with ``seq > since`` (incremental reads), optionally of some kinds."""
        want = set(kinds) if kinds is not None else None
        with self._lock:
            if not self._lines:
                return []
            start = max(0, since - self._lines[0].seq + 1)  # seqs are consecutive
            return [e for e in itertools.islice(self._lines, start, None) if want is None or e.kind in want]

    def lines(self, last: int | None = None) -> list[str]:
        """The texts of the held lines (the ``last`` n only, when given)."""
        with self._lock:
            items = list(self._lines)
        if last is not None:
            items = items[-last:] if last > 0 else []
        return [e.text for e in items]

    def tail(self, n: int = 40) -> str:
        """The last ``n`` lines joined with newlines (for error messages)."""
        return "\n".join(self.lines(n))

    def decode_samples(self) -> list[DecodeSample]:
        """Held Decode samples, oldest first."""
        with self._lock:
            return list(self._decode)

    def prefill_samples(self) -> list[PrefillSample]:
        """Held Prefill samples, oldest first."""
        with self._lock:
            return list(self._prefill)

    @property
    def last_decode(self) -> DecodeSample | None:
        """The newest Decode sample, or None."""
        with self._lock:
            return self._decode[-1] if self._decode else None

    @property
    def seq(self) -> int:
        """Number of lines appended so far."""
        return self._seq
