#!/usr/bin/env python3
"""``grid.json`` of a real-bed results folder, from its run directories (the shape outside checks read).

Each RUN of every ``runs/*/summary.json`` (a ``--sweep concurrency=…`` run directory holds one RUN per
concurrency) becomes one row ``{"target", "draft", "steps", "topk", "draft_tokens", "concurrency",
"output_tok_s", "accept_length", "run_dir"}`` (no speculation: steps/topk/draft_tokens null, draft
null), plus what a reader of the grid needs beside it: ``algorithm``, ``accept_rate``,
``accept_by_position`` (specdash's own, from the pooled verify-round histogram), ``tpot_ms_p50``, ``ttft_ms_p50``, ``requests`` and
``speedup_vs_baseline`` (output tok/s over the baseline row of the same concurrency *and machine*, when there is
one; over the mean of several, their drift printed) and ``machine``: run directories may sit one folder down, ``runs/<machine>/<run>/``, one folder per lent GPU
machine — tok/s compare only within one machine (the card and the host differ between loans), so every ratio is
taken against that folder's own baseline.

``tunes.json`` (when the folder has ``tunes/**/tune.json``, what ``specdash tune`` wrote on the device): one row per
tune in the contract's shape ``{"start", "mode", "concurrency", "pick", "pick_tok_s", "grid_best",
"grid_best_tok_s", "gap_pct", "launches", "wall_s"}``. ``pick_tok_s`` is the grid's figure for the pick (null when
the grid never launched it); beside it ``pick_measured_tok_s`` and ``pick_speedup`` (the tune's own launch of the
pick over the tune's own baseline, same machine) and ``grid_best_speedup``; ``gap_pct`` is taken from the grid's
figures when the pick is in the grid at that machine, else from the speedups (``gap_basis`` says which).

Usage::

    python3 benchmarks/real/collect.py benchmarks/results/real-2026-12-03   # writes grid.json (, tunes.json) there
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path


def by_position(hist: list[int] | None, steps: int | None = None, draft_tokens: int | None = None) -> list[dict] | None:
    """specdash's own ``accept_by_position`` (:func:`specdash.sglang.positions.accept_by_position`), rates rounded."""
    from specdash.sglang.positions import accept_by_position

    rows = accept_by_position(hist, steps, draft_tokens)
    return [{**r, "rate": round(r["rate"], 4) if r["rate"] is not None else None} for r in rows] if rows else None


