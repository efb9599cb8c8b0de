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
    # the prompts as `specdash --bench` sends them for this target: its chat template applied on the client
    # (the 2026-12-07 run sent the suite's raw text: ~54-token answers, a workload of its own)
    from specdash.profile import ProfileError, load_profile
    from specdash.profile.chat import apply_prompt_format
    from specdash.profile.files import load_suite

    try:
        suite, prompt_format = apply_prompt_format(load_profile(args.profile) if args.profile else None,
                                                   load_suite(args.suite))
    except ProfileError as exc:
        raise SystemExit(f"judge: {exc}") from None
    from specdash.bench.load import send_suite
    from specdash.sglang.client import SGLangClient

    # (name, client, process group): one client a server, its connections kept across bursts
    servers = [(name, SGLangClient(url, timeout=120.0), pg) for name, url, pg in args.servers]
    concs, bursts = args.concs, args.bursts
    n_prompts = len(suite.prompts)
    rng = random.Random(args.seed)
    out = open(args.out, "x", buffering=1)  # never appended to: blocks of two runs in one file would mix
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
                if row["ok"] < row["requests"]:
                    err = next((r.get("error") for r in recs if not r.get("ok")), None)
                    print(f"judge: {name} c{c} block {block}: {row['requests'] - row['ok']} of {row['requests']} "
                          f"requests failed ({err}); the burst does not count", file=sys.stderr)
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


def _ci(lo: float, hi: float) -> list[float] | None:
    """A log-scale interval as ratios (None without one: fewer than two blocks)."""
    return None if math.isnan(lo) else [round(math.exp(lo), 4), round(math.exp(hi), 4)]


def _parse_run_args(ap, args) -> None:
    """``--server``, ``--concurrency`` and ``--burst`` read and checked (``ap.error``: exit 2 with the reason):
    ``args.servers`` [(name, url, pgid | None)], ``args.concs``, ``args.bursts``."""
    import httpx

    servers = []
    for spec in args.server:
        name, sep, rest = spec.partition("=")
        url, pg = rest, None
        head, sep2, tail = rest.rpartition("=")
        if sep2 and head.startswith(("http://", "https://")):  # NAME=URL=PGID (a URL may hold '=' itself)
            url, pg = head, tail
        try:
            httpx.URL(url).port  # noqa: B018 - parses the URL and its port
            pg = int(pg) if pg else None
        except (httpx.InvalidURL, ValueError):
            url = ""
        if not sep or not name or not url.startswith(("http://", "https://")):
            ap.error(f"--server {spec!r}: NAME=URL[=PGID] with an http(s) URL and a numeric process group, e.g. "
                     "a=http://127.0.0.1:30100=4242")
        servers.append((name, url, pg))
    dup = sorted({n for n, _, _ in servers if [x for x, _, _ in servers].count(n) > 1})
    if dup:
        ap.error(f"--server names must differ: {', '.join(dup)} given twice")

    def ints(flag: str, text: str) -> list[int]:
        try:
            vals = [int(x) for x in text.split(",")]
        except ValueError:
            ap.error(f"{flag} {text}: comma-separated whole numbers, e.g. 1,4,16")
        if any(v < 1 for v in vals):
            ap.error(f"{flag} {text}: every value must be at least 1")
        return vals

    args.servers = servers
    args.concs, args.bursts = ints("--concurrency", args.concurrency), ints("--burst", args.burst)
    if len(args.bursts) != len(args.concs):
        ap.error(f"--burst {args.burst} gives {len(args.bursts)} sizes for {len(args.concs)} concurrencies "
                 f"(--concurrency {args.concurrency}): one size per concurrency")
    if Path(args.out).exists():
        ap.error(f"--out {args.out} exists: a run writes a file of its own (blocks of two runs would mix); "
                 "summarize several files together instead")
    if not Path(args.out).resolve().parent.is_dir():
        ap.error(f"--out {args.out}: its folder does not exist")


