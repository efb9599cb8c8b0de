"""What ``specdash compare`` compares: two specdash run directories, other tools' result files as a
side, and N sides at once (:mod:`specdash.commands.report` holds the command's arguments and output).

* Two specdash run directories (:func:`compare_dirs`): their ``requests.jsonl`` records paired by prompt
  and repeat, per point for two sweeps (the top level pools every shared point), the break-even where
  the curve crosses 1.
* Two sides, one of them a vLLM ``bench serve`` result or an AIPerf export
  (:mod:`specdash.bench.external`): the requests cannot be paired by prompt, so the comparison is
  unpaired (:func:`specdash.bench.external.unpaired_comparison`: geometric means of the per-request
  output tok/s with an independent bootstrap, or the run throughputs).  Its verdict is "not
  comparable" when the output lengths differ by more than :data:`OUTPUT_LEN_TOLERANCE` (a specdash
  side's ``max_tokens`` with ``ignore_eos`` against the other's mean output tokens); that the prompts
  are the same cannot be checked across tools and is said in a note.
* Three or more sides: one table (tok/s, TTFT / TPOT / ITL p50, accept length and rate, acceptance
  by draft position, speedup over the first side, the reference) — as ``vllm bench sweep plot`` sets
  several runs side by side — and for specdash sweeps an overlay of output tok/s per load point.  Each
  side against the reference is the paired comparison where both are specdash runs
  (``specdash compare A B``'s), else the unpaired one.  ``--json``: ``{"reference", "sides": [SIDE],
  "comparisons": [comparison of each side over the reference], "overlay": {variable, points} | None}``
  (a comparison's ``_failed``, the sides whose verification failed, is for the command to withhold).

Imports stay inside the functions (``specdash compare --help`` loads none of this).
"""

from __future__ import annotations

import math
from typing import Any

from specdash.commands.errors import UsageError
from specdash.results import output_tok_s

#: Output lengths (tokens per request) further apart than this fraction make two sides not comparable.
OUTPUT_LEN_TOLERANCE = 0.05


def _run_source(path: str):
    """The run directory at ``path`` as a report source (a usage error for a compare or tune directory, or no records)."""
    from specdash.bench.sources import ReportError, load_source

    try:
        src = load_source(path)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    if src.kind != "run":
        what = "an A/B compare directory (comparison.json)" if src.kind == "compare" else "a tune directory"
        raise UsageError(f"{path} is {what}, not a run directory: `specdash report {path}` shows it")
    if not src.records:
        raise UsageError(f"{path} has no request records (requests.jsonl is missing or empty): nothing to compare")
    return src


def _points(src, var: str = "concurrency") -> list:
    """The values of the ``var`` axis its RUNs ran at (sorted; a single RUN's one value)."""
    from specdash.bench.sources import is_point

    return sorted({r.get(var) for r in src.runs if is_point(r.get(var))})


