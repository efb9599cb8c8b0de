"""The shapes of what specdash writes and reads back: a ``summary.json`` RUN, a sweep, a comparison, a tune.

Typed dictionaries (:class:`typing.TypedDict`): the objects are the plain dicts the files hold, so a
file written before a key existed still reads, and every reader sees the same shape the writer
declares here.  One declaration per shape, on the ground floor (this module imports nothing of
specdash), so every floor that makes or reads one names the same type:

* :class:`RunSummary` — one RUN of ``summary.json`` (``{"specdash_version", "runs": [RUN, …]}``),
  assembled by :class:`specdash.bench.runner.ProfileRun` from its parts, each typed where it is made:
  :class:`RunFigures` (the run's requests, :meth:`specdash.collect.stream.RunStats.summary`),
  :class:`GoodputFields`, :class:`LoadFields`, :class:`ClientLoad` and :class:`AdaptiveFields`
  (:mod:`specdash.bench.adaptive`).  :data:`RUN_KEYS` lists every key; keys marked ``NotRequired``
  appear only in some runs (``arrival_seed`` in open loop, ``sweep_point`` in a sweep).
* :class:`SweepReport` / :class:`SweepPoint` — ``--sweep``'s ``--json`` payload and ``sweep.json``.
* :class:`ComparisonReport` — ``comparison.json`` (``--vs``, ``specdash compare``).
* :class:`ExternalRun` — another tool's result read as a RUN (:mod:`specdash.bench.external`), a side of
  ``specdash compare``.
* :class:`TuneReport` — ``tune.json`` (``specdash tune``), declared here; :func:`specdash.bench.tune.tune`
  writes it, one :class:`TuneMeasured` row per setting measured.
* :class:`Effective` — the four speculative settings read back from the server (the RUN's
  ``effective``); :class:`specdash.sglang.speculative.SpecSettings` reads them.

Units are in the key names (``_ms``, ``_s``, ``tok_s`` = output tokens per second); not applicable → None.
No ``from __future__ import annotations`` here: Python 3.11 reads ``NotRequired`` only from evaluated annotations.

A writer may build one with its type's keyword constructor (``Tier(speculative_num_steps=…, …)``: a plain dict,
keys in the order given).  A key read in many places has one reader here: :func:`output_tok_s` (the key's name,
where a value names it — a comparison's ``metric``, a column list — is :data:`OUTPUT_TOK_S`).
"""

from collections.abc import Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict

#: The name of the output-throughput key (a RUN's, a sweep point's, a tier's …) and of the comparison metric.
OUTPUT_TOK_S: Final = "output_tok_s"


def output_tok_s(rec: Mapping[str, Any]) -> float | None:
    """Output tokens per second of ``rec`` (``tok_s``: output tokens ÷ seconds, all requests in flight together).

    For a RUN (:class:`RunFigures`): the successful requests' completion tokens over the run's wall time
    (``duration_s``: first request sent → last response finished, :mod:`specdash.collect.stream`); for a
    sweep point (:class:`SweepPoint`) its RUN's; for a tier (:class:`Tier`) the tier's output tokens over
    the decode time spent in it; for another record that carries the key (a tune's ``measured`` row, a
    comparison's side, another tool's RUN-shaped result) the figure it took from one of those.  The value
    as stored (a JSON number, not converted); None when the key is absent or null (not measured, or not
    applicable: no request finished, no time elapsed)."""
    return rec.get(OUTPUT_TOK_S)


# -- parts of a RUN ------------------------------------------------------------------------------------------

#: A latency distribution in ms (``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms``); None without values.
Dist = TypedDict("Dist", {"mean": float, "p50": float, "p90": float, "p95": float, "p99": float,
                          "p99.9": float, "max": float})


class Effective(TypedDict):
    """The speculative settings the server reports (``/server_info``); all None without speculation."""

    speculative_algorithm: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None


