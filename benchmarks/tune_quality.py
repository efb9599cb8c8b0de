"""The tuner's own figures on the simulator (issue 26): pick quality, launches, and how exactly each
setting was measured.

For each scenario kind — dense / compute-rich (``compute-rich-c4`` at concurrency 4), MoE with chains
near the top (``moe-chain``), a small target whose acceptance decays fast by position
(``small-fast-decay``) — and each mode (``relaunch``: ``specdash tune``; ``live``: ``specdash tune
--live``) it runs ``--repeats`` tunes from ``--start`` and prints, per tune:

* the pick and its gap to the full space's analytic best (steps 1..10 × topk {1,2,4,8,16} × draft tokens
  2..64, every point SGLang runs as asked; judged by ``specdash.sim.expected`` at the suite's concurrency,
  never by the tune's own noisy measurements: CONTRACTS.md "Advisor validation");
* launches, in all and by purpose (``launch_log[].role``);
* per measured setting, measured ÷ expected tok/s — a launch's client tok/s against the analytic
  ``output_tok_s_total``, a live tier's (or a live tune's static launch's) decode tok/s from the server's
  decode lines against the analytic decode rate ``batch · τ / round`` (the figure the line reports; the
  client's figure also holds the prefills) — and its two factors: the round rate (tok/s ÷ τ: the
  timing and the tier attribution) and τ (the acceptance the suite's rounds happened to sample: with a
  few prompts of a few hundred tokens, ±2-4 % a setting, seeded, so a setting errs the same way in
  every repeat).

Then one summary line per scenario and mode: the gaps' median, min and max, launches, and the spread of
measured ÷ expected over every setting of every repeat.  ``--json FILE`` writes every tune's figures.

Time scales: the simulated server sleeps each round's model time divided by the time scale, and on two
loaded cores it keeps up with rounds of a few ms of wall clock only (shorter rounds run late and a live
launch's short tier then hands its debt to the long one: tiers read ±7 % apart at moe-chain's default 10,
while the round rate of every setting is within 1–2 % at 2).  The benchmark runs each scenario at a scale
that keeps rounds ≥ 2 ms (``SCENARIOS``).

Usage: ``python benchmarks/tune_quality.py [--scenarios small-fast-decay,moe-chain,compute-rich-c4,real-smol]
[--modes relaunch,live] [--repeats 3] [--budget 8] [--start 3,1,4] [--json FILE]``.  Each tune takes one to
three minutes of wall clock on two cores (the simulated servers' start-up and the suites).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: scenario → (concurrency, prompts, time scale, target model, draft model, TP, max tokens).  real-smol (fitted
#: to the real SmolLM2-135M + trained EAGLE3 bed) runs the figure test's suite: 12 prompts of 256 tokens (with 4,
#: the launches' acceptance sampling, ±2-4 % a setting, decides between the close wide trees at its top).
SCENARIOS = {
    "small-fast-decay": (1, 4, 1.0, "sim:tiny-llama", "sim:tiny-llama-eagle3", 1, 512),
    "moe-chain": (1, 4, 2.0, "sim:kimi-k2.5-int4", "sim:kimi-k2.5-eagle3", 8, 512),
    "compute-rich-c4": (4, 8, 2.0, "sim:llama-3.1-8b", "sim:llama-3.1-8b-eagle3", 1, 512),
    "real-smol": (1, 12, 1.0, "sim:smollm2-135m", "sim:smollm2-135m-eagle3", 1, 256),
}
MAX_TOKENS = 512  # the default; SCENARIOS says each one's
FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def _runs_as_asked(s: int, k: int, n: int) -> bool:
    from specdash.sglang.speculative import normalize_speculative

    res = normalize_speculative("EAGLE3", s, k, n)
    if res.rejections or any(a.field in FIELDS for a in res.adjustments):
        return False
    return (res.num_steps, res.eagle_topk, res.num_draft_tokens) == (s, k, n)


def full_grid() -> list[tuple[int, int, int]]:
    """Every (steps, topk, draft tokens) SGLang runs as asked over steps 1..10 × topk {1,2,4,8,16} × 2..64."""
    return [(s, k, n) for s in range(1, 11) for k in (1, 2, 4, 8, 16) for n in range(2, 65) if _runs_as_asked(s, k, n)]


def prompts_of(n: int) -> list[str]:
    """The suite's prompts (:func:`one_tune`)."""
    return [f"prompt number {i} about topic {i * 7}" for i in range(n)]