def compare_dirs(dir_a: str, dir_b: str, *, concurrency: int | None = None) -> dict:
    """The comparison of run directory B over A (see :mod:`specdash.commands.report`); ``runs`` = the two directories.

    Raises:
        UsageError: a directory is missing, not a run directory or has no records; ``concurrency`` is not
            one both ran; two sweeps share no concurrency.
    """
    from specdash.bench.compare import build_comparison, mark_not_comparable, shape_differences
    from specdash.bench.points import axis_name, break_even, throughput_ratio
    from specdash.bench.sources import sources_sweep_var, sweep_speedups

    a, b = _run_source(dir_a), _run_source(dir_b)
    a_name, b_name = a.name, b.name
    if a_name == b_name:
        a_name, b_name = f"{a_name} ({a.path.name})", f"{b_name} ({b.path.name})"
    kinds = {s.sweep_var for s in (a, b) if s.manifest.get("sweep")}
    if len(kinds) > 1:
        raise UsageError(f"{dir_a} and {dir_b} swept different axes (one concurrency, one request rate): compare "
                         "two concurrency sweeps or two request-rate sweeps")
    var = sources_sweep_var([a, b])
    name = axis_name(var)
    if concurrency is not None and var != "concurrency":
        raise UsageError("--concurrency picks a point of two concurrency sweeps; these are request-rate sweeps "
                         "(compared over every rate they share)")
    ca, cb = _points(a, var), _points(b, var)
    shared = sorted(set(ca) & set(cb))
    notes: list[str] = []
    if concurrency is not None:
        if concurrency not in shared:
            raise UsageError(f"--concurrency {concurrency}: A ran at {ca or 'an unknown concurrency'}, "
                             f"B at {cb or 'an unknown concurrency'}")
        shared = [concurrency]
    if not shared:
        if len(ca) > 1 or len(cb) > 1:
            raise UsageError(f"the two sweeps share no {name} (A: {ca}, B: {cb})")
        recs_a, recs_b = a.records, b.records
        if ca != cb:
            notes.append(f"A ran at {name} {ca[0] if ca else '?'}, B at {cb[0] if cb else '?'}: "
                         "compared as they are, not at the same load")
    else:
        # each pair stays within its point: the repeat index is made unique per point
        span = 1 + max(int(r.get("repeat", 0) or 0) for r in [*a.records, *b.records])

        def at(src, c, k):
            return [dict(r, repeat=k * span + int(r.get("repeat", 0) or 0)) for r in src.records_at(c, var)]

        recs_a = [r for k, c in enumerate(shared) for r in at(a, c, k)]
        recs_b = [r for k, c in enumerate(shared) for r in at(b, c, k)]
        if len(shared) > 1:
            plural = "concurrencies" if var == "concurrency" else "request rates (requests/s)"
            notes.append(f"pooled over {plural} {', '.join(f'{x:g}' for x in shared)} (pairs matched within each "
                         f"point); per_{var} has each point")
    cmp = build_comparison(recs_a, recs_b, a_name=a_name, b_name=b_name,
                           a_effective=(a.runs[0] if a.runs else {}).get("effective"),
                           b_effective=(b.runs[0] if b.runs else {}).get("effective"))
    if not cmp.get("pairs"):
        raise UsageError(f"no request of {dir_a} pairs with one of {dir_b} (same prompt and repeat, both finished): "
                         "were they run with the same suite?")
    # different request shapes pair by prompt and repeat all the same: the verdict says they are not comparable
    mark_not_comparable(cmp, shape_differences(a.runs, b.runs))
    if var != "request_rate":
        va = {r.get("request_rate") for r in a.runs} - {None}
        vb = {r.get("request_rate") for r in b.runs} - {None}
        if va and vb and va != vb:
            notes.append(f"A and B ran at different request rates (A: {', '.join(map(str, sorted(va, key=str)))}; "
                         f"B: {', '.join(map(str, sorted(vb, key=str)))}): not at the same load")
    for key in ("suite",):
        va, vb = {r.get(key) for r in a.runs} - {None}, {r.get(key) for r in b.runs} - {None}
        if va and vb and va != vb and cmp.get("comparable", True):
            notes.append(f"A and B name different suites ({', '.join(sorted(map(str, va)))} vs "
                         f"{', '.join(sorted(map(str, vb)))}) but sent the same requests (same prompts digest)")
    if a.path.resolve() == b.path.resolve():
        notes.append("A and B are the same run directory: every pair compares a request with itself")
    unpaired = len(recs_a) - cmp.get("pairs", 0), len(recs_b) - cmp.get("pairs", 0)
    if max(unpaired) > 0:
        notes.append(f"{unpaired[0]} of A's and {unpaired[1]} of B's records found no partner (same prompt and "
                     "repeat) and are left out")
    cmp["notes"] = [*cmp.get("notes", []), *notes]
    if len(shared) > 1:
        pts = [{var: p[var], "a_tok_s": p["baseline_tok_s"], "b_tok_s": output_tok_s(p),
                "throughput_ratio": throughput_ratio(output_tok_s(p), p["baseline_tok_s"]),
                "speedup": p["speedup"], "ci95": p["ci95"], "verdict": p["verdict"], "pairs": p["pairs"]}
               for p in sweep_speedups(b, a, var) if p[var] in shared]
        be, be_ci, note = break_even(pts, var, subject=f"B ({b_name}) over A ({a_name})")
        cmp.update({f"per_{var}": pts, f"break_even_{var}": be, "break_even_ci95": be_ci, "break_even_note": note})
    cmp["runs"] = [str(a.path), str(b.path)]
    cmp["_failed"] = sorted({r.get("profile") or s.name for s in (a, b) for r in s.runs
                             if (r.get("verification") or {}).get("status") == "failed"})
    return cmp



