"""Interleaved, blocked measurement of several running servers: tok/s differences of a few percent on a bed
whose single measurements spread by 13-23 % (benchmarks/results/real-2026-12-04/).

The spread on the real bed is slow (phases of tens of seconds, partly the VM host's stolen CPU time) and hits
whatever runs at that moment.  So instead of one long measurement per server, every server is measured in
short bursts, one block at a time: a block is one concurrency and one slice of the suite's prompts, sent to
every server in a shuffled order (the others SIGSTOPped), and the next block moves on.  Within a block all
servers meet the same prompts (greedy: the same answers) within seconds of each other, so the block's own speed
cancels in the ratio of two servers; across blocks the ratios are averaged.  This is a randomized complete
block design (e.g. Montgomery, *Design and Analysis of Experiments*, ch. 4), the block being the nuisance
"host speed at that moment"; the estimate of server s against server t is the mean over blocks of
log(tok/s_s) - log(tok/s_t), its interval a t interval over the blocks.

Writes one JSON line per burst as it finishes (nothing held back): ``{"block", "round", "concurrency",
"server", "position", "prompts", "requests", "ok", "tokens", "seconds", "tok_s", "verify_ct",
"accept_length", "histogram", "t0"}`` (tokens: output tokens of the burst's requests, seconds: first request
sent to last done, tok_s = tokens / seconds; accept_length = Σ tokens / Σ verify rounds, SGLang's
``meta_info.spec_verify_ct``).  ``summarize`` reads such a file back.

Usage (device, servers already up and stopped; see bed.sh phase ``judge``)::

    python benchmarks/real/judge.py run --server NAME=URL=PGID ... --suite real-smol --profile P.toml --concurrency 1,4,16 \
        --burst 3,12,32 --deadline-s 400 --out judge.jsonl
    python benchmarks/real/judge.py summarize judge.jsonl [more.jsonl] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _signal(pgid: int | None, sig: int) -> None:
    if pgid:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass


async def _served(client, pg: int | None) -> dict:
    """The server's speculative settings and release from ``/server_info`` (SGLang's own report)."""
    from specdash.sglang.effective import SpecSettings

    _signal(pg, signal.SIGCONT)
    try:
        info = await client.server_info()
    except Exception as exc:  # recorded, not fatal: the bursts say whether it serves
        return {"error": repr(exc)}
    finally:
        _signal(pg, signal.SIGSTOP)
    s = SpecSettings.from_effective(info)
    return {"algorithm": s.algorithm, "steps": s.steps, "topk": s.topk, "draft_tokens": s.draft_tokens,
            "version": info.get("version")}


def _row(recs: list[dict]) -> dict:
    from specdash.collect.stream import add_histograms

    ok = [r for r in recs if r.get("ok")]
    tokens = sum(r["completion_tokens"] for r in ok)
    t0 = min((r["t_sent"] for r in ok), default=0.0)
    t1 = max((r["t_done"] for r in ok), default=0.0)
    vct = sum((r.get("spec") or {}).get("verify_ct") or 0 for r in ok)
    hist = None
    for r in ok:
        hist = add_histograms(hist, (r.get("spec") or {}).get("histogram"))
    secs = t1 - t0
    return {"requests": len(recs), "ok": len(ok), "tokens": tokens, "seconds": round(secs, 4),
            "tok_s": round(tokens / secs, 2) if secs > 0 else None, "verify_ct": vct,
            "accept_length": round(tokens / vct, 4) if vct else None, "histogram": hist or None}


async def run(args) -> None:
    from specdash.profile import load_profile
    from specdash.profile.chat import apply_prompt_format
    from specdash.profile.files import load_suite

    # the prompts as `specdash --bench` sends them for this target: its chat template applied on the client
    # (the 2026-12-07 run sent the suite's raw text: ~54-token answers, a workload of its own)
    suite, prompt_format = apply_prompt_format(load_profile(args.profile) if args.profile else None,
                                               load_suite(args.suite))
    from specdash.bench.load import send_suite
    from specdash.sglang.client import SGLangClient

    servers = []  # (name, client, process group): one client a server, its connections kept across bursts
    for spec in args.server:
        name, url, pgid = (spec.split("=") + [""])[:3]
        servers.append((name, SGLangClient(url, timeout=120.0), int(pgid) if pgid else None))
    concs = [int(c) for c in args.concurrency.split(",")]
    bursts = [int(b) for b in args.burst.split(",")]
    if len(bursts) != len(concs):
        raise SystemExit(f"judge: --burst {args.burst} gives {len(bursts)} sizes for {len(concs)} concurrencies "
                         f"(--concurrency {args.concurrency}): one size per concurrency")
    n_prompts = len(suite.prompts)
    rng = random.Random(args.seed)
    out = open(args.out, "a", buffering=1)
    out.write(json.dumps({"prompt_format": prompt_format.get("format"), "template": prompt_format.get("template"),
                          "note": prompt_format.get("note")}) + "\n")
    t_start = time.monotonic()
    for _, _, pg in servers:
        _signal(pg, signal.SIGSTOP)
    block_s = {c: 0.0 for c in concs}  # the longest block so far per concurrency (deadline check)
    cursor = {c: 0 for c in concs}

    async def measure(client, pg, c, idx):
        _signal(pg, signal.SIGCONT)
        await asyncio.sleep(args.settle_s)
        try:
            return await send_suite(client, suite, [(i, 0) for i in idx], concurrency=c,
                                    max_tokens=suite.suite.max_tokens)
        finally:
            _signal(pg, signal.SIGSTOP)

    # warm-up: one burst per server and concurrency, not recorded (first rounds of a fresh server run slow);
    # what each server runs, as it reports it (a "served" line per server: the name must match the settings)
    for name, client, pg in servers:
        for c, b in zip(concs, bursts):
            await measure(client, pg, c, [(cursor[c] + i) % n_prompts for i in range(min(b, 2 * c))])
        out.write(json.dumps({"served": name, **await _served(client, pg)}) + "\n")
    block = 0
    rnd = 0
    while True:
        for c, b in zip(concs, bursts):
            left = args.deadline_s - (time.monotonic() - t_start)
            if left < 1.2 * block_s[c] + 5:
                print(f"judge: stop before round {rnd} c{c}: {left:.0f} s left, a block takes {block_s[c]:.0f} s",
                      file=sys.stderr)
                out.close()
                for _, client, pg in servers:
                    _signal(pg, signal.SIGCONT)
                    await client.aclose()
                return
            idx = [(cursor[c] + i) % n_prompts for i in range(b)]
            cursor[c] = (cursor[c] + b) % n_prompts
            order = list(servers)
            rng.shuffle(order)
            tb = time.monotonic()
            for pos, (name, client, pg) in enumerate(order):
                t0 = time.time()
                recs = await measure(client, pg, c, idx)
                row = {"block": block, "round": rnd, "concurrency": c, "server": name, "position": pos,
                       "prompts": idx, **_row(recs), "t0": round(t0, 3)}
                out.write(json.dumps(row) + "\n")
            block_s[c] = max(block_s[c], time.monotonic() - tb)
            print(f"judge: round {rnd} c{c} block {block} in {time.monotonic() - tb:.1f} s", file=sys.stderr)
            block += 1
        rnd += 1


def _tint(xs: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t interval of xs."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, math.nan, math.nan
    try:
        from scipy import stats

        t = float(stats.t.ppf(0.975, len(xs) - 1))
    except ImportError:  # the device's Python may lack scipy: Student's t 97.5 % points, normal past 30
        table = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
                 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
                 2.045, 2.042)
        df = len(xs) - 1
        t = table[df - 1] if df <= 30 else 1.96 + 2.4 / df
    h = t * statistics.stdev(xs) / math.sqrt(len(xs))
    return m, m - h, m + h


def summarize(paths: list[str]) -> dict:
    """Per concurrency: each server's tok/s (geometric mean over blocks) and its ratio to the best server with
    a 95 % interval from the blocks' paired log differences; the noise with and without blocking (standard
    deviation of log tok/s across blocks for one server against the residual of the additive block + server
    model)."""
    rows = []
    for i, p in enumerate(paths):
        for line in open(p):
            r = json.loads(line)
            if r.get("tok_s") and "served" not in r and "prompt_format" not in r:
                r["block"] = f"{i}:{r['block']}"  # blocks of different files (calls, launches) stay apart
                r["launch"] = i
                rows.append(r)
    out: dict = {}
    for c in sorted({r["concurrency"] for r in rows}):
        rc = [r for r in rows if r["concurrency"] == c]
        blocks: dict[str, dict[str, float]] = {}
        for r in rc:
            blocks.setdefault(r["block"], {})[r["server"]] = math.log(r["tok_s"])
        names = sorted({r["server"] for r in rc})
        full = {b: v for b, v in blocks.items() if len(v) == len(names)}
        # additive model on complete blocks: y_bs = mu + a_b + s_s + e
        mu = statistics.fmean(y for v in full.values() for y in v.values())
        a = {b: statistics.fmean(v.values()) - mu for b, v in full.items()}
        s = {n: statistics.fmean(v[n] for v in full.values()) - mu for n in names}
        resid = [v[n] - mu - a[b] - s[n] for b, v in full.items() for n in names]
        dof = max(1, (len(full) - 1) * (len(names) - 1))
        sd_resid = math.sqrt(sum(e * e for e in resid) / dof)
        sd_raw = statistics.fmean(statistics.stdev([v[n] for v in full.values()]) for n in names) if len(full) > 1 else math.nan
        best = max(names, key=lambda n: s[n])
        per = {}
        for n in names:
            d = [v[n] - v[best] for v in full.values()]
            m, lo, hi = _tint(d)
            tau = [r["accept_length"] for r in rc if r["server"] == n and r.get("accept_length")]
            toks = sum(r["tokens"] for r in rc if r["server"] == n)
            vct = sum(r["verify_ct"] for r in rc if r["server"] == n)
            per[n] = {"tok_s_geomean": round(math.exp(mu + s[n]), 1), "vs_best": round(math.exp(m), 4),
                      "vs_best_ci95": [round(math.exp(lo), 4), round(math.exp(hi), 4)],
                      "accept_length": round(toks / vct, 3) if vct else None,
                      "accept_length_range": [min(tau), max(tau)] if tau else None}
        base = next((n for n in names if "baseline" in n), None)
        if base:
            for n in names:
                d = [v[n] - v[base] for v in full.values()]
                m, lo, hi = _tint(d)
                per[n]["vs_baseline"] = round(math.exp(m), 4)
                per[n]["vs_baseline_ci95"] = [round(math.exp(lo), 4), round(math.exp(hi), 4)]
        # which servers are indistinguishable from the best (interval reaches 1.0) and the 2 % set
        out[str(c)] = {"blocks": len(full), "blocks_incomplete": len(blocks) - len(full), "servers": len(names),
                       "best": best, "sd_log_tok_s_unblocked": round(sd_raw, 4),
                       "sd_log_tok_s_blocked": round(sd_resid, 4),
                       "within_2pct_of_best": sorted(n for n in names if per[n]["vs_best_ci95"][1] >= 0.98),
                       "per_server": dict(sorted(per.items(), key=lambda kv: -kv[1]["vs_best"]))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--server", action="append", required=True, help="NAME=URL=PGID (PGID: the process group to "
                   "SIGSTOP between bursts; empty: never stopped)")
    r.add_argument("--suite", default="real-smol")
    r.add_argument("--profile", help="a profile of the servers' target: its chat template formats the prompts as "
                   "`specdash --bench` does (without it the suite's raw text is sent)")
    r.add_argument("--concurrency", default="1,4,16")
    r.add_argument("--burst", default="3,12,32", help="requests per burst, one per concurrency")
    r.add_argument("--deadline-s", type=float, default=400.0)
    r.add_argument("--settle-s", type=float, default=0.3, help="wait after SIGCONT before the burst (s)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("files", nargs="+")
    s.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.cmd == "run":
        asyncio.run(run(args))
        return
    res = summarize(args.files)
    if args.json:
        print(json.dumps(res, indent=1))
        return
    for c, v in res.items():
        print(f"c{c}: {v['blocks']} complete blocks, {v['servers']} servers; sd of log tok/s per burst "
              f"{v['sd_log_tok_s_unblocked']:.3f} unblocked, {v['sd_log_tok_s_blocked']:.3f} within a block")
        for n, p in v["per_server"].items():
            lo, hi = p["vs_best_ci95"]
            vb = f"  ×{p['vs_baseline']:.3f} baseline" if "vs_baseline" in p else ""
            print(f"  {n:32s} {p['tok_s_geomean']:9.1f} tok/s  ×{p['vs_best']:.3f} [{lo:.3f}, {hi:.3f}] of the best"
                  f"  τ {p['accept_length'] or 0:.3f}{vb}")
        print(f"  within 2 % of the best (interval reaches 0.98): {', '.join(v['within_2pct_of_best'])}")


if __name__ == "__main__":
    main()
