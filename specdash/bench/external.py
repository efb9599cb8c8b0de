"""Result files of other benchmark tools, read as a side of ``specdash compare``.

A user who measured a baseline with the tool they already run brings its result file instead of
re-running it.  Two formats, detected from their keys:

* **vLLM** ``vllm bench serve --save-result`` (``vllm/benchmarks/serve.py``, ``main_async`` →
  ``result_json``; read at vllm-project/vllm ``def9ce85``): a flat JSON object — ``completed``,
  ``failed``, ``duration`` (s), ``total_input_tokens``, ``total_output_tokens``,
  ``output_throughput`` (tok/s), ``request_throughput``, ``{mean,median,std,p<q>}_{ttft,tpot,itl,e2el}_ms``,
  ``max_concurrency``, ``request_rate`` (``"inf"``), ``num_prompts``, ``model_id``, ``label``, ``date``;
  with ``--save-detailed`` also per request ``input_lens``, ``output_lens``, ``ttfts`` (s), ``itls`` (lists,
  s) and ``errors``; releases that read the server's speculative counters add
  ``spec_decode_acceptance_rate`` (percent), ``spec_decode_acceptance_length``, ``spec_decode_num_drafts``
  and ``spec_decode_per_position_acceptance_rates`` (accepted at position i ÷ drafts).
* **AIPerf** ``profile_export_aiperf.json`` (ai-dynamo/aiperf ``src/aiperf/exporters/metrics_json_exporter.py``,
  documented in ``docs/tutorials/working-with-profile-exports.md``): one object whose metric keys hold
  ``{unit, avg, p50, p90, p99, min, max, std}`` — ``output_token_throughput`` (tokens/sec),
  ``request_throughput``, ``time_to_first_token`` / ``request_latency`` (ms), ``inter_token_latency`` (ms:
  AIPerf's ITL is (request latency − TTFT) ÷ (output tokens − 1) per request, what SGLang and vLLM call
  TPOT; ``src/aiperf/metrics/types/inter_token_latency_metric.py``), ``output_sequence_length``,
  ``benchmark_duration`` (sec), ``request_count`` — beside ``input_config`` (``loadgen.concurrency``,
  ``input.prompt.output_tokens.mean``) and, with speculative decoding, ``pooled_spec_decode_acceptance_histogram``
  ({accepted drafts: verify steps}, SGLang's histogram as a dict).  An AIPerf artifact directory is read
  through that file; its ``profile_export.jsonl`` (one record per request: ``metrics.request_latency``,
  ``metrics.output_sequence_length``) gives the per-request figures.

:func:`load_external` turns either into an :class:`ExternalSide`: a ``summary.json``-RUN-shaped dict
(:class:`specdash.results.ExternalRun`: the fields the file has; the rest None) plus per-request output
tok/s where the file has them.  No file pairs its requests with specdash's by prompt, so
:func:`unpaired_comparison` compares the geometric means of the per-request tok/s with an independent
bootstrap per side (or, without per-request figures, the run throughputs, with no interval).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdash.results import OUTPUT_TOK_S, ExternalRun
from specdash.sglang.positions import accept_fields, from_unconditional

AIPERF_FILE = "profile_export_aiperf.json"
AIPERF_RECORDS = "profile_export.jsonl"


class ExternalFormatError(ValueError):
    """A file that is neither a vLLM ``bench serve`` result nor an AIPerf export (or is broken)."""


@dataclass
class ExternalSide:
    """One side read from another tool: ``tool`` (``"vllm bench serve"`` / ``"aiperf"``), ``name``, ``path``,
    ``run`` (RUN-shaped dict), ``request_tok_s`` (per successful request: output tokens ÷ e2e latency, s⁻¹;
    empty when the file has no per-request data) and ``notes`` (what the file does not say)."""

    tool: str
    name: str
    path: Path
    run: ExternalRun
    request_tok_s: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def is_external(path: str | Path) -> bool:
    """Whether ``path`` looks like another tool's result (a JSON file, or a directory holding
    :data:`AIPERF_FILE`) rather than a specdash run directory (which has ``manifest.json``)."""
    p = Path(path)
    if p.is_dir():
        return (p / AIPERF_FILE).is_file() and not (p / "manifest.json").is_file()
    return p.is_file() and p.suffix.lower() == ".json"


def load_external(path: str | Path) -> ExternalSide:
    """Read a vLLM ``bench serve`` result or an AIPerf export (module docstring).

    Raises:
        ExternalFormatError: unreadable, not JSON, or neither format (the message says which keys
            each format has).
    """
    p = Path(path)
    f = p / AIPERF_FILE if p.is_dir() else p
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExternalFormatError(f"{f}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ExternalFormatError(f"{f}: not JSON ({exc})") from None
    if isinstance(data, dict) and "output_throughput" in data and "completed" in data:
        return _vllm(f, data)
    if isinstance(data, dict) and _metric(data, "output_token_throughput") is not None:
        return _aiperf(f, data)
    raise ExternalFormatError(
        f"{f}: neither a vLLM `bench serve --save-result` file (keys completed, duration, output_throughput, "
        f"mean_ttft_ms …) nor AIPerf's {AIPERF_FILE} (output_token_throughput: {{unit, avg, …}}); a specdash run is "
        "a directory with manifest.json and summary.json")


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _vllm_dist(d: Mapping[str, Any], name: str) -> dict[str, float] | None:
    out = {"mean": _num(d.get(f"mean_{name}_ms")), "p50": _num(d.get(f"median_{name}_ms"))}
    for q in ("90", "95", "99", "99.9"):
        if _num(d.get(f"p{q}_{name}_ms")) is not None:
            out[f"p{q}"] = _num(d.get(f"p{q}_{name}_ms"))
    return out if any(v is not None for v in out.values()) else None


def _vllm(path: Path, d: Mapping[str, Any]) -> ExternalSide:
    completed = int(d.get("completed") or 0)
    out_tok = _num(d.get("total_output_tokens"))
    notes = []
    rate = d.get("request_rate")
    tok_s: list[float] = []
    lens, ttfts, itls = d.get("output_lens"), d.get("ttfts"), d.get("itls")
    if isinstance(lens, list) and isinstance(ttfts, list) and isinstance(itls, list):
        for n, t, gaps in zip(lens, ttfts, itls):
            e2e = (_num(t) or 0.0) + sum(_num(g) or 0.0 for g in gaps or [])
            if _num(n) and e2e > 0:
                tok_s.append(float(n) / e2e)
    else:
        notes.append("no per-request figures (run vllm bench serve with --save-detailed): compared by run throughput, "
                     "with no interval")
    run = ExternalRun(
        profile=str(d.get("label") or d.get("model_id") or path.stem), tool="vllm bench serve",
        model=d.get("model_id"), requests=completed, failed_requests=_num(d.get("failed")),
        output_tokens=out_tok, duration_s=_num(d.get("duration")), output_tok_s=_num(d.get("output_throughput")),
        request_throughput=_num(d.get("request_throughput")),
        ttft_ms=_vllm_dist(d, "ttft"), tpot_ms=_vllm_dist(d, "tpot"), itl_ms=_vllm_dist(d, "itl"),
        e2e_ms=_vllm_dist(d, "e2el"), concurrency=d.get("max_concurrency"),
        request_rate=None if rate in (None, "inf") and d.get("max_concurrency") else rate,
        mean_output_tokens=(out_tok / completed) if out_tok and completed else None,
        prompts=d.get("num_prompts"),
        accept_length=_num(d.get("spec_decode_acceptance_length")),
        accept_rate=(_num(d.get("spec_decode_acceptance_rate")) or 0.0) / 100.0
        if _num(d.get("spec_decode_acceptance_rate")) is not None else None,
        accept_histogram=None, accept_by_position=None, accept_by_position_source=None,
    )
    per_pos = d.get("spec_decode_per_position_acceptance_rates")
    if isinstance(per_pos, list) and per_pos:
        try:
            drafts = d.get("spec_decode_num_drafts")
            run["accept_by_position"] = from_unconditional(per_pos, int(drafts) if _num(drafts) else None)
            run["accept_by_position_source"] = "server"
        except ValueError as exc:
            raise ExternalFormatError(f"{path}: spec_decode_per_position_acceptance_rates: {exc}") from None
    return ExternalSide("vllm bench serve", run["profile"], path, run, tok_s, notes)


def _metric(d: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    m = d.get(name)
    if isinstance(m, Mapping) and _num(m.get("avg")) is not None:
        return m
    recs = d.get("records")  # some AIPerf releases nest the metrics under "records"
    if isinstance(recs, Mapping) and isinstance(recs.get(name), Mapping) and _num(recs[name].get("avg")) is not None:
        return recs[name]
    return None


def _aiperf_dist(d: Mapping[str, Any], name: str, scale: float = 1.0) -> dict[str, float] | None:
    m = _metric(d, name)
    if m is None:
        return None
    out = {"mean": _num(m.get("avg"))}
    for q in ("p50", "p90", "p95", "p99", "max"):
        if _num(m.get(q)) is not None:
            out[q] = float(m[q]) * scale
    out["mean"] = out["mean"] * scale if out["mean"] is not None else None
    return out


def _avg(d: Mapping[str, Any], name: str) -> float | None:
    m = _metric(d, name)
    return _num(m.get("avg")) if m is not None else None


def _aiperf(path: Path, d: Mapping[str, Any]) -> ExternalSide:
    cfg = d.get("input_config") if isinstance(d.get("input_config"), Mapping) else {}
    loadgen = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), Mapping) else {}
    prompt = ((cfg.get("input") or {}).get("prompt") or {}) if isinstance(cfg.get("input"), Mapping) else {}
    osl = (prompt.get("output_tokens") or {}) if isinstance(prompt, Mapping) else {}
    names = (cfg.get("endpoint") or {}).get("model_names") if isinstance(cfg.get("endpoint"), Mapping) else None
    requests = _avg(d, "request_count")
    hist_raw = d.get("pooled_spec_decode_acceptance_histogram")
    hist = None
    if isinstance(hist_raw, Mapping) and hist_raw:
        try:
            pairs = {int(k): int(v) for k, v in hist_raw.items()}
        except (TypeError, ValueError):
            raise ExternalFormatError(f"{path}: pooled_spec_decode_acceptance_histogram is not {{count: steps}}") from None
        hist = [pairs.get(k, 0) for k in range(max(pairs) + 1)]
    run = ExternalRun(
        profile=str((names or [None])[0] or path.parent.name), tool="aiperf", model=(names or [None])[0],
        requests=int(requests) if requests is not None else None, failed_requests=_num(d.get("error_request_count")),
        output_tokens=_avg(d, "total_osl"), duration_s=_avg(d, "benchmark_duration"),
        output_tok_s=_avg(d, "output_token_throughput"), request_throughput=_avg(d, "request_throughput"),
        ttft_ms=_aiperf_dist(d, "time_to_first_token"), tpot_ms=_aiperf_dist(d, "inter_token_latency"),
        itl_ms=None, e2e_ms=_aiperf_dist(d, "request_latency"),
        concurrency=loadgen.get("concurrency"), request_rate=loadgen.get("request_rate"),
        mean_output_tokens=_avg(d, "output_sequence_length"), asked_output_tokens=osl.get("mean"),
        prompts=int(requests) if requests is not None else None,
        accept_length=None, accept_rate=None, accept_histogram=hist,
        **accept_fields(hist),
    )
    tok_s = _aiperf_records(path.parent / AIPERF_RECORDS)
    notes = [] if tok_s else [f"no {AIPERF_RECORDS} beside it: compared by run throughput, with no interval"]
    return ExternalSide("aiperf", run["profile"], path, run, tok_s, notes)


def _aiperf_records(path: Path) -> list[float]:
    """Per-request output tok/s from AIPerf's ``profile_export.jsonl`` (successful records only)."""
    out: list[float] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for ln in lines:
        try:
            rec = json.loads(ln)
        except ValueError:
            continue
        m = rec.get("metrics") if isinstance(rec, dict) and not rec.get("error") else None
        if not isinstance(m, dict):
            continue
        lat = _num((m.get("request_latency") or {}).get("value"))
        n = _num((m.get("output_sequence_length") or m.get("output_token_count") or {}).get("value"))
        if lat and n and lat > 0:
            out.append(n / (lat / 1000.0))
    return out