def rows(folder: Path) -> list[dict]:
    out = []
    for summ in sorted(folder.glob("runs/**/summary.json")):
        rel = summ.parent.relative_to(folder / "runs").parts
        machine = rel[0] if len(rel) > 1 else None
        for run in json.loads(summ.read_text())["runs"]:
            eff = run.get("effective") or {}
            algo = eff.get("speculative_algorithm")
            manifest = summ.parent / "manifest.json"
            argv = (json.loads(manifest.read_text()).get("argv") if manifest.exists() else None) or []
            served = summ.parent / "served.json"  # bed.sh grid-par: an attached server, its argv beside the run
            if not argv and served.exists():
                argv = json.loads(served.read_text()).get("argv") or []
            target = draft = None
            for flag, val in itertools.pairwise(argv):
                if flag == "--model-path":
                    target = Path(val).name
                if flag == "--speculative-draft-model-path":
                    draft = Path(val).name
            if algo == "NGRAM":
                draft = "ngram"
            out.append({
                "target": target, "draft": draft, "algorithm": algo, "machine": machine,
                "steps": eff.get("speculative_num_steps") if algo == "EAGLE3" else None,
                "topk": eff.get("speculative_eagle_topk") if algo == "EAGLE3" else None,
                "draft_tokens": eff.get("speculative_num_draft_tokens"),
                "concurrency": run.get("concurrency"),
                "output_tok_s": round(run["output_tok_s"], 2) if run.get("output_tok_s") else None,
                "accept_length": round(run["accept_length"], 4) if run.get("accept_length") else None,
                "accept_rate": round(run["accept_rate"], 4) if run.get("accept_rate") else None,
                "accept_by_position": (by_position(run.get("accept_histogram"), eff.get("speculative_num_steps"),
                                                  eff.get("speculative_num_draft_tokens"))
                                      if algo == "EAGLE3" else None),
                "tpot_ms_p50": round((run.get("tpot_ms") or {}).get("p50") or 0, 4) or None,
                "ttft_ms_p50": round((run.get("ttft_ms") or {}).get("p50") or 0, 3) or None,
                "requests": run.get("requests"),
                "run_dir": str(summ.parent.relative_to(folder)),
            })
    bases: dict[tuple, list[float]] = {}
    for r in out:
        if r["algorithm"] is None and r["output_tok_s"]:
            bases.setdefault((r["machine"], r["concurrency"]), []).append(r["output_tok_s"])
    # several baselines on one machine (bed.sh grid-par's baseline ... baseline-end): their mean, the drift said
    base = {k: sum(v) / len(v) for k, v in bases.items()}
    for (machine, conc), v in sorted(bases.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if len(v) > 1:
            print(f"baseline drift on {machine} at c{conc}: {' / '.join(f'{x:.1f}' for x in v)} tok/s "
                  f"({(max(v) - min(v)) / min(v):.1%}); ratios taken against their mean", file=sys.stderr)
    for r in out:
        b = base.get((r["machine"], r["concurrency"]))
        r["speedup_vs_baseline"] = round(r["output_tok_s"] / b, 4) if b and r["output_tok_s"] else None
    return out


def _settings(d: dict | None) -> dict | None:
    if not d:
        return None
    return {"steps": d.get("speculative_num_steps"), "topk": d.get("speculative_eagle_topk"),
            "draft_tokens": d.get("speculative_num_draft_tokens")}


def tunes(folder: Path, grid: list[dict]) -> list[dict]:
    """One ``tunes.json`` row per ``tunes/**/tune.json`` (see the module docstring), judged against ``grid``.

    The grid's best at the tune's concurrency is the EAGLE3 row of highest ``speedup_vs_baseline`` (a ratio within
    one machine, so that rows of different machines and the tune's own machine can be set side by side)."""
    out = []
    for f in sorted(folder.glob("tunes/**/tune.json")):
        t = json.loads(f.read_text())
        conc = next((m.get("concurrency") for m in t.get("launch_log") or [] if m.get("concurrency")), None)
        pick = _settings(t.get("best"))
        measured = [m for m in t.get("measured") or [] if m.get("source") == "launch"]
        pick_m = next((m for m in measured if _settings(m.get("settings")) == pick), None)
        base = t.get("baseline_tok_s")
        pick_tok = pick_m.get("output_tok_s") if pick_m else None
        pick_speedup = round(pick_tok / base, 4) if pick_tok and base else None
        cands = [r for r in grid if r["algorithm"] == "EAGLE3" and r["concurrency"] == conc and r["speedup_vs_baseline"]]
        best = max(cands, key=lambda r: r["speedup_vs_baseline"], default=None)
        in_grid = [r for r in cands if {k: r[k] for k in ("steps", "topk", "draft_tokens")} == pick
                   and best and r["machine"] == best["machine"]]
        row = {"start": _settings(t.get("start")), "mode": t.get("mode"), "concurrency": conc, "pick": pick,
               "pick_tok_s": in_grid[0]["output_tok_s"] if in_grid else None,
               "grid_best": {k: best[k] for k in ("steps", "topk", "draft_tokens")} if best else None,
               "grid_best_tok_s": best["output_tok_s"] if best else None,
               "gap_pct": None, "gap_basis": None,
               "launches": t.get("launches"), "wall_s": round((t.get("time") or {}).get("wall_s") or 0, 1) or None,
               "launches_by_purpose": t.get("launches_by_purpose"), "stop_reason": t.get("stop_reason"),
               "pick_measured_tok_s": round(pick_tok, 2) if pick_tok else None,
               "tune_baseline_tok_s": round(base, 2) if base else None, "pick_speedup": pick_speedup,
               "grid_best_speedup": best["speedup_vs_baseline"] if best else None,
               "grid_best_machine": best["machine"] if best else None,
               "adaptive_schedule": bool(t.get("adaptive_schedule")),
               "tune_dir": str(f.parent.relative_to(folder))}
        if best and row["pick_tok_s"]:
            row["gap_pct"] = round(100 * (best["output_tok_s"] - row["pick_tok_s"]) / best["output_tok_s"], 2)
            row["gap_basis"] = "grid tok/s, same machine"
        elif best and pick_speedup:
            g = best["speedup_vs_baseline"]
            row["gap_pct"] = round(100 * (g - pick_speedup) / g, 2)
            row["gap_basis"] = "speedup vs each machine's own baseline (the pick is not in the grid)"
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    folder = Path((argv or sys.argv[1:])[0])
    grid = rows(folder)
    (folder / "grid.json").write_text(json.dumps(grid, indent=1) + "\n")
    tuned = tunes(folder, grid)
    if tuned:
        (folder / "tunes.json").write_text(json.dumps(tuned, indent=1) + "\n")
        for t in tuned:
            print("tune", t["mode"], t["start"], "c", t["concurrency"], "->", t["pick"], t["pick_speedup"],
                  "grid best", t["grid_best"], t["grid_best_speedup"], "gap", t["gap_pct"], t["gap_basis"])
    for r in grid:
        print(r["machine"], r["algorithm"], r["steps"], r["topk"], r["draft_tokens"], "c", r["concurrency"], r["output_tok_s"],
              r["accept_length"], r["speedup_vs_baseline"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