class AcceptPosition(TypedDict):
    """One draft position of ``accept_by_position``: P(accepted | the round reached it) = ``rate``."""

    position: int
    reached: int
    accepted: int
    rate: float | None


class GroupFigures(TypedDict):
    """One group of ``by_category`` / ``by_context``: its successful requests, pooled acceptance, median tok/s."""

    requests: int
    output_tokens: int
    accept_length: float | None
    accept_rate: float | None
    request_tok_s_p50: float | None


class ContextGroup(GroupFigures):
    """A ``by_context`` bucket (prompt + completion tokens)."""

    context_tokens: str


class Tier(TypedDict):
    """One adaptive step tier of a RUN's ``tiers``."""

    speculative_num_steps: int
    speculative_num_draft_tokens: int | None
    verify_rounds: float
    output_tokens: float
    accept_length: float | None
    accept_rate: float | None
    output_tok_s: float | None
    share: float | None


class Adaptive(TypedDict):
    """A RUN's ``adaptive``: whether SGLang's adaptive speculation ran, its parsed config, tier switches seen."""

    enabled: bool
    config: dict[str, Any] | None
    switches: int


class FindingJSON(TypedDict):
    """One doctor or verification finding (:meth:`specdash.eagle3.findings.Finding.to_json`)."""

    code: str
    severity: Literal["error", "warning", "info"]
    message: str
    why: str
    fix: str
    evidence: dict[str, Any]


class Verification(TypedDict):
    """A RUN's post-launch verification."""

    status: Literal["ok", "failed", "skipped"]
    findings: list[FindingJSON]


class RequestShape(TypedDict):
    """What a run asked of the server (:func:`specdash.bench.load.request_shape`)."""

    api: Literal["generate", "chat"]
    sampling: dict[str, Any]
    prompts: int
    prompts_sha256: str


class RunFigures(TypedDict):
    """The run-scoped figures of a RUN, from its own requests (:meth:`specdash.collect.stream.RunStats.summary`)."""

    requests: int
    failed_requests: int
    output_tokens: int
    duration_s: float | None
    output_tok_s: float | None
    ttft_ms: Dist | None
    tpot_ms: Dist | None
    itl_ms: Dist | None
    e2e_ms: Dist | None
    request_throughput: float | None
    achieved_request_rate: float | None
    accept_length: float | None
    accept_rate: float | None
    accept_histogram: list[int] | None
    accept_by_position: list[AcceptPosition] | None
    accept_by_position_source: Literal["server", "histogram"] | None
    by_category: dict[str, GroupFigures] | None
    by_context: list[ContextGroup] | None


class GoodputFields(TypedDict):
    """``--goodput``: requests/s meeting every SLO, the SLOs (ms), the fraction of requests meeting them."""

    goodput: float | None
    goodput_slo: dict[str, float] | None
    goodput_fraction: float | None


class LoadFields(TypedDict):
    """The load shape: ``request_rate`` asked (``"inf"`` = all at once; None in closed loop), ``burstiness``;
    in open loop also ``arrival_seed``, and the RUN's ``concurrency`` is then the in-flight cap (None = uncapped)."""

    request_rate: float | Literal["inf"] | None
    burstiness: float | None
    arrival_seed: NotRequired[int | None]


class ClientLoad(TypedDict):
    """How busy specdash's own process was, and why the client (not the server) set the pace, if it did."""

    client_cpu_fraction: float | None
    client_bound: str | None


class AdaptiveFields(TypedDict):
    """The adaptive-aware fields (:meth:`specdash.bench.adaptive.AdaptiveRun.fields`)."""

    tiers: list[Tier] | None
    adaptive: Adaptive
    device_time_s: dict[str, float] | None
    ranks: list[dict[str, Any]] | None
    decode_iterations: int | None
    log_window: list[int] | None


