"""How close specdash's wall-clock figures come to the simulator's own (speed figures, kept out of the tests:
on a loaded machine the wall clock is whatever the scheduler gives the processes, so the tests compare with
what the simulator really emitted instead — see ``tests/test_bench.py``, ``tests/test_tiers.py``).

Prints, in % off (negative: specdash's figure is lower):

* ``client``: a run's ``output_tok_s`` (client clock, first sent → last done) against the simulator's over
  the same requests (its wall clock, first received → last finished), for the four settings of
  ``tests/test_bench.py::test_measurement_agrees_with_sim_truth`` (8 requests × 384 tokens each);
* ``sim``: the simulator's wall clock against its model clock (the time it plans: Σ request times, kimi-k25
  1/1/2 at time scale 40, five prompts × 1024 tokens, one stream);
* ``tiers``: an adaptive run's per-tier ``output_tok_s`` (decode lines, the lines after each switch left out)
  against the simulator's per-tier truth over every round (their real wall time), the healthy 8B scenario at
  concurrency 8 with steps 1 ↔ 3 interleaved (``tests/test_tiers.py::test_bench_interleave_stochastic_acceptance``).

On an idle 2-core machine each should be within 2 %.  Usage: ``python benchmarks/measurement_accuracy.py
[--json]`` (about a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from specdash.bench.runner import ProfileRun, RunOptions
from specdash.profile import load_profile
from specdash.sim.testing import SEEDS_FIVE, SimProcess
from tests.test_bench import assert_run_is_what_the_sim_emitted, sim_profile, small_suite
from tests.test_sim_server import model_figures
from tests.test_tiers import interleave_file, run_with_truth, suite_of, truth_tiers
from tests.test_tiers import sim_profile as tier_profile


def pct(ours: float, truth: float) -> float:
    return round(100.0 * (ours / truth - 1.0), 2)


def client_cases(tmp: Path) -> list[dict]:
    out = []
    for scenario, spec, conc in (("healthy", (3, 1, 4), 1), ("healthy", (5, 4, 8), 4), ("kimi-k25", (1, 1, 2), 1),
                                 ("healthy", None, 2)):
        kimi = scenario == "kimi-k25"
        model, draft = ("sim:kimi-k2.5-int4", "sim:kimi-k2.5-eagle3") if kimi else (
            "sim:llama-3.1-8b", "sim:llama-3.1-8b-eagle3")
        args = ["--model-path", model, "--enable-metrics", "--sim-scenario", scenario, "--time-scale",
                "20" if kimi else "8", "--sim-seed", "3", *(["--tp-size", "8"] if kimi else [])]
        if spec:
            args += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft,
                     "--speculative-num-steps", str(spec[0]), "--speculative-eagle-topk", str(spec[1]),
                     "--speculative-num-draft-tokens", str(spec[2])]
        d = tmp / f"client-{len(out)}"
        d.mkdir()
        prof = load_profile(str(sim_profile(d, "p", scenario=scenario, model=model, draft=draft, spec=spec)))
        with SimProcess(args) as sim:
            run = asyncio.run(ProfileRun(prof, small_suite(n_prompts=4, max_tokens=384, concurrency=conc, repeats=2),
                                         RunOptions(url=sim.url, out_dir=d, preflight=False)).run())
            truth = httpx.get(sim.url + "/sim/truth", timeout=10).json()
        got = assert_run_is_what_the_sim_emitted(run, truth)
        label = f"{scenario} {'/'.join(map(str, spec)) if spec else 'no spec'} c{conc}"
        out.append({"what": "client", "case": label, "specdash_tok_s": round(run["output_tok_s"], 1),
                    "sim_tok_s": round(got["server_tok_s"], 1), "off_pct": pct(run["output_tok_s"], got["server_tok_s"])})
    return out


def sim_case() -> dict:
    args = ["--model-path", "sim:kimi-k2.5-int4", "--tp-size", "8", "--sim-scenario", "kimi-k25", "--time-scale", "40",
            "--sim-seed", "7", "--log-level", "warning", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "sim:kimi-k2.5-eagle3", "--speculative-num-steps", "1",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"]
    with SimProcess(args) as sim, httpx.Client(base_url=sim.url, timeout=60) as c:
        for p in SEEDS_FIVE:
            c.post("/generate", json={"text": p, "sampling_params": {"temperature": 0, "max_new_tokens": 1024,
                                                                     "ignore_eos": True}})
        fig = model_figures(sim.url)
    return {"what": "sim", "case": "kimi-k25 1/1/2 c1, wall vs model clock (Σ request times)",
            "specdash_tok_s": round(fig["tokens"] / fig["wall_s"], 1), "sim_tok_s": round(fig["tokens"] / fig["model_s"], 1),
            "off_pct": pct(fig["model_s"], fig["wall_s"])}


def tier_cases(tmp: Path) -> list[dict]:
    prof = tier_profile(tmp, "inter8b", ["--speculative-adaptive", "--speculative-adaptive-config", str(interleave_file(tmp)),
                                         "--cuda-graph-max-bs-decode", "8", "--decode-log-interval", "1"],
                        tiny=False, time_scale=2.0)
    prompts = [{"text": f"Prompt {i}: explain a topic of your choice in depth."} for i in range(16)]
    run, before, after = run_with_truth(tmp, prof, suite_of(prompts, max_tokens=2048, concurrency=8))
    truth = truth_tiers(before, after)
    out = []
    for t in run["tiers"]:
        s = t["speculative_num_steps"]
        real = truth[s]["output_tokens"] / truth[s]["busy_s"]
        out.append({"what": "tiers", "case": f"healthy 8B c8, steps {s} (decode lines vs every round)",
                    "specdash_tok_s": round(t["output_tok_s"], 1), "sim_tok_s": round(real, 1),
                    "off_pct": pct(t["output_tok_s"], real)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        rows = [*client_cases(Path(d)), sim_case(), *tier_cases(Path(d))]
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['what']:>6}  {r['case']:<58} {r['specdash_tok_s']:>9} vs {r['sim_tok_s']:>9} tok/s  "
                  f"{r['off_pct']:+.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
