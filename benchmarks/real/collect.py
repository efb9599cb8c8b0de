#!/usr/bin/env python3
"""``grid.json`` of a real-bed results folder, from its run directories (the shape outside checks read).

Each RUN of every ``runs/*/summary.json`` (a ``--sweep concurrency=…`` run directory holds one RUN per
concurrency) becomes one row ``{"target", "draft", "steps", "topk", "draft_tokens", "concurrency",
"output_tok_s", "accept_length", "run_dir"}`` (no speculation: steps/topk/draft_tokens null, draft
null), plus what a reader of the grid needs beside it: ``algorithm``, ``accept_rate``,
``accept_by_position`` (specdash's own, from the pooled verify-round histogram), ``tpot_ms_p50``, ``ttft_ms_p50``, ``requests`` and
``speedup_vs_baseline`` (output tok/s over the baseline row of the same concurrency, when there is one).

Usage::

    python3 benchmarks/real/collect.py benchmarks/results/real-2026-12-02   # writes grid.json there
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
    for summ in sorted(folder.glob("runs/*/summary.json")):
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
                "target": target, "draft": draft, "algorithm": algo,
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
    base = {r["concurrency"]: r["output_tok_s"] for r in out if r["algorithm"] is None and r["output_tok_s"]}
    for r in out:
        b = base.get(r["concurrency"])
        r["speedup_vs_baseline"] = round(r["output_tok_s"] / b, 4) if b and r["output_tok_s"] else None
    return out


def main(argv: list[str] | None = None) -> int:
    folder = Path((argv or sys.argv[1:])[0])
    grid = rows(folder)
    (folder / "grid.json").write_text(json.dumps(grid, indent=1) + "\n")
    for r in grid:
        print(r["algorithm"], r["steps"], r["topk"], r["draft_tokens"], "c", r["concurrency"], r["output_tok_s"],
              r["accept_length"], r["speedup_vs_baseline"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