class Side:
    """One side of a comparison: a specdash run directory (``source``, a :class:`specdash.bench.sources.Source`)
    or another tool's result (``external``); ``run`` is its RUN (the one at ``point`` of a sweep)."""

    def __init__(self, path: str, *, point: int | None = None) -> None:
        from specdash.bench.external import ExternalFormatError, is_external, load_external

        self.path = path
        self.source = None
        self.external = None
        if is_external(path):
            try:
                self.external = load_external(path)
            except ExternalFormatError as exc:
                raise UsageError(str(exc)) from None
            self.name = f"{self.external.name} ({self.external.tool})"
            self.runs = [self.external.run]
        else:
            self.source = _run_source(path)
            self.name = self.source.name
            self.runs = list(self.source.runs)
        self.point = point
        self.run = self._pick(point)

    def _pick(self, point: int | None) -> dict:
        if point is not None:
            hit = [r for r in self.runs if r.get("concurrency") == point]
            if not hit:
                raise UsageError(f"--concurrency {point}: {self.path} ran at "
                                 f"{sorted({r.get('concurrency') for r in self.runs}, key=str)}")
            return hit[0]
        return self.runs[0] if self.runs else {}

    @property
    def tool(self) -> str:
        return self.external.tool if self.external else "specdash"

    def request_tok_s(self) -> list[float]:
        """Per successful request output tok/s (at ``point`` for a sweep)."""
        if self.external is not None:
            return list(self.external.request_tok_s)
        from specdash.bench.compare import request_tok_s

        recs = self.source.records if self.point is None else self.source.records_at(self.point, "concurrency")
        return [v for v in (request_tok_s(r) for r in recs) if v is not None]

    def output_len(self) -> tuple[float | None, str]:
        """(tokens per request the side asked for or produced, how it is known)."""
        r = self.run
        if self.external is None:
            shape = r.get("request_shape") or {}
            eos = (shape.get("sampling") or {}).get("ignore_eos", True)
            if r.get("max_tokens") and eos:
                return float(r["max_tokens"]), "max_tokens (ignore_eos)"
            if r.get("requests") and r.get("output_tokens"):
                return r["output_tokens"] / r["requests"], "mean output tokens"
            return None, "unknown"
        if r.get("asked_output_tokens"):
            return float(r["asked_output_tokens"]), "asked output tokens"
        return r.get("mean_output_tokens"), "mean output tokens"

    def summary(self) -> dict[str, Any]:
        r = self.run
        return dict(name=self.name, tool=self.tool, path=str(self.path), output_tok_s=output_tok_s(r),
                    ttft_ms_p50=(r.get("ttft_ms") or {}).get("p50"), tpot_ms_p50=(r.get("tpot_ms") or {}).get("p50"),
                    itl_ms_p50=(r.get("itl_ms") or {}).get("p50"), accept_length=r.get("accept_length"),
                    accept_rate=r.get("accept_rate"), accept_by_position=r.get("accept_by_position"),
                    accept_by_position_source=r.get("accept_by_position_source"),
                    concurrency=r.get("concurrency"), output_tokens_per_request=self.output_len()[0],
                    simulated=r.get("simulated"))


def length_difference(a: Side, b: Side) -> str | None:
    """Why ``a`` and ``b`` did not ask for the same output length (None when within tolerance or unknown)."""
    (la, how_a), (lb, how_b) = a.output_len(), b.output_len()
    if not la or not lb:
        return None
    if abs(la - lb) > OUTPUT_LEN_TOLERANCE * max(la, lb):
        return f"output length {la:g} tokens ({how_a}, A) vs {lb:g} ({how_b}, B)"
    return None


def compare_pair(a: Side, b: Side, *, concurrency: int | None = None) -> dict[str, Any]:
    """B over A: the paired comparison of two specdash run directories, else the unpaired one (module
    docstring), as a ``comparison.json``-shaped dict with ``overall`` sides and ``_failed``."""
    from specdash.bench.compare import mark_not_comparable
    from specdash.bench.external import unpaired_comparison

    if a.source is not None and b.source is not None:
        return compare_dirs(a.path, b.path, concurrency=concurrency)
    cmp = unpaired_comparison(a.name, a.request_tok_s(), output_tok_s(a.run),
                              b.name, b.request_tok_s(), output_tok_s(b.run))
    reasons = [x for x in (length_difference(a, b),) if x]
    mark_not_comparable(cmp, reasons)
    notes = ["the sides come from different tools: their requests cannot be paired by prompt, and whether they "
             "sent the same prompts cannot be checked — compare runs of the same dataset sample"]
    for s in (a, b):
        if s.external is not None:
            notes.extend(f"{s.name}: {n}" for n in s.external.notes)
    ca, cb = a.run.get("concurrency"), b.run.get("concurrency")
    if ca and cb and ca != cb:
        notes.append(f"A ran at concurrency {ca}, B at {cb}: not at the same load")
    cmp["notes"] = notes
    cmp["overall"] = {"a": _side_overall(a), "b": _side_overall(b)}
    cmp["runs"] = [str(a.path), str(b.path)]
    cmp["_failed"] = sorted({s.name for s in (a, b) if s.source is not None
                             for r in s.runs if (r.get("verification") or {}).get("status") == "failed"})
    return cmp


