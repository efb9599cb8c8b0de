"""Agreement of specdash's run-scoped numbers with SGLang's own, for one run directory.

Compares, for a finished run (``requests.jsonl`` + ``metrics-before/after.txt`` +
``summary.json``):

- accept length: specdash's pooled Σ completion_tokens / Σ spec_verify_ct (``summary.json``)
  vs SGLang's per-request ``meta_info.spec_accept_length`` (token-weighted, i.e. the same
  pooling) vs the ``/metrics`` counter deltas Δgeneration_tokens_total / Δspec_verify_calls_total;
- output tok/s: specdash's client-side Σ tokens / wall duration vs Σ completion_tokens / Σ
  ``meta_info.e2e_latency`` (the server's own per-request latency; concurrency 1 runs only: with
  requests in flight together Σ e2e is not the run's wall time, so it is null there) and vs the
  ``/metrics`` Δgeneration_tokens_total over the same wall window;
- per-request tok/s (every concurrency): the mean over requests of completion_tokens / the client's
  e2e vs completion_tokens / ``meta_info.e2e_latency``.

Usage: ``python benchmarks/h200/agreement.py RUNDIR [RUNDIR …]`` — prints JSON, one object per run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdash.sglang.metrics import counter_delta, parse_metrics


def rel(a, b):
    """Relative difference |a − b| / b, None when either is missing."""
    if a is None or b is None or b == 0:
        return None
    return abs(a - b) / abs(b)


def agreement(run_dir: Path, point: int = 0) -> dict:
    """The comparison for one run directory (see module docstring); ``point``: which RUN of a
    ``--sweep`` run directory (its records carry ``concurrency``, its metrics files ``-c<N>``)."""
    runs = json.loads((run_dir / "summary.json").read_text())["runs"]
    summary = runs[point]
    sweep = "sweep_point" in summary
    conc = summary.get("concurrency")
    recs = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines() if line.strip()]
    recs = [r for r in recs if r.get("ok") and (not sweep or r.get("concurrency") == conc)]
    suffix = f"-c{conc}" if sweep else ""
    tokens = sum(r["completion_tokens"] for r in recs)
    spec = [r for r in recs if (r.get("spec") or {}).get("verify_ct")]
    meta_tau = None
    if spec:
        # token-weighted mean of meta_info.spec_accept_length == Σ tokens / Σ verify_ct
        meta_tau = sum(r["spec"]["accept_length"] * r["spec"]["verify_ct"] for r in spec) / sum(
            r["spec"]["verify_ct"] for r in spec)
    before = parse_metrics((run_dir / f"metrics-before{suffix}.txt").read_text())
    after = parse_metrics((run_dir / f"metrics-after{suffix}.txt").read_text())
    d_gen = counter_delta(before, after, "sglang:generation_tokens_total")
    d_ver = counter_delta(before, after, "sglang:spec_verify_calls_total")
    metrics_tau = d_gen / d_ver if d_gen and d_ver else None
    server_e2e = sum(r["server_e2e_s"] for r in recs if r.get("server_e2e_s"))
    meta_tok_s = tokens / server_e2e if server_e2e and (conc or 1) == 1 else None
    both = [r for r in recs if r.get("server_e2e_s") and r.get("e2e_s")]
    per_client = sum(r["completion_tokens"] / r["e2e_s"] for r in both) / len(both) if both else None
    per_meta = sum(r["completion_tokens"] / r["server_e2e_s"] for r in both) / len(both) if both else None
    dur = summary["duration_s"]
    return {
        "run_dir": str(run_dir),
        "profile": summary["profile"],
        "concurrency": conc,
        "requests": len(recs),
        "output_tokens": tokens,
        "accept_length": {"specdash": summary["accept_length"], "meta_info": meta_tau, "metrics": metrics_tau,
                          "rel_vs_meta": rel(summary["accept_length"], meta_tau),
                          "rel_vs_metrics": rel(summary["accept_length"], metrics_tau)},
        "output_tok_s": {"specdash": summary["output_tok_s"], "meta_info_e2e": meta_tok_s,
                         "metrics_generation_tokens": (d_gen / dur) if d_gen and dur else None,
                         "metrics_generation_tokens_delta": d_gen,
                         "rel_vs_meta": rel(summary["output_tok_s"], meta_tok_s),
                         "rel_vs_metrics": rel(summary["output_tok_s"], (d_gen / dur) if d_gen and dur else None)},
        "per_request_tok_s": {"specdash": per_client, "meta_info": per_meta, "rel_vs_meta": rel(per_client, per_meta)},
    }


if __name__ == "__main__":
    out = []
    for p in sys.argv[1:]:
        n = len(json.loads((Path(p) / "summary.json").read_text())["runs"])
        out += [agreement(Path(p), i) for i in range(n)]
    print(json.dumps(out, indent=2))