@lru_cache(maxsize=4096)
def analytic(scenario: str, concurrency: int, s: int, k: int, n: int, max_tokens: int = MAX_TOKENS,
             seed: int = 1) -> dict:
    """``specdash.sim.expected`` of one setting for the suite actually sent (its prompts and the profile's
    seed, which fix the per-prompt acceptance where the scenario spreads it; model time: time scale 1)."""
    from specdash.sim.expected import expected

    return expected({"speculative_algorithm": "EAGLE3", "steps": s, "topk": k, "num_draft_tokens": n}, scenario,
                    concurrency, max_new_tokens=max_tokens, time_scale=1.0,
                    prompts=prompts_of(SCENARIOS[scenario][1]), seed=seed)


def grid_best(scenario: str, concurrency: int, max_tokens: int = MAX_TOKENS,
              seed: int = 1) -> tuple[float, tuple[int, int, int]]:
    """The full space's analytic best (tok/s in model time, settings)."""
    return max((analytic(scenario, concurrency, *x, max_tokens=max_tokens, seed=seed)["output_tok_s_total"], x)
               for x in full_grid())


def measured_vs_expected(report: dict, scenario: str, time_scale: float, seed: int = 1) -> list[dict]:
    """Per measured speculative setting: measured ÷ expected (module docstring)."""
    out = []
    decode_rows = report.get("mode") == "live"
    for r in report.get("measured") or []:
        st = r.get("settings")
        if not st or not r.get("output_tok_s"):
            continue
        x = tuple(int(st[f]) for f in FIELDS)
        c = int(r.get("concurrency") or 1)
        e = analytic(scenario, c, *x, max_tokens=SCENARIOS[scenario][6], seed=seed)
        # the measured τ is pooled over the suite's rounds (tokens ÷ verify rounds), so it is held to the pooled
        # analytic τ (accept_length_per_request), not to the prompts' plain mean (accept_length), which the
        # prompt mixture puts higher (real-smol, σ 0.41: by up to 25 %)
        tau = e["accept_length_per_request"] or e["accept_length"]
        if decode_rows or r.get("source") == "tier":
            want = e["batch"] * tau * 1000.0 / e["round_time_ms"] * time_scale
            basis = "decode"
        else:
            want = e["output_tok_s_total"] * time_scale
            basis = "client"
        out.append({"settings": x, "source": r.get("source"), "concurrency": c, "basis": basis,
                    "measured_tok_s": r["output_tok_s"], "expected_tok_s": want,
                    "ratio": r["output_tok_s"] / want if want else None, "interval": r.get("interval"),
                    "tau_ratio": (r["accept_length"] / tau) if r.get("accept_length") else None})
    return out


async def one_tune(scenario: str, mode: str, start: tuple[int, int, int], budget: int, work: Path, seed: int) -> dict:
    from specdash.bench.runner import RunOptions
    from specdash.bench.tune import tune
    from specdash.profile import load_profile, parse_suite

    conc, n_prompts, ts, model, draft, tp, max_tokens = SCENARIOS[scenario]
    s, k, n = start
    text = "\n".join([
        f'name = "q-{scenario}"', 'description = "tune quality benchmark"', "[server]", 'launcher = "sim"',
        f'model_path = "{model}"', f"tp_size = {tp}", "port = 0", "[speculative]", 'algorithm = "EAGLE3"',
        f'draft_model_path = "{draft}"', f"num_steps = {s}", f"eagle_topk = {k}", f"num_draft_tokens = {n}",
        "[env]", 'SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN = "1"', "[sim]", f'scenario = "{scenario}"',
        f"seed = {seed}", f"time_scale = {ts}", 'sglang_version = "0.5.14"']) + "\n"
    path = work / f"q-{scenario}.toml"
    path.write_text(text, encoding="utf-8")
    prof = load_profile(str(path))
    suite = parse_suite({"suite": {"name": "q", "max_tokens": max_tokens, "concurrency": conc, "warmup": 1,
                                   "repeats": 1},
                         "prompts": [{"text": t} for t in prompts_of(n_prompts)]})
    out = work / "runs"
    t0 = time.monotonic()
    report = await tune(prof, suite, budget=budget, out=out, opts=RunOptions(out_dir=out, preflight=False),
                        preset_dir=work / "presets", live=(mode == "live"))
    wall = time.monotonic() - t0
    best_tok, best_x = grid_best(scenario, conc, max_tokens, seed)
    b = report["best"]
    pick = tuple(int(b[f]) for f in FIELDS)
    got = analytic(scenario, conc, *pick, max_tokens=max_tokens, seed=seed)["output_tok_s_total"]
    roles: dict[str, int] = {}
    for e in report["launch_log"]:
        roles[e["role"]] = roles.get(e["role"], 0) + 1
    sched = report.get("adaptive_schedule") or {}
    return {"scenario": scenario, "mode": mode, "start": start, "pick": pick, "pick_tok_s": got,
            "grid_best": best_x, "grid_best_tok_s": best_tok, "gap_pct": 100.0 * (best_tok - got) / best_tok,
            "launches": report["launches"], "roles": roles, "wall_s": wall,
            "measured": measured_vs_expected(report, scenario, SCENARIOS[scenario][2], seed),
            "recommendation": report.get("recommendation"), "schedule_verdict": sched.get("verdict"),
            "stop_reason": report.get("stop_reason")}