def summarize(paths: list[str]) -> dict:
    """Per concurrency: each server's tok/s (geometric mean over blocks) and its ratio to the best server with
    a 95 % interval from the blocks' paired log differences; the noise with and without blocking (standard
    deviation of log tok/s across blocks for one server against the residual of the additive block + server
    model)."""
    rows = []
    for i, p in enumerate(paths):
        for k, line in enumerate(open(p, encoding="utf-8"), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError:  # a run cut off mid-line: its last line is partial
                print(f"judge: {p}:{k}: not a JSON line (a run cut off while writing it?): left out", file=sys.stderr)
                continue
            if "block" in r and "server" in r:
                r["block"] = f"{i}:{r['block']}"  # blocks of different files (calls, launches) stay apart
                rows.append(r)
    if not any(r.get("tok_s") for r in rows):
        raise ValueError(f"no burst with a tok/s figure in {', '.join(paths)} (no server answered, or not a "
                         "judge.py run's output)")
    out: dict = {}
    for c in sorted({r["concurrency"] for r in rows}):
        rc = [r for r in rows if r["concurrency"] == c]
        names = sorted({r["server"] for r in rc})
        # a burst in which a request failed does not count (its tok/s would be the survivors'), and its block is
        # then incomplete
        counted = [r for r in rc if r.get("tok_s") and r.get("ok", 0) == r.get("requests", 0)]
        failed = sorted({r["server"] for r in rc if not (r.get("tok_s") and r.get("ok", 0) == r.get("requests", 0))})
        blocks: dict[str, dict[str, float]] = {}
        for r in counted:
            blocks.setdefault(r["block"], {})[r["server"]] = math.log(r["tok_s"])
        full = {b: v for b, v in blocks.items() if len(v) == len(names)}
        if not full:
            out[str(c)] = {"blocks": 0, "blocks_incomplete": len(blocks), "servers": len(names),
                           "servers_with_failed_bursts": failed,
                           "note": "no block has a counted burst of every server: nothing to compare"}
            continue
        # additive model on complete blocks: y_bs = mu + a_b + s_s + e
        mu = statistics.fmean(y for v in full.values() for y in v.values())
        a = {b: statistics.fmean(v.values()) - mu for b, v in full.items()}
        s = {n: statistics.fmean(v[n] for v in full.values()) - mu for n in names}
        resid = [v[n] - mu - a[b] - s[n] for b, v in full.items() for n in names]
        dof = (len(full) - 1) * (len(names) - 1)
        sd_resid = math.sqrt(sum(e * e for e in resid) / dof) if dof else None
        sd_raw = statistics.fmean(statistics.stdev([v[n] for v in full.values()]) for n in names) \
            if len(full) > 1 else None
        best = max(names, key=lambda n: s[n])
        per = {}
        for n in names:
            d = [v[n] - v[best] for v in full.values()]
            m, lo, hi = _tint(d)
            tau = [r["accept_length"] for r in rc if r["server"] == n and r.get("accept_length")]
            toks = sum(r["tokens"] for r in rc if r["server"] == n)
            vct = sum(r["verify_ct"] for r in rc if r["server"] == n)
            per[n] = {"tok_s_geomean": round(math.exp(mu + s[n]), 1), "vs_best": round(math.exp(m), 4),
                      "vs_best_ci95": _ci(lo, hi),
                      "accept_length": round(toks / vct, 3) if vct else None,
                      "accept_length_range": [min(tau), max(tau)] if tau else None}
        base = next((n for n in names if "baseline" in n), None)
        if base:
            for n in names:
                d = [v[n] - v[base] for v in full.values()]
                m, lo, hi = _tint(d)
                per[n]["vs_baseline"] = round(math.exp(m), 4)
                per[n]["vs_baseline_ci95"] = _ci(lo, hi)
        # the servers not shown to be more than 2 % below the best (upper interval end ≥ 0.98; the best itself);
        # with fewer than two blocks there is no interval, and only the best is named
        out[str(c)] = {"blocks": len(full), "blocks_incomplete": len(blocks) - len(full), "servers": len(names),
                       "servers_with_failed_bursts": failed, "best": best,
                       "sd_log_tok_s_unblocked": None if sd_raw is None else round(sd_raw, 4),
                       "sd_log_tok_s_blocked": None if sd_resid is None else round(sd_resid, 4),
                       "within_2pct_of_best": sorted(n for n in names if n == best or (
                           per[n]["vs_best_ci95"] is not None and per[n]["vs_best_ci95"][1] >= 0.98)),
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
        _parse_run_args(r, args)
        asyncio.run(run(args))
        return
    files = [str(Path(f).resolve()) for f in args.files]
    if len(set(files)) < len(files):
        s.error("a file named twice would count its blocks twice")
    try:
        res = summarize(args.files)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"judge: {exc}") from None
    if args.json:
        print(json.dumps(res, indent=1))
        return

    def f3(x) -> str:
        return "—" if x is None else f"{x:.3f}"

    for c, v in res.items():
        if not v["blocks"]:
            print(f"c{c}: {v['note']} (servers with failed bursts: {', '.join(v['servers_with_failed_bursts']) or 'none'})")
            continue
        print(f"c{c}: {v['blocks']} complete block(s), {v['servers']} server(s); sd of log tok/s per burst "
              f"{f3(v['sd_log_tok_s_unblocked'])} unblocked, {f3(v['sd_log_tok_s_blocked'])} within a block")
        if v["servers_with_failed_bursts"]:
            print(f"  bursts with failed requests left out: {', '.join(v['servers_with_failed_bursts'])}")
        for n, p in v["per_server"].items():
            ci = p["vs_best_ci95"]
            iv = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[no interval: one block]"
            vb = f"  ×{p['vs_baseline']:.3f} baseline" if "vs_baseline" in p else ""
            print(f"  {n:32s} {p['tok_s_geomean']:9.1f} tok/s  ×{p['vs_best']:.3f} {iv} of the best"
                  f"  τ {f3(p['accept_length'])}{vb}")
        print(f"  not shown more than 2 % below the best (interval reaches 0.98): {', '.join(v['within_2pct_of_best'])}")


if __name__ == "__main__":
    main()
