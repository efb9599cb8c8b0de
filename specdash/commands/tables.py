"""``--bench``'s tables as text: a run's (``render_table``, with its per-rank, acceptance-by-position,
breakdown, load and tier lines) and a comparison's (``render_comparison``, with ``withhold_speedup`` for a side
whose post-launch verification failed).  Used by ``--bench``, ``tune``, ``report`` and ``compare``."""

from __future__ import annotations

from specdash.bench.stats import MIN_PAIRS
from specdash.results import output_tok_s


def fmt(v, nd=1, unit="") -> str:
    if v is None:
        return "—"
    return f"{v:.{nd}f}{unit}"


def render_ranks(run: dict) -> list[str]:
    """The RUN's per-rank line (``ranks``: :func:`specdash.bench.adaptive.rank_breakdown`) and a warning
    for a rank whose device time stands out; nothing with one rank."""
    from specdash.bench.adaptive import SLOW_RANK_ABOVE, rank_label, slow_ranks

    ranks = run.get("ranks")
    if not ranks:
        return []
    parts = []
    for r in ranks:
        dev, tok = r.get("device_time_s"), r.get("decode_tokens")
        parts.append(f"{rank_label(r)} " + " ".join(
            x for x in ((f"{dev:.2f} s GPU" if dev is not None else ""),
                        (f"{tok:.0f} decode tokens" if tok is not None else "")) if x))
    out = ["  per rank (scheduler series in /metrics): " + " · ".join(parts)]
    for r in slow_ranks(ranks):
        out.append(f"  warning: {rank_label(r)} spent {r['vs_median']:.2f}× the median rank's GPU time (more than "
                   f"{SLOW_RANK_ABOVE:.0%} above): more work on that rank (DP), a heavier pipeline stage (PP) or a "
                   "slower GPU or link")
    return out