class RunSummary(RunFigures, GoodputFields, LoadFields, ClientLoad, AdaptiveFields):
    """One RUN of ``summary.json``: who ran (profile, server, settings read back), what was sent, the figures,
    the verification, where its files are, and whether it was cut short (``partial``)."""

    profile: str
    profile_path: str | None
    simulated: bool
    acceptance_simulated: bool
    sglang_version: str | None
    effective: Effective
    suite: str
    prompt_format: str
    prompt_format_warning: str | None
    concurrency: int | None
    max_tokens: int
    request_shape: RequestShape
    server_accept_length: float | None
    metrics_error: str | None
    server_info_errors: list[str] | None
    verification: Verification
    run_dir: str
    partial: bool
    partial_reason: str | None
    #: the point's index in a sweep (sweeps only)
    sweep_point: NotRequired[int]


#: Every key a RUN may have (:class:`RunSummary`), and the ones every RUN has.
RUN_KEYS: frozenset[str] = RunSummary.__required_keys__ | RunSummary.__optional_keys__
RUN_REQUIRED_KEYS: frozenset[str] = RunSummary.__required_keys__


class Summary(TypedDict):
    """``summary.json``."""

    specdash_version: str
    runs: list[RunSummary]


# -- sweeps --------------------------------------------------------------------------------------------------
class SweepPoint(TypedDict):
    """One point of a sweep: the swept value under its axis' key, the profile's and the baseline's tok/s, the
    paired speedup with its interval; a rate point adds what each side sent and served."""

    concurrency: NotRequired[int]
    request_rate: NotRequired[float]
    achieved_request_rate: NotRequired[float | None]
    baseline_achieved_request_rate: NotRequired[float | None]
    max_in_flight: NotRequired[int | None]
    held_back: NotRequired[list[str]]
    served_fraction: NotRequired[dict[str, float | None]]
    saturated: NotRequired[list[str]]
    output_tok_s: float | None
    baseline_tok_s: float | None
    accept_length: float | None
    accept_by_position: list[AcceptPosition] | None
    speedup: float | None
    ci95: list[float | None] | None
    verdict: str | None
    pairs: int
    throughput_ratio: float | None


class SweepReport(TypedDict):
    """``--sweep``'s ``--json`` payload (``sweep.json`` is the same without ``runs``)."""

    profile: str
    baseline: str | None
    variable: Literal["concurrency", "request_rate"]
    sweep: list[SweepPoint]
    break_even_concurrency: float | None
    break_even_request_rate: float | None
    break_even_ci95: list[float | None] | None
    note: str
    runs: NotRequired[list[RunSummary]]
    run_dirs: list[str]


# -- comparisons ---------------------------------------------------------------------------------------------
class ComparisonReport(TypedDict):
    """``comparison.json``: B over A, the geometric mean of the paired per-request output tok/s ratios
    (:func:`specdash.bench.compare.build_comparison`; field order as scripts read it)."""

    a: str
    b: str
    metric: Literal["output_tok_s"]
    speedup: float | None
    ci95: list[float | None] | None
    verdict: str
    pairs: int
    per_prompt: list[dict[str, Any]]
    per_category: dict[str, dict[str, Any]]
    baseline: dict[str, Any] | None
    overall: dict[str, dict[str, Any]]
    confidence: float
    method: str
    excluded: dict[str, int]
    notes: list[str]
    # added where the comparison is made
    comparable: NotRequired[bool]
    not_comparable: NotRequired[list[str] | None]
    runs: NotRequired[list[str]]
    compare_dir: NotRequired[str]
    verification_failed: NotRequired[list[str]]


