"""Build ``comparison.json`` (the shape below) from two lists of per-request records.

Input records are the JSON lines the runner writes, one per finished request (plain dicts)::

    {"prompt_index": int, "repeat": int, "category": str | None, "completion_tokens": int,
     "e2e_s": float, "ttft_s": float | None, "tpot_s": float | None, "ok": bool,
     "spec": {"verify_ct", "correct_drafts", "proposed_drafts", "histogram"} | None}

Definitions (units in the key names):

* paired unit: ``(prompt_index, repeat)``; only requests with ``ok`` true, ``e2e_s > 0`` and
  ``completion_tokens > 0`` on *both* sides are paired; the rest are counted in ``excluded``;
* per-request output tok/s = ``completion_tokens / e2e_s`` (the metric, ``output_tok_s``);
* speedup = B over A = geometric mean of the paired ratios, interval and verdict from
  :func:`specdash.bench.stats.paired_speedup` (bootstrap over pairs);
* accept length (bonus included, as SGLang's ``spec_accept_length``) = Σ completion_tokens / Σ verify_ct and
  accept rate (bonus excluded) = Σ correct_drafts / Σ proposed_drafts, pooled over the
  requests that carry ``spec``; None without speculation;
* ``tpot_ms`` / ``ttft_ms``: mean over the paired requests, in ms;
* ``tok_s``: mean per-request tok/s over the paired requests of the group.

Output (field order fixed for scripts that read it; keys after ``baseline`` are additions)::

    {"a", "b", "metric", "speedup", "ci95": [lo, hi], "verdict", "pairs",
     "per_prompt": [ROW, ...], "per_category": {cat: {...}}, "baseline": {...} | None,
     "overall": {"a": SIDE, "b": SIDE}, "confidence", "method", "excluded", "notes"}

``metric`` is ``output_tok_s`` (:data:`specdash.results.OUTPUT_TOK_S`): the per-request figure compared.

ROW (flat, the same columns as comparison.csv): ``prompt_index, category, pairs, a_tok_s,
b_tok_s, a_tpot_ms, b_tpot_ms, a_ttft_ms, b_ttft_ms, a_accept_length, b_accept_length,
a_accept_rate, b_accept_rate, speedup``.

SIDE: ``{"requests", "tok_s", "tpot_ms", "ttft_ms", "accept_length", "accept_rate",
"accept_histogram", "accept_by_position", "accept_by_position_source"}`` (the last two as a RUN's:
:mod:`specdash.sglang.positions`).

``per_category[cat]``: ``{"pairs", "speedup", "ci95", "verdict", "a": SIDE, "b": SIDE}``; only
when at least one prompt is tagged (untagged prompts then go to "uncategorized").

``baseline`` (when a baseline profile R is named): ``{"name": R, "a": CMP, "b": CMP}`` where CMP
is the same core comparison (``a`` = R, ``b`` = the side, ``metric``, ``speedup``, ``ci95``,
``verdict``, ``pairs``, ``per_prompt``, ``per_category``) of that side against the baseline.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specdash.bench.stats import geometric_mean, paired_speedup
from specdash.results import OUTPUT_TOK_S, ComparisonReport
from specdash.sglang.effective import SpecSettings
from specdash.sglang.positions import accept_fields

UNCATEGORIZED = "uncategorized"

CSV_COLUMNS = (
    "prompt_index",
    "category",
    "pairs",
    "a_tok_s",
    "b_tok_s",
    "a_tpot_ms",
    "b_tpot_ms",
    "a_ttft_ms",
    "b_ttft_ms",
    "a_accept_length",
    "b_accept_length",
    "a_accept_rate",
    "b_accept_rate",
    "speedup",
)

Record = Mapping[str, Any]
Key = tuple[int, int]


def request_tok_s(rec: Record) -> float | None:
    """completion_tokens / e2e_s for a usable record, else None."""
    try:
        toks = float(rec.get("completion_tokens") or 0)
        e2e = float(rec.get("e2e_s") or 0)
    except (TypeError, ValueError):
        return None
    if not rec.get("ok", True) or toks <= 0 or e2e <= 0 or not math.isfinite(e2e):
        return None
    return toks / e2e


def _index(records: Iterable[Record]) -> tuple[dict[Key, Record], int]:
    """Usable records keyed by (prompt_index, repeat); the count of unusable ones.

    A duplicated key keeps the last record (a resumed run may re-run a request).
    """
    out: dict[Key, Record] = {}
    bad = 0
    for rec in records:
        if request_tok_s(rec) is None:
            bad += 1
            continue
        out[(int(rec["prompt_index"]), int(rec.get("repeat", 0) or 0))] = rec
    return out, bad


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(vals) / len(vals) if vals else None


def pooled_histogram(records: Iterable[Record]) -> list[int] | None:
    """Element-wise sum of the per-request correct-drafts histograms (index k = rounds that
    accepted k drafts, bonus excluded; SGLang's ``spec_correct_drafts_histogram``).  None when no record has one."""
    total: list[int] = []
    seen = False
    for rec in records:
        spec = rec.get("spec") or {}
        hist = spec.get("histogram")
        if not hist:
            continue
        seen = True
        if len(hist) > len(total):
            total.extend([0] * (len(hist) - len(total)))
        for k, c in enumerate(hist):
            total[k] += int(c)
    return total if seen else None


def side_stats(records: Sequence[Record], effective: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Aggregate one side's records: mean tok/s, TPOT and TTFT (ms), pooled acceptance, and acceptance
    by draft position from the pooled histogram (:func:`specdash.sglang.positions.accept_fields`; its
    positions run to the side's ``effective`` steps / draft tokens when given, a RUN's ``effective``)."""
    toks = verify = correct = proposed = 0.0
    for rec in records:
        spec = rec.get("spec") or None
        if spec and spec.get("verify_ct"):
            toks += float(rec.get("completion_tokens") or 0)
            verify += float(spec.get("verify_ct") or 0)
            correct += float(spec.get("correct_drafts") or 0)
            proposed += float(spec.get("proposed_drafts") or 0)
    tpot = _mean(rec.get("tpot_s") for rec in records)
    ttft = _mean(rec.get("ttft_s") for rec in records)
    hist = pooled_histogram(records)
    read = SpecSettings.from_effective(effective)
    return {
        "requests": len(records),
        "tok_s": _mean(request_tok_s(rec) for rec in records),
        "tpot_ms": None if tpot is None else tpot * 1000.0,
        "ttft_ms": None if ttft is None else ttft * 1000.0,
        "accept_length": toks / verify if verify > 0 else None,
        "accept_rate": correct / proposed if proposed > 0 else None,
        "accept_histogram": hist,
        **accept_fields(hist, read.steps, read.draft_tokens),
    }


def _category(ra: Record, rb: Record) -> str | None:
    return ra.get("category") or rb.get("category") or None


def _core(
    a_name: str,
    b_name: str,
    a_idx: dict[Key, Record],
    b_idx: dict[Key, Record],
    *,
    n_boot: int,
    seed: int | None,
    confidence: float,
) -> dict[str, Any]:
    keys = sorted(set(a_idx) & set(b_idx))
    a_vals = [request_tok_s(a_idx[k]) for k in keys]
    b_vals = [request_tok_s(b_idx[k]) for k in keys]
    overall = paired_speedup(a_vals, b_vals, n_boot=n_boot, seed=seed, confidence=confidence)

    by_prompt: dict[int, list[Key]] = defaultdict(list)
    for k in keys:
        by_prompt[k[0]].append(k)
    tagged = any(_category(a_idx[k], b_idx[k]) for k in keys)

    rows = []
    for p in sorted(by_prompt):
        ks = by_prompt[p]
        ra = [a_idx[k] for k in ks]
        rb = [b_idx[k] for k in ks]
        sa, sb = side_stats(ra), side_stats(rb)
        ratios = [request_tok_s(y) / request_tok_s(x) for x, y in zip(ra, rb, strict=True)]
        cat = _category(ra[0], rb[0])
        rows.append(
            {
                "prompt_index": p,
                "category": cat if cat or not tagged else UNCATEGORIZED,
                "pairs": len(ks),
                "a_tok_s": sa["tok_s"],
                "b_tok_s": sb["tok_s"],
                "a_tpot_ms": sa["tpot_ms"],
                "b_tpot_ms": sb["tpot_ms"],
                "a_ttft_ms": sa["ttft_ms"],
                "b_ttft_ms": sb["ttft_ms"],
                "a_accept_length": sa["accept_length"],
                "b_accept_length": sb["accept_length"],
                "a_accept_rate": sa["accept_rate"],
                "b_accept_rate": sb["accept_rate"],
                "speedup": geometric_mean(ratios),
            }
        )

    per_category: dict[str, Any] = {}
    if tagged:
        groups: dict[str, list[Key]] = defaultdict(list)
        for k in keys:
            groups[_category(a_idx[k], b_idx[k]) or UNCATEGORIZED].append(k)
        for cat in sorted(groups):
            ks = groups[cat]
            ra = [a_idx[k] for k in ks]
            rb = [b_idx[k] for k in ks]
            res = paired_speedup([request_tok_s(r) for r in ra], [request_tok_s(r) for r in rb],
                                 n_boot=n_boot, seed=seed, confidence=confidence)
            per_category[cat] = {**res.to_json(), "a": side_stats(ra), "b": side_stats(rb)}

    return {
        "a": a_name,
        "b": b_name,
        "metric": OUTPUT_TOK_S,
        "speedup": overall.speedup,
        "ci95": [overall.ci95[0], overall.ci95[1]],
        "verdict": overall.verdict,
        "pairs": overall.pairs,
        "per_prompt": rows,
        "per_category": per_category,
        "_result": overall,
        "_keys": keys,
    }


def build_comparison(
    a_records: Sequence[Record],
    b_records: Sequence[Record],
    *,
    a_name: str = "A",
    b_name: str = "B",
    baseline_records: Sequence[Record] | None = None,
    baseline_name: str | None = None,
    n_boot: int = 4999,
    seed: int | None = 0,
    confidence: float = 0.95,
    a_effective: Mapping[str, Any] | None = None,
    b_effective: Mapping[str, Any] | None = None,
) -> ComparisonReport:
    """The ``comparison.json`` dict for B over A (and, when given, each side over the baseline).

    ``seed`` fixes the bootstrap resampling so a report is reproducible; ``confidence`` is the
    interval level (the key stays ``ci95`` as the contract says).  ``a_effective`` / ``b_effective``:
    each side's RUN ``effective`` settings, for the depth of its ``overall`` ``accept_by_position``.
    """
    a_idx, a_bad = _index(a_records)
    b_idx, b_bad = _index(b_records)
    core = _core(a_name, b_name, a_idx, b_idx, n_boot=n_boot, seed=seed, confidence=confidence)
    res = core.pop("_result")
    keys = core.pop("_keys")
    notes = list(res.notes)

    baseline = None
    if baseline_records is not None:
        r_name = baseline_name or "baseline"
        r_idx, r_bad = _index(baseline_records)
        baseline = {"name": r_name, "excluded": r_bad}
        for side, idx, name in (("a", a_idx, a_name), ("b", b_idx, b_name)):
            sub = _core(r_name, name, r_idx, idx, n_boot=n_boot, seed=seed, confidence=confidence)
            sub.pop("_keys")
            sub_res = sub.pop("_result")
            if sub_res.notes:
                sub["notes"] = list(sub_res.notes)
            baseline[side] = sub
        baseline["overall"] = side_stats(list(r_idx.values()))

    paired_a = [a_idx[k] for k in keys]
    paired_b = [b_idx[k] for k in keys]
    unpaired_a = len(set(a_idx) - set(b_idx))
    unpaired_b = len(set(b_idx) - set(a_idx))
    if unpaired_a or unpaired_b:
        notes.append(f"unpaired requests left out: {unpaired_a} of A, {unpaired_b} of B")
    if a_bad or b_bad:
        notes.append(f"failed or empty requests left out: {a_bad} of A, {b_bad} of B")
    return {
        **core,
        "baseline": baseline,
        "overall": {"a": side_stats(paired_a, a_effective), "b": side_stats(paired_b, b_effective)},
        "confidence": confidence,
        "method": res.method,
        "excluded": {"a_failed": a_bad, "b_failed": b_bad, "a_unpaired": unpaired_a, "b_unpaired": unpaired_b},
        "notes": notes,
    }


#: What a :func:`shape_differences` reason names, per ``request_shape`` / ``sampling`` key.
_SHAPE_WORDS = {"api": "API", "prompts": "number of prompts", "prompts_sha256": "prompts",
                "max_new_tokens": "max_tokens", "temperature": "temperature", "ignore_eos": "ignore_eos"}


def _shapes(runs: Sequence[Mapping[str, Any]]) -> dict[str, set]:
    """Each request-shape key → the set of values a side's RUNs had (RUNs before ``request_shape`` existed:
    their ``max_tokens`` and ``suite``)."""
    out: dict[str, set] = defaultdict(set)
    for r in runs:
        shape = r.get("request_shape")
        if isinstance(shape, Mapping):
            for k, v in shape.items():
                if k == "sampling" and isinstance(v, Mapping):
                    for sk, sv in v.items():
                        out[sk].add(json_key(sv))
                elif k != "sampling":
                    out[k].add(json_key(v))
        else:
            if r.get("max_tokens") is not None:
                out["max_new_tokens"].add(json_key(r.get("max_tokens")))
            if r.get("suite") is not None:
                out["suite"].add(json_key(r.get("suite")))
    return out


def json_key(v: Any) -> Any:
    """A hashable, comparable stand-in for a JSON value (lists and dicts as sorted JSON text)."""
    if isinstance(v, (list, dict)):
        import json

        return json.dumps(v, sort_keys=True)
    return v


def shape_differences(a_runs: Sequence[Mapping[str, Any]], b_runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why two sides did not send the same requests, one reason per differing key of their RUNs'
    ``request_shape`` (:func:`specdash.bench.load.request_shape`: API, max_tokens, temperature, ignore_eos
    and the other sampling parameters, the prompts themselves by digest); a side's key it does not
    record is not judged.  RUNs written before ``request_shape`` existed are judged by ``max_tokens`` and
    the suite's name.  [] when the shapes match: a paired speedup between them means something;
    otherwise its verdict is "not comparable" (a speedup over different requests measures the
    requests, e.g. 1024 tokens against 128, not the settings)."""
    sa, sb = _shapes(a_runs), _shapes(b_runs)
    out = []
    for key in [k for k in sa if k in sb]:
        if sa[key] != sb[key]:
            what = _SHAPE_WORDS.get(key, key)
            if key == "prompts_sha256":
                out.append("the prompts differ (another suite, dataset sample or prompt text: no pair is the same "
                           "request on both sides)")
                continue
            fa = ", ".join(map(str, sorted(sa[key], key=str)))
            fb = ", ".join(map(str, sorted(sb[key], key=str)))
            out.append(f"{what} {fa} (A) vs {fb} (B)")
    return out


#: The verdict of a comparison whose sides sent different requests (:func:`shape_differences`).
NOT_COMPARABLE = "not comparable"


def mark_not_comparable(cmp: dict[str, Any], reasons: Sequence[str]) -> dict[str, Any]:
    """Set ``comparable`` on a comparison dict and, when ``reasons`` is not empty, make its verdict
    :data:`NOT_COMPARABLE` (the per-category ones too) with ``not_comparable`` = the reasons.  The
    speedup stays, for the record, but no verdict of faster or slower is drawn from it."""
    cmp["comparable"] = not reasons
    cmp["not_comparable"] = list(reasons) or None
    if reasons:
        cmp["verdict"] = NOT_COMPARABLE
        for row in (cmp.get("per_category") or {}).values():
            row["verdict"] = NOT_COMPARABLE
    return cmp
