"""A tune report (:func:`specdash.bench.tune.tune`'s dict) as text: the launches, one table of measured
settings per concurrency, acceptance by draft position, the live pairs, the adaptive schedule against the pick,
the recommendation, the exploration start-up and the time used (``specdash tune`` and the dashboard's live
tune panel print it)."""

from __future__ import annotations

from specdash.results import output_tok_s


def _s(v, nd: int = 1) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def _render_fast_start(report: dict) -> list[str]:
    """The exploration start-up per launch: ``launch #N steps/topk/draft: flags — what they save; why
    a flag was not added`` (the planner's notes), or one summary line for a report without them."""
    log = report.get("launch_log") or []
    fast = [e for e in log if e.get("fast_start")]
    plans = (report.get("fast_explore") or {}).get("launches") or []
    prepared = [e for e in log if e.get("role") in ("explore", "live")]
    if not (report.get("fast_explore") or {}).get("enabled") or not (fast or plans):
        return []
    if len(plans) != len(prepared):
        flags = sorted({" ".join(e["fast_start"]) for e in fast})
        return [f"  exploration start-up: {len(fast)} launch(es) with {'; '.join(flags)} "
                "(never the baseline or the final A/B; --full-start turns it off)"]
    out = ["  exploration start-up, per launch (never the baseline or the final A/B; --full-start turns it off):"]
    for e, plan in zip(prepared, plans, strict=True):
        st = e.get("settings") or {}
        lab = (f" {st.get('speculative_num_steps')}/{st.get('speculative_eagle_topk')}/"
               f"{st.get('speculative_num_draft_tokens')}" if st else "")
        if e.get("tiers"):
            lab = f" tiers {'/'.join(map(str, e['tiers']))}"
        what = " ".join(plan.get("flags") or []) or "as the profile says"
        why = "; ".join([*(f"saves {x}" for x in plan.get("saved") or []), *(plan.get("notes") or [])])
        out.append(f"    launch #{e['id'] + 1}{lab}: {what}" + (f" — {why}" if why else ""))
    return out


def render_live(report: dict) -> str:
    """The launches, the measured settings by source, the live pairs and the time used, as text."""
    out = []
    live = report.get("live")
    if live and not live.get("used"):
        out.append(f"tune --live fell back to relaunches: {live.get('note')}")
    by_role: dict[str, int] = {}
    for e in report.get("launch_log") or []:
        by_role[e["role"]] = by_role.get(e["role"], 0) + 1
    roles = ", ".join(f"{n} {r}" for r, n in by_role.items())
    out.append(f"tune: {report['launches']} launches ({roles}); {report['exploration_launches']} of the budget "
               f"of {report['budget']}")
    rows = report.get("measured") or []
    concs = sorted({int(r.get("concurrency") or 1) for r in rows if r.get("settings")})
    main = int(((report.get("fast_explore") or {}).get("concurrency")) or (concs[0] if concs else 1))
    for c in sorted(concs, key=lambda x: (x != main, x)):  # one table per concurrency, the tune's first
        what = "the tune's concurrency" if c == main else "for the adaptive schedule, not compared with the above"
        out.append(f"  concurrency {c} ({what}):")
        out.append("    source  launch  steps/topk/draft  tok/s      95 % interval        τ     (launch: #N of the "
                   "progress lines)")
        for r in rows:
            if int(r.get("concurrency") or 1) != c and r.get("settings"):
                continue
            if not r.get("settings") and c != main:
                continue
            st = r.get("settings")
            lab = "no speculation" if not st else (f"{st['speculative_num_steps']}/{st['speculative_eagle_topk']}/"
                                                   f"{st['speculative_num_draft_tokens']}")
            iv = r.get("interval")
            ivs = f"[{iv[0]:.1f}, {iv[1]:.1f}]" if iv else "—"
            out.append(f"    {r['source']:<6}  {'#' + str(r['launch'] + 1) if r['launch'] is not None else '—':>6}  "
                       f"{lab:<16}  {_s(output_tok_s(r)):>9}  {ivs:<19}  {_s(r['accept_length'], 2):>5}"
                       + (f"  ({r['for']})" if r.get("for") and c == main else ""))
    pos = [r for r in report.get("measured") or [] if r.get("settings") and r.get("expected_accept_by_position")]
    if pos:
        out.append("  acceptance by draft position (accepted ÷ reached; measured from the verify-round histogram, "
                   "the advisor's expectation after the last fit):")
    for r in pos:
        st = r["settings"]
        lab = f"{st['speculative_num_steps']}/{st['speculative_eagle_topk']}/{st['speculative_num_draft_tokens']}"
        meas = " ".join(_s(x.get("rate"), 3) for x in r.get("accept_by_position") or []) or "— (a tier)"
        out.append(f"    {lab:<9} measured {meas}; expected "
                   + " ".join(_s(x.get("rate"), 3) for x in r["expected_accept_by_position"]))
    for k, p in enumerate((live or {}).get("pairs") or [], 1):
        sp = p.get("speedup") or {}
        ci = sp.get("ci95") or [None, None]
        a, b = p["tiers"]
        out.append(f"  live launch {k}: steps {b} over {a} ×{_s(sp.get('b_over_a'), 3)} "
                   f"[{_s(ci[0], 3)}, {_s(ci[1], 3)}] over {p['pairs']} paired windows ({sp.get('verdict')}); "
                   f"{p['discarded_after_switch']} decode lines after switches discarded")
    sched = report.get("adaptive_schedule") or {}
    if sched.get("verification") or sched.get("predicted"):
        out.append("  adaptive schedule against the pick, by concurrency (apart from the tables above):")
        for r in sched.get("verification") or []:
            ci = r.get("ci95") or [None, None]
            out.append(f"    c{r['concurrency']}: adaptive {_s(r.get('adaptive_total_tok_s'))} vs static "
                       f"{_s(r.get('static_total_tok_s'))} tok/s (per request {_s(r.get('adaptive_tok_s'))} vs "
                       f"{_s(r.get('static_tok_s'))}: ×{_s(r.get('speedup'), 3)} [{_s(ci[0], 3)}, {_s(ci[1], 3)}], "
                       f"{r.get('verdict')}); predicted ×{_s(r.get('predicted_gain'), 3)}; "
                       f"{_s(r.get('switches'), 0)} tier switches")
        if not sched.get("verification"):
            for r in sched.get("predicted") or []:
                out.append(f"    c{r['concurrency']}: predicted ×{_s(r.get('gain'), 3)} (not verified)")
    rec = report.get("recommendation") or {}
    if rec.get("text"):
        out.append(f"  recommendation: {rec['text']}")
    out.extend(_render_fast_start(report))
    t = report.get("time") or {}
    out.append(f"  time: {_s(t.get('wall_s'))} s wall; start-up of the measuring launches {_s(t.get('measuring_startup_s'))} s"
               f" vs ≈ {_s(t.get('relaunch_estimate_s'))} s for a relaunch per measured setting "
               f"({t.get('settings_measured')} × {_s(t.get('time_to_ready_s_median'))} s to ready)")
    return "\n".join(out)