class ExternalRun(TypedDict):
    """A vLLM ``bench serve`` result or an AIPerf export read as a RUN (:mod:`specdash.bench.external`; read by
    :mod:`specdash.commands.compare`): the RUN's figures the file has (the rest None), which ``tool`` wrote it, the
    ``model``, the mean output tokens per request and, where the file says it (AIPerf), the output tokens asked."""

    profile: str
    tool: str
    model: str | None
    requests: int | None
    failed_requests: float | None
    output_tokens: float | None
    duration_s: float | None
    output_tok_s: float | None
    request_throughput: float | None
    ttft_ms: dict[str, float | None] | None
    tpot_ms: dict[str, float | None] | None
    itl_ms: dict[str, float | None] | None
    e2e_ms: dict[str, float | None] | None
    concurrency: int | None
    request_rate: float | str | None
    mean_output_tokens: float | None
    asked_output_tokens: NotRequired[float | None]
    prompts: int | None
    accept_length: float | None
    accept_rate: float | None
    accept_histogram: list[int] | None
    accept_by_position: list[AcceptPosition] | list[dict[str, Any]] | None
    accept_by_position_source: Literal["server", "histogram"] | None


# -- tunes ---------------------------------------------------------------------------------------------------
#: A tune row's ``for`` (what a row beyond the tune's own measurements was for: ``"final A/B"``, ``"adaptive
#: schedule"``); a Python keyword, so declared apart.
_MeasuredFor = TypedDict("_MeasuredFor", {"for": NotRequired[str]})


class TuneMeasured(_MeasuredFor):
    """One ``measured`` row of ``tune.json`` (:func:`specdash.bench.tune._row_json`; read by
    :mod:`specdash.bench.tune_text` and the HTML report): a setting (None: no speculation), its tok/s and τ at
    ``concurrency``, where it came from (``source``: ``"launch"`` or ``"tier"``; ``launch``: the launch's index
    or None) and its run directory; some rows add the live windows behind a tier, the tok/s interval (±1.96
    standard errors) and ``for``; after the last acceptance fit, the measured and the expected acceptance by
    draft position."""

    settings: dict[str, Any] | None
    output_tok_s: float | None
    accept_length: float | None
    concurrency: int
    source: str
    launch: int | None
    run_dir: str | None
    windows: NotRequired[int | None]
    interval: NotRequired[list[float] | None]
    accept_by_position: NotRequired[list[AcceptPosition] | None]
    expected_accept_by_position: NotRequired[list[dict[str, Any]] | None]


class TuneReport(TypedDict):
    """``tune.json``: what ``specdash tune`` launched, measured, picked and saved."""

    profile: str
    suite: str
    budget: int
    mode: Literal["relaunch", "live"]
    live: dict[str, Any] | None
    launches: int
    launches_by_purpose: dict[str, int]
    exploration_launches: int
    launch_log: list[dict[str, Any]]
    stop_reason: str | None
    candidates_note: str | None
    max_time_s: float | None
    time_budget_cut: list[str]
    max_launches: int | None
    launch_cap_cut: list[str]
    fast_explore: dict[str, Any]
    baseline_reused: dict[str, Any] | None
    start: dict[str, Any]
    best: dict[str, Any]
    baseline_tok_s: float | None
    measured: list[TuneMeasured]
    best_expected_accept_by_position: list[dict[str, Any]] | None
    advice: dict[str, Any]
    advice_text: str
    comparison: ComparisonReport | None
    final_ab: bool
    adaptive_schedule: dict[str, Any] | None
    recommendation: dict[str, Any]
    preset: str | None
    preset_not_saved: str | None
    tune_dir: str
    time: dict[str, Any]


__all__ = ["OUTPUT_TOK_S", "RUN_KEYS", "RUN_REQUIRED_KEYS", "AcceptPosition", "Adaptive", "AdaptiveFields",
           "ClientLoad", "ComparisonReport", "ContextGroup", "Dist", "Effective", "ExternalRun", "FindingJSON",
           "GoodputFields", "GroupFigures", "LoadFields", "RequestShape", "RunFigures", "RunSummary", "Summary",
           "SweepPoint", "SweepReport", "Tier", "TuneMeasured", "TuneReport", "Verification", "output_tok_s"]
