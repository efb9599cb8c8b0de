#!/usr/bin/env python3
"""Fit the simulator scenario ``real-smol`` to the real-draft test bed's measured runs.

Reads the run directories under one or more results folders (``summary.json`` + ``requests.jsonl[.gz]``
of each EAGLE3 launch and of the no-speculation baseline; any depth below the folder) and fits the
parameters of the simulator's model (:mod:`specdash.sim.scenario`) to them:

acceptance
    ``alpha``, ``decay``, ``prompt_sigma`` and the tree parameter — ``tree_gain`` (``--tree-model gain``)
    or the rank decay ``rank_decay`` ρ (``--tree-model rank``, the default: SGLang's kept tree node by
    node, :mod:`specdash.sglang.tree`) — by least squares over the pooled verify-round histograms of every
    EAGLE3 launch at concurrency 1 (chains and trees together; each histogram is normalised to fractions,
    so a launch weighs the same whatever its length).  The model's pooled histogram mixes per-prompt
    α = ``alpha`` × a mean-1 lognormal factor of σ ``prompt_sigma`` (``nodes``-point quadrature), each
    prompt weighted by its verify rounds, as SGLang pools them.  The mixture is what lets conditional
    acceptance *rise* with depth as measured (prompts that reach deep positions are the easy ones),
    which a single α·d^(i−1) cannot.
timing
    ``target.step_ms`` from the baseline's per-request decode time per token; ``draft.step_ms`` and
    ``draft.round_overhead_ms`` from the chains' per-request decode time per verify round
    (median over the second half of a launch's requests of (e2e − TTFT) / verify rounds) by robust
    least squares on ``steps``;
    ``draft.topk_growth`` from the tree launches' excess over the chain line.  Only launches measured
    at one concurrency count here (a ``--sweep concurrency=…`` launch's requests mix the loads).

Usage::

    python3 benchmarks/real/calibrate.py benchmarks/results/real-2026-12-02/runs [more roots] \
        [--tree-model rank|gain] [--json]

Prints the fitted values, each launch's measured vs fitted accept length and round time, and the
TOML fragment for ``specdash/sim/scenarios/real-smol.toml``.  Needs numpy and scipy.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path


def read_runs(*roots: Path) -> list[dict]:
    """One dict per run directory under ``roots`` (any depth): settings, the concurrency-1 run's pooled
    histogram and accept length, per-request times (launches of one concurrency only)."""
    out = []
    dirs = sorted({p.parent for root in roots for p in Path(root).glob("**/summary.json")})
    for d in dirs:
        runs = json.loads((d / "summary.json").read_text())["runs"]
        run = min(runs, key=lambda r: r["concurrency"])
        single = len(runs) == 1
        eff = run["effective"]
        recs_path = d / "requests.jsonl.gz" if (d / "requests.jsonl.gz").exists() else d / "requests.jsonl"
        opener = gzip.open if recs_path.suffix == ".gz" else open
        recs = [json.loads(line) for line in opener(recs_path, "rt") if line.strip()]
        recs = [r for r in recs if r.get("ok") and r.get("completion_tokens", 0) > 1]
        per_round, per_token = [], []
        # the first requests of a launch ran slower (kernels still warming: 3.8 vs 3.0 ms a round in the
        # first and second half of two launches on 2026-12-02, with the suite's 2 warm-up requests), so
        # timing comes from the second half of each launch's requests
        for r in (recs[len(recs) // 2:] if single else []):
            decode_s = r["e2e_s"] - r["ttft_s"]
            spec = r.get("spec") or {}
            if spec.get("verify_ct"):
                per_round.append(1000.0 * decode_s / max(1, spec["verify_ct"] - 1))
            per_token.append(1000.0 * decode_s / (r["completion_tokens"] - 1))
        out.append({
            "dir": d.name, "algorithm": eff["speculative_algorithm"], "steps": eff["speculative_num_steps"],
            "topk": eff["speculative_eagle_topk"], "draft_tokens": eff["speculative_num_draft_tokens"],
            "output_tok_s": run["output_tok_s"], "accept_length": run["accept_length"],
            "histogram": run["accept_histogram"], "concurrency": run["concurrency"],
            "round_ms": statistics.median(per_round) if per_round else None,
            "token_ms": statistics.median(per_token) if per_token else None,
            "ttft_ms": (run.get("ttft_ms") or {}).get("p50"),
        })
    return out


def model_hist(alpha: float, decay: float, sigma: float, tree: float, steps: int, topk: int, ndt: int,
               nodes: int = 24, tree_model: str = "gain") -> tuple[list[float], float]:
    """Round-weighted pooled histogram (fractions) and pooled accept length under the mixture; ``tree`` is
    ``tree_gain`` (``tree_model`` "gain") or the rank decay ρ ("rank")."""
    from statistics import NormalDist

    from specdash.sim.scenario import AcceptanceSpec, accepted_distribution, shape_success_probs

    acc = AcceptanceSpec(alpha=alpha, decay=decay, tree_model=tree_model,
                         **({"rank_decay": tree} if tree_model == "rank" else {"tree_gain": tree}))
    hist: list[float] = []
    rounds_total = tokens_total = 0.0
    for j in range(nodes):
        z = NormalDist().inv_cdf((j + 0.5) / nodes)
        a = alpha * math.exp(-0.5 * sigma * sigma + sigma * z)
        dist = accepted_distribution(shape_success_probs(acc, a, steps, topk, ndt))
        if not hist:
            hist = [0.0] * len(dist)
        tau = 1.0 + sum(k * p for k, p in enumerate(dist))
        w = 1.0 / tau  # rounds per token: a prompt's share of the pooled rounds
        for k, p in enumerate(dist):
            hist[k] += w * p
        rounds_total += w
        tokens_total += w * tau
    return [h / rounds_total for h in hist], tokens_total / rounds_total


def fit(runs: list[dict], tree_model: str = "gain", nodes: int = 24) -> dict:
    """The fitted scenario values (module docstring) and one row per EAGLE3 launch, measured vs fitted.

    ``tree_model`` "gain" fits ``tree_gain`` ∈ [0, 1]; "rank" fits ``rank_decay`` ∈ (0.01, 0.99).
    ``decay`` is bounded to [0.5, 1.0], the range a scenario accepts."""
    import numpy as np
    from scipy.optimize import least_squares

    spec = [r for r in runs if r["algorithm"] == "EAGLE3" and r["histogram"]]
    base = [r for r in runs if not r["algorithm"]]

    def resid(x):
        alpha, decay, sigma, tree = x
        out = []
        for r in spec:
            h = np.array(r["histogram"], float)
            h = h / h.sum()
            m, _ = model_hist(alpha, decay, sigma, tree, r["steps"], r["topk"], r["draft_tokens"], nodes, tree_model)
            n = max(len(h), len(m))
            out.extend(np.pad(h, (0, n - len(h))) - np.pad(np.array(m), (0, n - len(m))))
        return out

    lo_t, hi_t, x0_t = (0.01, 0.99, 0.6) if tree_model == "rank" else (0.0, 1.0, 0.5)
    acc = least_squares(resid, x0=[0.7, 0.98, 0.4, x0_t], bounds=([0.05, 0.5, 0.0, lo_t], [1.0, 1.0, 1.5, hi_t]))
    alpha, decay, sigma, tree = (float(v) for v in acc.x)

    chains = [r for r in spec if r["topk"] == 1 and r["round_ms"]]
    s = np.array([r["steps"] for r in chains], float)
    t = np.array([r["round_ms"] for r in chains], float)
    base_ms = [r["token_ms"] for r in base if r["token_ms"]]
    step_ms = statistics.median(base_ms) if base_ms else 1.0
    # round = steps * draft_step + verify(t_fwd ≈ step_ms) + overhead; fit draft_step >= 0, overhead >= 0
    # robust (soft L1): one launch in six ran a third slower than its neighbours throughout (3/1/4 on
    # 2026-12-02); a floor of 0.02 ms a draft step keeps the tree fit finite
    lin = least_squares(lambda x: x[0] * s + step_ms + x[1] - t, x0=[0.1, 1.0], loss="soft_l1", f_scale=0.1,
                        bounds=([0.02, 0.0], [5.0, 20.0]))
    draft_step, overhead = (float(v) for v in lin.x)
    trees = [r for r in spec if r["topk"] > 1 and r["round_ms"]]
    topk_growth = None
    if trees and draft_step > 0:
        g = []
        for r in trees:
            excess = r["round_ms"] - (step_ms + overhead)
            g.append(max(0.0, (excess / (r["steps"] * draft_step) - 1.0) / (r["topk"] - 1)))
        topk_growth = statistics.median(g)
    rows = []
    for r in spec:
        _, tau = model_hist(alpha, decay, sigma, tree, r["steps"], r["topk"], r["draft_tokens"], nodes, tree_model)
        k = r["topk"]
        mult = 1.0 if k == 1 or topk_growth is None else 1.0 + topk_growth * (k - 1)
        rows.append({"setting": f"{r['steps']}/{r['topk']}/{r['draft_tokens']}",
                     "accept_length": round(r["accept_length"], 3), "fit_accept_length": round(tau, 3),
                     "round_ms": round(r["round_ms"], 3) if r["round_ms"] else None,
                     "fit_round_ms": round(r["steps"] * draft_step * mult + step_ms + overhead, 3),
                     "output_tok_s": round(r["output_tok_s"], 1)})
    return {"alpha": alpha, "decay": decay, "prompt_sigma": sigma, "tree_model": tree_model,
            ("rank_decay" if tree_model == "rank" else "tree_gain"): tree,
            "target_step_ms": step_ms, "draft_step_ms": draft_step, "round_overhead_ms": overhead,
            "topk_growth": topk_growth, "acceptance_cost": float(acc.cost), "rows": rows,
            "baseline_tok_s": base[0]["output_tok_s"] if base else None,
            "ttft_ms": statistics.median([r["ttft_ms"] for r in runs if r["ttft_ms"]])}


#: the timing parameters :func:`fit_grid_timing` fits, as (section, key, lower, upper, start)
GRID_TIMING = (
    ("target", "step_ms", 0.05, 20.0, 1.0),
    ("target", "per_token_growth", 0.0, 0.2, 0.003),
    ("target", "compute_ms_per_token", 0.0, 0.5, 0.002),
    ("target", "per_request_ms", 0.0, 2.0, 0.1),
    ("draft", "step_ms", 0.0, 5.0, 0.05),
    ("draft", "per_token_growth", 0.0, 1.0, 0.02),
    ("draft", "topk_growth", 0.0, 10.0, 0.5),
    ("draft", "round_overhead_ms", 0.0, 20.0, 1.5),
)
KNEES = (64, 128, 256, 512, 1024, 2048, 4096)


def fit_grid_timing(grid: list[dict], machine: str, others: tuple[str, ...] = ()) -> dict:
    """Fit the scenario's round-time model to one machine's grid (``grid.json`` rows of ``collect.py``).

    A round's measured time is ``tpot_ms_p50 × accept_length`` (TPOT: ms per output token after the
    first, per request; τ tokens a round), the baseline's is its TPOT; the model is
    :meth:`specdash.sim.scenario.Scenario.round_ms` at batch = the row's concurrency (a closed loop keeps
    that many requests running).  Robust least squares (soft L1 on log time, scale 0.1: one measurement
    in this bed is off by 13–23 %) over :data:`GRID_TIMING`, the knee chosen from :data:`KNEES`;
    ``draft.per_request_overhead_ms`` is held at 0 (``target.per_request_ms`` carries the host's
    per-request time, speculative or not).  ``others``: machines whose rows join the fit with a speed
    factor of their own (one free log offset each: tok/s must not be compared across loans, shapes may) —
    they carry the wide trees (b × draft tokens past 256) that ``machine`` alone leaves unconstrained.

    Returns:
        ``{"machine", "knee_tokens", <section.key>: value …, "speed": {machine: factor}, "rows": [{machine,
        setting, concurrency, round_ms, fit_round_ms}], "rms_log": …}``.

    Raises:
        ValueError: a machine has no rows with TPOT.
    """
    import copy

    import numpy as np
    from scipy.optimize import least_squares

    from specdash.sim.scenario import SpecShape, load_scenario

    machines = (machine, *others)
    rows = [r for r in grid if r["machine"] in machines and r.get("tpot_ms_p50") and r["algorithm"] in ("EAGLE3", None)]
    for m in machines:
        if not any(r["machine"] == m for r in rows):
            raise ValueError(f"fit_grid_timing: no rows with tpot_ms_p50 for machine {m!r} in the grid")
    shapes = [SpecShape(r["steps"], r["topk"], r["draft_tokens"]) if r["algorithm"] else None for r in rows]
    meas = np.log([r["tpot_ms_p50"] * (r["accept_length"] if r["algorithm"] else 1.0) for r in rows])
    which = np.array([machines.index(r["machine"]) for r in rows])
    base = load_scenario("real-smol")
    base.draft.per_request_overhead_ms = 0.0
    n = len(GRID_TIMING)

    def scenario(x, knee):
        sc = copy.deepcopy(base)
        sc.target.knee_tokens = knee
        for (sec, key, *_), v in zip(GRID_TIMING, x[:n], strict=True):
            setattr(getattr(sc, sec), key, float(v))
        return sc

    def resid(x, knee):
        sc = scenario(x, knee)
        offset = np.concatenate([[0.0], x[n:]])[which]
        return np.log([sc.round_ms(r["concurrency"], sh) for r, sh in zip(rows, shapes, strict=True)]) + offset - meas

    lo, hi, x0 = ([g[i] for g in GRID_TIMING] + [v] * len(others) for i, v in ((2, -1.0), (3, 1.0), (4, 0.0)))
    best = None
    for knee in KNEES:
        res = least_squares(resid, x0=x0, args=(knee,), bounds=(lo, hi), loss="soft_l1", f_scale=0.1)
        if best is None or res.cost < best[1].cost:
            best = (knee, res)
    knee, res = best
    sc = scenario(res.x, knee)
    offset = np.concatenate([[0.0], res.x[n:]])
    out: dict = {"machine": machine, "knee_tokens": knee,
                 **{f"{sec}.{key}": float(v) for (sec, key, *_), v in zip(GRID_TIMING, res.x[:n], strict=True)},
                 "speed": {m: float(np.exp(-offset[i])) for i, m in enumerate(machines)}}
    out["rows"] = [{"machine": r["machine"],
                    "setting": f"{r['steps']}/{r['topk']}/{r['draft_tokens']}" if r["algorithm"] else "baseline",
                    "concurrency": r["concurrency"], "round_ms": round(float(np.exp(m)), 3),
                    "fit_round_ms": round(sc.round_ms(r["concurrency"], sh) * float(np.exp(offset[i])), 3)}
                   for r, sh, m, i in zip(rows, shapes, meas, which, strict=True)]
    out["rms_log"] = float(np.sqrt(np.mean(resid(res.x, knee) ** 2)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="+", help="results folders holding run directories (any depth)")
    ap.add_argument("--tree-model", choices=("rank", "gain"), default="rank")
    ap.add_argument("--grid", type=Path, help="a grid.json (collect.py) to fit the round-time model to as well")
    ap.add_argument("--machine", help="the grid's machine to fit the timing to (--grid)")
    ap.add_argument("--with-machines", default="", help="comma-separated machines that join the timing fit with "
                    "a speed factor of their own (--grid)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    res = fit(read_runs(*a.runs), a.tree_model)
    if a.grid:
        others = tuple(m for m in a.with_machines.split(",") if m)
        res["grid_timing"] = fit_grid_timing(json.loads(a.grid.read_text()), a.machine, others)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    for row in res["rows"]:
        print(row)
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