def _side_overall(s: Side) -> dict[str, Any]:
    r = s.run
    tok = s.request_tok_s()
    gm = math.exp(sum(math.log(x) for x in tok) / len(tok)) if tok else None
    return {"requests": r.get("requests"), "tok_s": gm if gm is not None else output_tok_s(r),
            "tpot_ms": (r.get("tpot_ms") or {}).get("mean"), "ttft_ms": (r.get("ttft_ms") or {}).get("mean"),
            "accept_length": r.get("accept_length"), "accept_rate": r.get("accept_rate"),
            "accept_histogram": r.get("accept_histogram"), "accept_by_position": r.get("accept_by_position"),
            "accept_by_position_source": r.get("accept_by_position_source"), "tool": s.tool}


def compare_many(paths: list[str], *, concurrency: int | None = None) -> dict[str, Any]:
    """Every side of ``paths`` over the first (module docstring); the ``--json`` payload of N ≥ 3 sides."""
    sides = [Side(p, point=concurrency) for p in paths]
    names = [s.name for s in sides]
    for i, s in enumerate(sides):  # a name twice: tell them apart by their directory or file
        if names.count(s.name) > 1:
            s.name = f"{s.name} [{i + 1}]"
    ref = sides[0]
    comparisons = []
    for s in sides[1:]:
        cmp = compare_pair(ref, s, concurrency=concurrency)  # keeps its "_failed" for the caller
        cmp["a"], cmp["b"] = ref.name, s.name
        comparisons.append(cmp)
    return {"reference": ref.name, "sides": [s.summary() for s in sides], "comparisons": comparisons,
            "overlay": _overlay(sides) if concurrency is None else None}


def _overlay(sides: list[Side]) -> dict[str, Any] | None:
    """Output tok/s (and accept length) per load point of every side that is a specdash sweep (or a single
    run at one load), as ``vllm bench sweep plot`` overlays runs on one load axis; None unless some side
    ran more than one point."""
    var = "concurrency"
    if not any(len({r.get(var) for r in s.runs if r.get(var) is not None}) > 1 for s in sides if s.source):
        return None
    pts = sorted({r.get(var) for s in sides for r in s.runs if isinstance(r.get(var), (int, float))})
    rows = []
    for x in pts:
        row: dict[str, Any] = {var: x}
        for s in sides:
            hit = [r for r in s.runs if r.get(var) == x]
            row[s.name] = dict(output_tok_s=output_tok_s(hit[0]), accept_length=hit[0].get("accept_length")) \
                if hit else None
        rows.append(row)
    return {"variable": var, "points": rows}


def render_many(payload: dict[str, Any]) -> str:
    """The N-side table, each side over the reference, and the overlay, as text."""
    from specdash.commands.tables import fmt

    sides = payload["sides"]
    by_name = {c["b"]: c for c in payload["comparisons"]}
    head = ["side", "tool", "tok/s", "TTFT p50", "TPOT p50", "ITL p50", "accept len", "accept rate",
            "by draft position", f"over {payload['reference']}"]
    rows = []
    for s in sides:
        c = by_name.get(s["name"])
        if c is None:
            vs = "reference"
        else:
            lo, hi = c.get("ci95") or (None, None)
            vs = f"×{fmt(c.get('speedup'), 3)} [{fmt(lo, 3)}, {fmt(hi, 3)}] {c.get('verdict')}"
        pos = " ".join(fmt(r.get("rate"), 2) for r in s.get("accept_by_position") or []) or "—"
        rows.append([s["name"] + (" (sim)" if s.get("simulated") else ""), s["tool"], fmt(output_tok_s(s)),
                     fmt(s.get("ttft_ms_p50"), 1), fmt(s.get("tpot_ms_p50"), 2), fmt(s.get("itl_ms_p50"), 2),
                     fmt(s.get("accept_length"), 2), fmt(s.get("accept_rate"), 3), pos, vs])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    out.append("speedup over the reference: paired per-request tok/s ratio (geometric mean, 95 % CI) between two "
               "specdash runs, else unpaired (independent bootstrap of each side); latencies in ms; by draft "
               "position = accepted ÷ reached")
    for c in payload["comparisons"]:
        for why in c.get("not_comparable") or []:
            out.append(f"  {c['b']}: not comparable with {c['a']}: {why}")
        for n in c.get("notes") or []:
            out.append(f"  {c['b']}: note: {n}")
    ov = payload.get("overlay")
    if ov:
        names = [s["name"] for s in sides]
        out.append(f"output tok/s per {ov['variable']} (accept length):")
        out.append("  " + "  ".join([f"{ov['variable']:>11}", *(n[:24].rjust(24) for n in names)]))
        for p in ov["points"]:
            cells = []
            for n in names:
                v = p.get(n)
                cells.append((f"{fmt(output_tok_s(v))} ({fmt(v.get('accept_length'), 2)})" if v else "—").rjust(24))
            out.append("  " + "  ".join([f"{p[ov['variable']]:>11g}", *cells]))
    return "\n".join(out)