def unpaired_comparison(a_name: str, a_tok_s: Sequence[float], a_run_tok_s: float | None,
                        b_name: str, b_tok_s: Sequence[float], b_run_tok_s: float | None, *,
                        n_boot: int = 4999, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """B over A without pairs (the sides' requests cannot be matched by prompt): the ratio of the
    geometric means of the per-request output tok/s, its interval from an independent percentile
    bootstrap of each side (``n_boot`` resamples, seeded), the verdict as for a paired A/B
    (:func:`specdash.bench.stats.paired_speedup`'s words: the interval above, below or across 1).
    With fewer than 2 per-request figures on a side: the ratio of the run throughputs, no interval,
    verdict ``"throughput ratio only"``.  ``method`` says which."""
    import numpy as np

    from specdash.bench.stats import _verdict

    a = np.asarray([x for x in a_tok_s if x and x > 0 and math.isfinite(x)], float)
    b = np.asarray([x for x in b_tok_s if x and x > 0 and math.isfinite(x)], float)
    base = {"a": a_name, "b": b_name, "metric": OUTPUT_TOK_S, "pairs": 0, "per_prompt": [], "per_category": {},
            "baseline": None, "confidence": confidence}
    if len(a) >= 2 and len(b) >= 2:
        la, lb = np.log(a), np.log(b)
        rng = np.random.default_rng(seed)
        boot = (lb[rng.integers(0, len(lb), (n_boot, len(lb)))].mean(axis=1)
                - la[rng.integers(0, len(la), (n_boot, len(la)))].mean(axis=1))
        lo, hi = np.exp(np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2]))
        return {**base, "speedup": float(math.exp(lb.mean() - la.mean())), "ci95": [float(lo), float(hi)],
                "verdict": _verdict(float(lo), float(hi)),
                "method": f"unpaired: ratio of geometric-mean per-request tok/s, independent bootstrap ({n_boot})",
                "requests": {"a": len(a), "b": len(b)}}
    ratio = (b_run_tok_s / a_run_tok_s) if a_run_tok_s and b_run_tok_s else None
    return {**base, "speedup": ratio, "ci95": None, "verdict": "throughput ratio only",
            "method": "unpaired: ratio of the run output throughputs (no per-request figures on a side)",
            "requests": {"a": len(a), "b": len(b)}}
