"""Bookkeeping cost of a large run directory: ``--resume`` loading and the summary of N records.

Builds a synthetic run directory (``requests.jsonl`` of ``--records`` records, each the runner's
exact line shape: :meth:`GenerateResult.to_json` plus ``prompt_index``, ``repeat``, ``category``,
``segment``; ``--tokens`` completion tokens and ``tokens − 1`` ITLs per record, ITLs spread over
events of 1–4 tokens as the client does, at 0.1 µs resolution; 1 % failed records), then, in a
fresh child process (so that the peak RSS is the measured phases' own), times:

* ``resume load``: what ``specdash --bench --resume RUNDIR`` does before it sends a request —
  ``resume_complete``'s done keys, the runner's prior records folded into its statistics, the
  remaining (prompt, repeat) items;
* ``summary``: :meth:`RunStats.summary` + :meth:`RunStats.goodput` of all records;
* ``csv export``: ``requests.csv`` written from ``requests.jsonl`` (every run's close);
* ``checkpoint write``: ``requests.stats.npz``, what every run's close writes (the statistics
  folded up to the file's end);

and prints seconds per phase and the child's peak RSS (MB, ``resource.getrusage`` ru_maxrss);
then, in a second child, the resume load and summary again, from that checkpoint (a run that
closed — ended, Ctrl-C, SIGTERM — leaves one; a SIGKILLed run resumes from its last close's
checkpoint and folds the records after it, or from the start without one).
Target (issue #14): resume load and the summary of 100k records in ≤ 5 s and ≤ 500 MB RSS.

Measured on the shared 2-core dev machine (load average ~2 from other work: figures move by
±50 % between runs, hence the bare orjson pass printed as the floor), 100 000 records × 1024
tokens (1.06 GB ``requests.jsonl``, 101 M ITLs):

* before (commit ce47b1c: ``read_text().splitlines()`` + ``json.loads`` of every line, the file
  read twice — ``resume_complete`` and the runner —, ``RunStats`` holding the list of dicts, ITLs
  pooled in a Python list at summary time): resume load 104 s, summary 15.9 s, csv export 45 s,
  peak RSS 11 150 MB (9 700 MB after the load);
* after (one streamed orjson pass folded into running sums and compact columns, ITLs counted by
  0.1 µs tick): resume load 7.3–12.8 s against a bare orjson pass of 4.4–6.8 s over the same file,
  summary 0.09–0.15 s, csv export 5.9–10 s, peak RSS 128–205 MB.

100 000 records × 256 tokens (``--tokens 256``: 312 MB, 25 M ITLs), same machine:

* before: resume load 29.8 s, summary 7.2 s, csv export 18.4 s, peak RSS 3 360 MB;
* after: resume load 3.9 s (bare orjson pass 1.5 s), summary 0.16 s, csv export 5.2 s, peak RSS
  175 MB.

With the resume checkpoint (2026-12-02, the same machine quiet): 100 000 × 1024 tokens — resume
load from the checkpoint 0.41–0.47 s, summary 0.12 s, peak RSS 276 MB (checkpoint 40.8 MB, written
in 0.11–0.14 s); without it (a run killed before any close) 5.4–5.5 s against a bare orjson pass of
2.5–2.9 s, peak 284 MB.  100 000 × 256 tokens — from the checkpoint 0.42 s, summary 0.07 s, peak
256 MB; without it 2.31 s.

With the checkpoint verified in full (issue 23: the sha256 of every byte of ``requests.jsonl`` up to its
offset, and an HMAC over its figures), 100 000 × 1024 tokens on the same machine under a heavy load from other
work (its bare orjson pass took 13.45 s, ~5× its quiet figure): resume load from the checkpoint 1.44 s (the
1,064 MB hashed), checkpoint write 1.19 s, peak RSS 291 MB; without a checkpoint 24.2 s (1.8× the bare pass, as
before: the record checks of ``records.record_problem`` cost no more than a few per cent).

The ≤ 5 s / ≤ 500 MB target is met by the summary (0.1 s) and the memory (≤ 285 MB) in both
shapes and by the resume load in both when the run closed; a 1024-token run killed before it
ever closed takes 5.4 s here (a bare orjson pass over its 1 GB of JSON, 101 M floats, alone
takes 2.5–2.9 s).

Usage: ``python benchmarks/bookkeeping.py [--records 100000] [--tokens 1024] [--dir DIR] [--keep] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPTS = 100
CATEGORIES = ("chat", "coding", "math", "summarize")


def build(path: Path, records: int, tokens: int, seed: int = 0) -> None:
    """Write ``path/requests.jsonl`` (+ ``manifest.json``/``summary.json``) with ``records``
    synthetic records of ``tokens`` completion tokens each (module docstring)."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    t0 = 1_796_000_000.0
    repeats = -(-records // PROMPTS)
    with open(path / "requests.jsonl", "wb") as fh:
        for i in range(records):
            rep, p = divmod(i, PROMPTS)
            ok = rng.random() >= 0.01
            sizes = rng.integers(1, 5, size=tokens)  # tokens per event
            sizes = sizes[np.cumsum(sizes) <= tokens - 1]
            gaps = np.round((0.002 + rng.exponential(0.004, size=sizes.size)) / sizes, 7)
            itl = np.repeat(gaps, sizes).tolist()
            ttft = round(float(0.01 + rng.exponential(0.05)), 9)
            e2e = ttft + sum(itl)
            sent = t0 + i * 0.05
            nver = max(1, tokens // 3)
            rec = {
                "rid": f"specdash-{i:016x}", "ok": bool(ok), "error": None if ok else "HTTP 500: synthetic",
                "prompt_tokens": int(rng.integers(10, 40000)), "completion_tokens": tokens if ok else 0,
                "started_at": sent, "ts_sent": sent, "ts_done": sent + e2e, "t_sent": 3000.0 + i * 0.05,
                "t_first": 3000.0 + i * 0.05 + ttft, "t_done": 3000.0 + i * 0.05 + e2e, "ttft_s": ttft,
                "e2e_s": e2e, "server_e2e_s": e2e - 0.001,
                "tpot_s": (e2e - ttft) / (tokens - 1) if tokens > 1 else None,
                "finish_reason": "length", "events": int(sizes.size) + 1,
                "spec": {"verify_ct": nver, "correct_drafts": tokens - nver, "proposed_drafts": 3 * nver,
                         "histogram": [1, 2, 3, nver - 6], "accept_length": tokens / nver,
                         "accept_rate": (tokens - nver) / (3 * nver)} if ok else None,
                "itl_s": itl if ok else [],
                "prompt_index": p, "repeat": rep, "category": CATEGORIES[p % len(CATEGORIES)],
                "segment": 0,
            }
            fh.write(orjson.dumps(rec) + b"\n")
    (path / "manifest.json").write_text(json.dumps({"profile": "synthetic", "repeats": repeats}))
    (path / "summary.json").write_text(json.dumps({"runs": [{"partial": True}]}))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(path: Path, checkpointed: bool = False) -> dict:
    """The phases of the module docstring on ``path``; {phase: seconds, "peak_rss_mb": MB}.

    ``checkpointed``: resume from the checkpoint the first measurement wrote (no csv export);
    otherwise any checkpoint is removed first and written at the end (its cost timed)."""
    import orjson

    from specdash.bench.rundir import STATS_CHECKPOINT, RunDir
    from specdash.collect.stream import RunStats

    out: dict = {"rss_start_mb": _rss_mb()}
    if not checkpointed:
        (path / STATS_CHECKPOINT).unlink(missing_ok=True)
    rd = RunDir(path)
    t = time.perf_counter()
    with open(rd.requests_path, "rb") as fh:  # the floor: one bare orjson pass (warms the page cache too)
        for line in fh:
            orjson.loads(line)
    out["orjson_pass_s"] = time.perf_counter() - t
    t = time.perf_counter()
    if hasattr(rd, "load_stats"):  # the streaming path
        done = rd.done_keys()                      # resume_complete
        stats, segment = rd.load_stats()           # ProfileRun._open_rundir
        keys = stats.done_keys()                   # ProfileRun._remaining_items
        remaining = [(p, r) for r in range(1000) for p in range(PROMPTS) if (p, r) not in keys]
    else:  # the path before the change (list of dicts)
        records = rd.read_requests()
        done = {(r.get("prompt_index"), r.get("repeat")) for r in records if r.get("ok")}
        prior = rd.read_requests()
        stats = RunStats()
        stats.extend(prior)
        segment = 1 + max((int(r.get("segment", 0)) for r in prior), default=-1)
        del records, prior
        keys = {(r["prompt_index"], r["repeat"]) for r in stats.records if r.get("ok")}
        remaining = [(p, r) for r in range(1000) for p in range(PROMPTS) if (p, r) not in keys]
    out["resume_load_s"] = time.perf_counter() - t
    out["done"], out["remaining"], out["segment"] = len(done), len(remaining), segment
    out["rss_after_load_mb"] = _rss_mb()
    t = time.perf_counter()
    s = stats.summary()
    s.update(stats.goodput({"ttft_ms": 100.0, "tpot_ms": 10.0}))
    out["summary_s"] = time.perf_counter() - t
    out["rss_after_summary_mb"] = _rss_mb()
    out["requests"], out["itl_p99_ms"] = s["requests"], (s["itl_ms"] or {}).get("p99")
    if not checkpointed and hasattr(rd, "write_checkpoint"):
        t = time.perf_counter()
        ck = rd.write_checkpoint()
        out["checkpoint_write_s"] = time.perf_counter() - t
        out["checkpoint_mb"] = ck.stat().st_size / 1e6 if ck else None
    if not checkpointed:
        t = time.perf_counter()
        rd.write_requests_csv()
        out["csv_export_s"] = time.perf_counter() - t
    out["peak_rss_mb"] = _rss_mb()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--dir", type=Path, help="use (or build once into) this run directory")
    ap.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process
    ap.add_argument("--checkpointed", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.measure:
        print(json.dumps(measure(a.measure, a.checkpointed)))
        return 0
    tmp = None
    path = a.dir
    if path is None:
        tmp = tempfile.mkdtemp(prefix="specdash-bookkeeping-")
        path = Path(tmp) / "run"
    if not (path / "requests.jsonl").is_file():
        t = time.perf_counter()
        build(path, a.records, a.tokens)
        print(f"built {path}/requests.jsonl: {a.records} records × {a.tokens} tokens, "
              f"{(path / 'requests.jsonl').stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    figs = []
    for extra in ([], ["--checkpointed"]):
        res = subprocess.run([sys.executable, __file__, "--measure", str(path), *extra], env=env, check=True,
                             capture_output=True, text=True)
        figs.append(json.loads(res.stdout))
    fig, ck = figs
    if a.json:
        print(json.dumps({"no_checkpoint": fig, "checkpointed": ck}, indent=2))
    else:
        print(f"bare orjson pass over requests.jsonl (the floor) {fig['orjson_pass_s']:.2f} s")
        print(f"resume load, no checkpoint (a run killed before it closed) {fig['resume_load_s']:.2f} s "
              f"({fig['done']} done, {fig['remaining']} remaining); summary {fig['summary_s']:.2f} s; "
              f"csv export {fig['csv_export_s']:.2f} s; peak RSS {fig['peak_rss_mb']:.0f} MB (after load "
              f"{fig['rss_after_load_mb']:.0f} MB, after summary {fig['rss_after_summary_mb']:.0f} MB)")
        if fig.get("checkpoint_write_s") is not None:
            print(f"checkpoint write at close {fig['checkpoint_write_s']:.2f} s ({fig['checkpoint_mb']:.1f} MB)")
            print(f"resume load from the checkpoint {ck['resume_load_s']:.2f} s ({ck['done']} done); "
                  f"summary {ck['summary_s']:.2f} s; peak RSS {ck['peak_rss_mb']:.0f} MB (after load "
                  f"{ck['rss_after_load_mb']:.0f} MB)")
            if ck["done"] != fig["done"] or ck["itl_p99_ms"] != fig["itl_p99_ms"] or ck["requests"] != fig["requests"]:
                print("MISMATCH between the checkpointed and the full read", file=sys.stderr)
                return 1
    if tmp and not a.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