def render_table(runs: list[dict]) -> str:
    """The bench table: one row per run (p50s for latencies)."""
    head = ["profile", "reqs", "out tok", "tok/s", "TTFT p50", "TPOT p50", "ITL p50", "accept len",
            "accept rate", "server τ", "verify"]
    rows = []
    for r in runs:
        tags = [t for t, on in (("sim", r.get("simulated")), ("simulated acceptance", r.get("acceptance_simulated")),
                                ("adaptive", (r.get("adaptive") or {}).get("enabled"))) if on]
        rows.append([
            r["profile"] + (f" ({', '.join(tags)})" if tags else ""),
            str(r["requests"]),
            str(r["output_tokens"]),
            fmt(output_tok_s(r)),
            fmt((r.get("ttft_ms") or {}).get("p50"), 1, " ms"),
            fmt((r.get("tpot_ms") or {}).get("p50"), 2, " ms"),
            fmt((r.get("itl_ms") or {}).get("p50"), 2, " ms"),
            fmt(r.get("accept_length"), 2),
            fmt(r.get("accept_rate"), 3),
            fmt(r.get("server_accept_length"), 2),
            (r.get("verification") or {}).get("status", "—"),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    for r in runs:
        eff = r.get("effective") or {}
        version = r.get("sglang_version") or "unknown"
        if r.get("server_info_errors"):
            out.append(f"{r['profile']}: speculative settings and release unknown — /server_info fields with types "
                       f"SGLang never sends were ignored: {'; '.join(r['server_info_errors'])}")
        elif eff.get("speculative_algorithm"):
            out.append(
                f"{r['profile']}: {eff['speculative_algorithm']} steps {eff['speculative_num_steps']}, "
                f"topk {eff['speculative_eagle_topk']}, draft tokens {eff['speculative_num_draft_tokens']} "
                f"(read back from the server, SGLang {version})"
            )
        else:
            out.append(f"{r['profile']}: no speculation (SGLang {version})")
        if r.get("metrics_error"):
            out.append(f"  {r['metrics_error']} — server τ and the device timer were skipped")
        if r.get("client_bound"):
            out.append(f"  warning: client-bound: {r['client_bound']}")
        if r.get("acceptance_simulated"):
            out.append("  simulated acceptance: SGLANG_SIMULATE_ACC_LEN is set, so accept length and rate are the "
                       "variable's, not the draft's (the timings still hold)")
        out.extend(render_tiers(r))
        out.extend(render_ranks(r))
        for f in (r.get("verification") or {}).get("findings", []):
            out.append(f"  {f['severity'].upper()} {f['code']}: {f['message']}")
            if f.get("fix"):
                out.append(f"    fix: {f['fix']}")
        out.extend(render_positions(r))
        out.extend(render_load(r))
        out.extend(render_breakdowns(r))
        out.append(f"  run dir: {r.get('run_dir')}")
    out.append("accept len = tokens per verify round incl. the bonus token (Σ completion / Σ verify rounds); "
               "accept rate = accepted ÷ proposed drafts; server τ = Δgeneration_tokens / Δspec_verify_calls.")
    if any((r.get("adaptive") or {}).get("enabled") for r in runs):
        out.append("adaptive: a run's accept rate counts the drafts each tier proposed (steps per round); per tier, "
                   "from the server's decode log lines: rounds and tokens from #running-req × accept len, time from "
                   "gen throughput, the lines after each switch that still report the old tier left out; share = fraction of the rounds.")
    return "\n".join(out)


def render_positions(run: dict, expected: list[dict] | None = None) -> list[str]:
    """The RUN's acceptance by draft position on one line, compactly as vLLM's ``bench serve`` prints
    its "Per-position acceptance rate" — here P(accepted | reached) (``accept_by_position``, SGLang
    has no per-position counter: from the verify-round histogram), then P(accepted) as vLLM divides
    (by all rounds) — and, given ``expected`` (:func:`specdash.advisor.expected_accept_by_position`),
    the advisor's expectation beside it.  Nothing without speculation."""
    from specdash.sglang.positions import unconditional

    rows = run.get("accept_by_position")
    if not rows:
        return []
    src = run.get("accept_by_position_source") or "histogram"
    rates = " ".join(fmt(r.get("rate"), 3) for r in rows)
    out = [f"  acceptance by draft position 1–{len(rows)} (accepted ÷ reached, from the {src}; "
           f"{rows[0].get('reached')} rounds): {rates}",
           "    P(accepted) per position, vLLM's per-position rate: " + " ".join(
               fmt(v, 3) for v in unconditional(rows))]
    if expected:
        out.append("    advisor expects: " + " ".join(fmt(e.get("rate"), 3) for e in expected))
    return out


def render_breakdowns(run: dict) -> list[str]:
    """Accept length per category and per context-length bucket (prompt + completion tokens), when the
    run has more than one group of either: where acceptance differs by task or falls with length."""
    out = []
    cats = run.get("by_category") or {}
    if len(cats) > 1 and run.get("accept_length") is not None:
        out.append("  accept length by category: " + " · ".join(
            f"{c} {fmt(g.get('accept_length'), 2)} (n={g['requests']})" for c, g in cats.items()))
    ctx = run.get("by_context") or []
    if len(ctx) > 1 and run.get("accept_length") is not None:
        out.append("  accept length by context (prompt + completion tokens): " + " · ".join(
            f"{g['context_tokens']} {fmt(g.get('accept_length'), 2)} (n={g['requests']})" for g in ctx))
    return out


def render_load(run: dict) -> list[str]:
    """The load-shape and goodput lines of a RUN: asked vs achieved request rate (open loop only),
    request throughput, e2e p50/p99, goodput under the ``--goodput`` SLOs (when given)."""
    out = []
    e2e = run.get("e2e_ms") or {}
    rate = run.get("request_rate")
    if rate is not None:
        cap = run.get("concurrency")
        out.append(f"  request rate: asked {rate if isinstance(rate, str) else f'{rate:g}'}/s "
                   f"(burstiness {run.get('burstiness'):g}, max in flight {cap or 'unlimited'}), "
                   f"achieved {fmt(run.get('achieved_request_rate'), 2)}/s")
    if run.get("request_throughput") is not None:
        out.append(f"  request throughput {fmt(run.get('request_throughput'), 2)} req/s; "
                   f"e2e p50 {fmt(e2e.get('p50'), 0, ' ms')}, p99 {fmt(e2e.get('p99'), 0, ' ms')}")
    slo = run.get("goodput_slo")
    if slo:
        what = ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in slo.items())
        frac = run.get("goodput_fraction")
        out.append(f"  goodput {fmt(run.get('goodput'), 2)} req/s meeting {what} "
                   f"({fmt(100.0 * frac if frac is not None else None, 1, ' %')} of requests)")
    return out


def render_tiers(run: dict) -> list[str]:
    """The per-tier block of an adaptive run (``tiers`` of the RUN; nothing when not adaptive)."""
    ad = run.get("adaptive") or {}
    tiers = run.get("tiers")
    if not ad.get("enabled"):
        return []
    cfg = ad.get("config") or {}
    slots = cfg.get("slots") or {}
    where = ", ".join(f"bs {k}: {v.get('candidate_steps')}" for k, v in slots.items()) or "config unknown"
    sw = ad.get("switches")
    out = [f"  adaptive speculation ({where}): {'?' if sw is None else sw} switch(es) in the run"]
    if not tiers:
        out.append("    no per-tier figures (no server log to read: an attached server)")
        return out
    head = ["steps", "draft tok", "share", "rounds", "accept len", "accept rate", "tok/s"]
    rows = [[str(t["speculative_num_steps"]), str(t["speculative_num_draft_tokens"]),
             fmt(100.0 * t["share"] if t.get("share") is not None else None, 1, " %"), str(t["verify_rounds"]),
             fmt(t.get("accept_length"), 2), fmt(t.get("accept_rate"), 3), fmt(output_tok_s(t))]
            for t in tiers]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    out.append("    " + "  ".join(h.ljust(w) for h, w in zip(head, widths)))
    out += ["    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    covered = sum(t.get("verify_rounds") or 0 for t in tiers)
    rounds = (run.get("output_tokens") or 0) / run["accept_length"] if run.get("accept_length") else None
    if rounds and covered < 0.9 * rounds:
        out.append(f"    the tier rows cover {covered} of the run's ≈{rounds:.0f} request-rounds: they are rebuilt "
                   "from the decode log lines (the lines after a switch and idle windows left out); with "
                   "--decode-log-interval above 1 a line stands for several iterations, so the rows are estimates "
                   "(--decode-log-interval 1 makes them exact)")
    return out


def render_comparison(cmp: dict) -> str:
    """A short text block for an A/B comparison."""
    lo, hi = cmp["ci95"] if cmp.get("ci95") else (None, None)
    why = cmp.get("not_comparable")
    lines = [
        f"A/B: {cmp['b']} over {cmp['a']}: speedup {fmt(cmp.get('speedup'), 3)}× "
        + (f"(95 % CI {fmt(lo, 3)}–{fmt(hi, 3)}, {cmp.get('pairs')} pairs): " if not str(cmp.get("method") or "")
           .startswith("unpaired") else f"({cmp['method']}" + (f", 95 % CI {fmt(lo, 3)}–{fmt(hi, 3)}" if lo else "")
           + "): ")
        + f"{cmp.get('verdict')}"
        + (f" — the sides sent different requests: {'; '.join(why)}" if why else "")
    ]
    base = cmp.get("baseline")
    if base:
        for side in ("a", "b"):
            c = base[side]
            blo, bhi = c["ci95"] if c.get("ci95") else (None, None)
            lines.append(f"  {c['b']} vs baseline {base['name']}: {fmt(c.get('speedup'), 3)}× "
                         f"(95 % CI {fmt(blo, 3)}–{fmt(bhi, 3)}): {c.get('verdict')}")
    for cat, row in (cmp.get("per_category") or {}).items():
        ci, n = row.get("ci95"), row.get("pairs")
        if ci and ci[0] is not None:
            said = f"95 % CI {fmt(ci[0], 3)}–{fmt(ci[1], 3)}, {n} pairs: {row.get('verdict')}"
        elif isinstance(n, int) and n < MIN_PAIRS:  # the JSON keeps the contract's verdict; the text says why
            said = f"n={n}: too few pairs for an interval"
        else:
            said = str(row.get("verdict"))
        lines.append(f"  [{cat}] speedup {fmt(row.get('speedup'), 3)}× ({said})")
    return "\n".join(lines)


def withhold_speedup(cmp: dict, failed: list[str]) -> None:
    """Blank the speedups of a comparison in which a side failed post-launch verification
    (no speedup is reported from such a run unless ``--allow-unverified``)."""
    note = f"not reported: post-launch verification failed for {', '.join(failed)} (--allow-unverified to see it)"
    blocks = [cmp] + [b for b in ((cmp.get("baseline") or {}).get("a"), (cmp.get("baseline") or {}).get("b")) if b]
    for block in blocks:
        block["speedup"], block["ci95"], block["verdict"] = None, None, note
        for row in (block.get("per_category") or {}).values():
            row["speedup"], row["ci95"], row["verdict"] = None, None, note
        for row in block.get("per_prompt") or []:
            row["speedup"] = None
    cmp["verification_failed"] = failed