def _spans(measured: list[dict]) -> tuple[str, str, str]:
    """The spread of measured ÷ expected tok/s over settings, and of its two factors: the round rate
    (tok/s ÷ τ against the analytic rounds/s: what the tier attribution and the timing get right) and τ
    (against the analytic accept length: the acceptance sampling of the suite's rounds)."""
    def span(v):
        return f"{min(v):.3f}–{max(v):.3f}" if v else "—"

    ratios = [m["ratio"] for m in measured if m["ratio"]]
    taus = [m["tau_ratio"] for m in measured if m["ratio"] and m["tau_ratio"]]
    rounds = [m["ratio"] / m["tau_ratio"] for m in measured if m["ratio"] and m["tau_ratio"]]
    return span(ratios), span(rounds), span(taus)


def _line(res: dict) -> str:
    x = "/".join(map(str, res["pick"]))
    g = "/".join(map(str, res["grid_best"]))
    roles = ", ".join(f"{n} {r}" for r, n in res["roles"].items())
    tok, rounds, tau = _spans(res["measured"])
    return (f"{res['scenario']:<17} {res['mode']:<8} pick {x:<8} gap {res['gap_pct']:6.2f} % (best {g}) "
            f"launches {res['launches']:>2} ({roles}); measured/expected {tok} (rounds/s {rounds}, τ {tau}); "
            f"{res['wall_s']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--modes", default="relaunch,live")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--start", default="3,1,4", help="steps,topk,draft tokens of the starting profile")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--verbose", action="store_true", help="print measured ÷ expected per setting")
    a = ap.parse_args(argv)
    start = tuple(int(v) for v in a.start.split(","))
    results = []
    for scenario in a.scenarios.split(","):
        if scenario not in SCENARIOS:
            ap.error(f"unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
        for mode in a.modes.split(","):
            for rep in range(a.repeats):
                with tempfile.TemporaryDirectory(prefix="specdash-tq-") as d:
                    res = asyncio.run(one_tune(scenario, mode, start, a.budget, Path(d), seed=1 + rep))
                results.append(res)
                print(_line(res), flush=True)
                if a.verbose:
                    for m in res["measured"]:
                        print(f"    {'/'.join(map(str, m['settings'])):<8} {m['source']:<6} c{m['concurrency']:<3} "
                              f"{m['basis']:<6} {m['measured_tok_s']:9.1f} / {m['expected_tok_s']:9.1f} = "
                              f"{m['ratio']:.3f} (τ {m['tau_ratio'] or 0:.3f}, rounds/s {m['ratio'] / (m['tau_ratio'] or 1):.3f})",
                              flush=True)
    print("\nsummary (gap to the full space's analytic best; launches; measured ÷ expected over every setting)")
    for scenario in a.scenarios.split(","):
        for mode in a.modes.split(","):
            rs = [r for r in results if r["scenario"] == scenario and r["mode"] == mode]
            if not rs:
                continue
            gaps = [r["gap_pct"] for r in rs]
            tok, rounds, tau = _spans([m for r in rs for m in r["measured"]])
            print(f"  {scenario:<17} {mode:<8} gap median {statistics.median(gaps):.2f} % "
                  f"({min(gaps):.2f} … {max(gaps):.2f}); launches {[r['launches'] for r in rs]}; "
                  f"measured/expected {tok} (rounds/s {rounds}, τ {tau})")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, default=list) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
