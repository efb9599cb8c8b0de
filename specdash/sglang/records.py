"""The record of one streamed request: :class:`GenerateResult` and its :class:`SpecMeta`.

:meth:`GenerateResult.to_json` is the one shape of a line of a run's ``requests.jsonl``
(the statistics, the comparison, the verification and the live collector all read it);
:meth:`GenerateResult.from_json` reads it back for ``--resume``.  The speculative
counters come from SGLang's final ``meta_info`` (``managers/tokenizer_manager.py``,
``_calculate_spec_decoding_metrics``), read through :mod:`specdash.sglang.versions` so
that every release's key names work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from specdash.sglang.versions import read_spec_meta

__all__ = ["GenerateResult", "RequestRecord", "SpecMeta", "SpecRecord", "record_problem", "request_counts"]


class SpecRecord(TypedDict):
    """A record's ``spec``: the request's speculative counters (:class:`SpecMeta`)."""

    verify_ct: int
    correct_drafts: int | None
    proposed_drafts: int | None
    histogram: list[int] | None
    accept_length: float | None
    accept_rate: float | None


#: A line of ``requests.jsonl``: :meth:`GenerateResult.to_json`, then the load driver's tags
#: (:func:`specdash.bench.load.send_suite`: ``prompt_index``, ``repeat``, ``category``, ``segment``) and, in a
#: sweep, the point's ``concurrency`` or ``request_rate``.  Times as :class:`GenerateResult` says.  The
#: functional form: ``from __future__ import annotations`` would hide ``NotRequired`` from Python 3.11.
RequestRecord = TypedDict("RequestRecord", {  # noqa: UP013 - see above
    "rid": str | None, "ok": bool, "error": str | None, "prompt_tokens": int, "completion_tokens": int,
    "started_at": float, "ts_sent": float, "ts_done": float, "t_sent": float, "t_first": float | None,
    "t_done": float, "ttft_s": float | None, "e2e_s": float, "server_e2e_s": float | None,
    "tpot_s": float | None, "finish_reason": str | None, "events": int, "spec": SpecRecord | None,
    "itl_s": list[float], "text": NotRequired[str | None],
    "prompt_index": NotRequired[int], "repeat": NotRequired[int], "category": NotRequired[str | None],
    "segment": NotRequired[int], "concurrency": NotRequired[int], "request_rate": NotRequired[float],
})


@dataclass(slots=True)
class SpecMeta:
    """Per-request speculative-decoding counters from SGLang's final ``meta_info``.

    Definitions (SGLang's ``tokenizer_manager.py::_calculate_spec_decoding_metrics``):
    ``verify_ct`` = verify rounds of the request; ``correct_drafts`` = accepted draft
    tokens, bonus token excluded; ``proposed_drafts`` = ``verify_ct × (num_draft_tokens −
    1)``; ``histogram[k]`` = verify rounds that accepted exactly k drafts;
    ``accept_length`` = server's ``completion_tokens / verify_ct`` (bonus included);
    ``accept_rate`` = correct / proposed.
    Fields a server version does not send are None.
    """

    verify_ct: int
    correct_drafts: int | None = None
    proposed_drafts: int | None = None
    histogram: list[int] | None = None
    accept_length: float | None = None
    accept_rate: float | None = None

    @classmethod
    def from_meta_info(cls, meta: dict) -> SpecMeta | None:
        """Read the ``spec_*`` keys of a ``meta_info`` (or ``sglext.spec_tokens_details``)
        dict, version-defensively through ``versions.SPEC_META_KEYS`` (0.5.14 sends
        old and new names, 0.5.22+ only the new ones, 0.5.10 only
        ``spec_accept_token_num``/``spec_draft_token_num``/``spec_accept_histogram``).

        Returns None when ``spec_verify_ct`` is absent (no speculation: SGLang adds the
        fields only when speculating and ``spec_verify_ct > 0``).
        """
        verify_ct = read_spec_meta(meta, "verify_ct")
        if verify_ct is None:
            return None
        hist = read_spec_meta(meta, "histogram")
        return cls(
            verify_ct=int(verify_ct),
            correct_drafts=_opt_int(read_spec_meta(meta, "correct_drafts")),
            proposed_drafts=_opt_int(read_spec_meta(meta, "proposed_drafts")),
            histogram=[int(x) for x in hist] if hist is not None else None,
            accept_length=_opt_float(read_spec_meta(meta, "accept_length")),
            accept_rate=_opt_float(read_spec_meta(meta, "accept_rate")),
        )


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(slots=True)
class GenerateResult:
    """One streamed request as the client saw it.

    Times ``t_sent``/``t_first``/``t_done`` are ``time.perf_counter()`` values (s) of this
    process; durations are seconds.  ``t_sent`` is taken just before the request is sent,
    ``t_first`` at the arrival of the first event carrying ``completion_tokens > 0``,
    ``t_done`` when the response body has ended.  ``itl_s`` holds one inter-token latency
    per token after the first event: each event's gap is spread evenly over the tokens it
    carries, as SGLang's ``bench_serving`` (``python/sglang/benchmark/serving.py``) does.
    ``completion_tokens`` is SGLang's count (``meta_info.completion_tokens``, or ``usage`` for chat); events
    are coalesced, so ``events ≤ completion_tokens``.  ``ok`` is False on HTTP errors,
    connection errors, mid-stream ``{"error": …}`` events, aborts and streams that end
    before the final event; ``error`` then says why.
    """

    rid: str | None
    ok: bool
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    t_sent: float
    t_first: float | None
    t_done: float
    ttft_s: float | None
    e2e_s: float
    server_e2e_s: float | None
    itl_s: list[float]
    finish_reason: str | None
    spec: SpecMeta | None
    events: int
    #: wall-clock time (epoch s) the request was sent, for matching with server logs.
    started_at: float = 0.0
    #: the final cumulative output text (``/generate``) or the joined deltas (chat).
    text: str | None = field(default=None, repr=False)

    @property
    def tpot_s(self) -> float | None:
        """Time per output token (s) = (e2e − ttft) / (completion_tokens − 1), SGLang's
        definition (``bench_serving``); None with fewer than 2 tokens or no TTFT."""
        if self.ttft_s is None or self.completion_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)

    def to_json(self, *, include_text: bool = False) -> RequestRecord:
        """The canonical JSON record of one request (a line of ``requests.jsonl``).

        Keys: the dataclass fields except ``spec`` and ``text`` (``text`` only with
        ``include_text``), plus ``tpot_s``, wall-clock ``ts_sent`` / ``ts_done`` (epoch s:
        ``started_at`` and ``started_at + e2e_s``, the window :class:`RunStats` measures
        duration over) and ``spec``: ``{verify_ct, correct_drafts, proposed_drafts,
        histogram, accept_length, accept_rate}`` or None without speculation — the shape
        the statistics, the comparison and the verification all read.  ``itl_s`` is
        rounded to 0.1 µs.  :meth:`from_json` reads it back.
        """
        spec = self.spec
        rec: RequestRecord = {
            "rid": self.rid,
            "ok": self.ok,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "started_at": self.started_at,
            "ts_sent": self.started_at,
            "ts_done": self.started_at + self.e2e_s,
            "t_sent": self.t_sent,
            "t_first": self.t_first,
            "t_done": self.t_done,
            "ttft_s": self.ttft_s,
            "e2e_s": self.e2e_s,
            "server_e2e_s": self.server_e2e_s,
            "tpot_s": self.tpot_s,
            "finish_reason": self.finish_reason,
            "events": self.events,
            "spec": None if spec is None else {
                "verify_ct": spec.verify_ct,
                "correct_drafts": spec.correct_drafts,
                "proposed_drafts": spec.proposed_drafts,
                "histogram": spec.histogram,
                "accept_length": spec.accept_length,
                "accept_rate": spec.accept_rate,
            },
            "itl_s": [round(x, 7) for x in self.itl_s],
        }
        if include_text:
            rec["text"] = self.text
        return rec

    @classmethod
    def from_json(cls, rec: RequestRecord | dict) -> GenerateResult:
        """Inverse of :meth:`to_json` (for ``--resume``); unknown keys are ignored."""
        sp = rec.get("spec")
        spec = None
        if sp and sp.get("verify_ct") is not None:
            spec = SpecMeta(
                verify_ct=sp["verify_ct"],
                correct_drafts=sp.get("correct_drafts"),
                proposed_drafts=sp.get("proposed_drafts"),
                histogram=sp.get("histogram"),
                accept_length=sp.get("accept_length"),
                accept_rate=sp.get("accept_rate"),
            )
        return cls(
            rid=rec.get("rid"),
            ok=bool(rec.get("ok")),
            error=rec.get("error"),
            prompt_tokens=int(rec.get("prompt_tokens") or 0),
            completion_tokens=int(rec.get("completion_tokens") or 0),
            t_sent=float(rec.get("t_sent") or 0.0),
            t_first=rec.get("t_first"),
            t_done=float(rec.get("t_done") or 0.0),
            ttft_s=rec.get("ttft_s"),
            e2e_s=float(rec.get("e2e_s") or 0.0),
            server_e2e_s=rec.get("server_e2e_s"),
            itl_s=list(rec.get("itl_s") or []),
            finish_reason=rec.get("finish_reason"),
            spec=spec,
            events=int(rec.get("events") or 0),
            started_at=float(rec.get("started_at") or 0.0),
            text=rec.get("text"),
        )


def request_counts(rec: Any) -> tuple[int | None, int | None]:
    """``(completion_tokens, verify_ct)`` of one request record — a ``requests.jsonl`` line, a
    ``GenerateResult`` dict or a bare ``meta_info`` — None where absent or not a number.  The one reader
    of these two counts for post-launch verification and the run statistics' pooled stand-ins."""
    if not isinstance(rec, dict):
        return None, None
    if "meta_info" in rec and isinstance(rec["meta_info"], dict):
        rec = rec["meta_info"]
    ct = rec.get("completion_tokens", rec.get("output_tokens"))
    spec = rec.get("spec")
    if isinstance(spec, dict):
        vc = spec.get("verify_ct", spec.get("spec_verify_ct"))
    else:
        vc = read_spec_meta(rec, "verify_ct")
    try:
        return (int(ct) if ct is not None else None), (int(vc) if vc is not None else None)
    except (TypeError, ValueError):
        return None, None



#: The largest count or index a record may hold (2**53: what a float64 column keeps exactly).
_MAX_COUNT = 2**53
#: The largest |time| in seconds a record may hold (epoch seconds are ~2e9).
_MAX_SECONDS = 1e12
_INT_KEYS = ("prompt_tokens", "completion_tokens", "events", "prompt_index", "repeat", "segment", "concurrency")
_NUM_KEYS = ("started_at", "ts_sent", "ts_done", "t_sent", "t_first", "t_done", "ttft_s", "e2e_s",
             "server_e2e_s", "tpot_s", "request_rate")
_STR_KEYS = ("rid", "error", "category")
_SPEC_INT_KEYS = ("verify_ct", "correct_drafts", "proposed_drafts")
_SPEC_NUM_KEYS = ("accept_length", "accept_rate")


def _bad_int(v) -> bool:
    return v is not None and (type(v) is not int or not 0 <= v <= _MAX_COUNT)


def _bad_num(v) -> bool:
    if v is None:
        return False
    if type(v) is int:
        return abs(v) > _MAX_SECONDS
    if type(v) is float:
        return abs(v) > _MAX_SECONDS  # NaN passes (json.dumps writes it for a missing float)
    return True


def record_problem(rec: Any) -> str | None:
    """Why ``rec`` is not a ``requests.jsonl`` record specdash could have written (None when it could be):
    not a JSON object, or a field the statistics, the comparison or the report read with another JSON
    type — counts and indices whole numbers in 0 … 2**53, times numbers of at most 10**12 s (NaN allowed,
    as :func:`json.dumps` writes it), ``rid`` / ``error`` / ``category`` strings, ``ok`` a boolean,
    ``spec`` an object of counts, ``itl_s`` and ``spec.histogram`` lists of numbers.  Missing fields are
    allowed (read as absent).  Cheap: type checks, the lists through one ``map(type, …)`` each."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    for k in _INT_KEYS:
        if _bad_int(rec.get(k)):
            return f"{k} is {type(rec[k]).__name__} {str(rec[k])[:20]!r}, not a count"
    for k in _NUM_KEYS:
        v = rec.get(k)
        if _bad_num(v) and not (k == "request_rate" and v == "inf"):
            return f"{k} is {type(v).__name__} {str(v)[:20]!r}, not a time or rate"
    for k in _STR_KEYS:
        v = rec.get(k)
        if v is not None and type(v) is not str:
            return f"{k} is {type(v).__name__}, not a string"
    if "ok" in rec and type(rec["ok"]) is not bool:
        return f"ok is {type(rec['ok']).__name__}, not true/false"
    itl = rec.get("itl_s")
    if itl is not None and (type(itl) is not list or not set(map(type, itl)) <= {float, int}):
        return "itl_s is not a list of numbers"
    spec = rec.get("spec")
    if spec is not None:
        if type(spec) is not dict:
            return f"spec is a JSON {type(spec).__name__}, not an object"
        for k in _SPEC_INT_KEYS:
            if _bad_int(spec.get(k)):
                return f"spec.{k} is not a count"
        for k in _SPEC_NUM_KEYS:
            v = spec.get(k)
            if v is not None and (type(v) not in (int, float) or abs(v) > _MAX_COUNT):
                return f"spec.{k} is not a number"
        hist = spec.get("histogram")
        if hist is not None and (type(hist) is not list or len(hist) > 4096 or not set(map(type, hist)) <= {int}
                                 or any(not 0 <= x <= _MAX_COUNT for x in hist)):
            return "spec.histogram is not a list of counts"
    return None
