"""Analytic expectation of the simulator's throughput and acceptance (no server).

Advisor validation (compare with the model, not a noisy maximum): tests and the advisor's validation compare measured
results with what the simulator's model predicts for the same flags; specdash's own
measurement code never calls this.  Command line::

    python -m specdash.sim --expected <SGLang flags> --sim-scenario X [--concurrency N]
        [--max-new-tokens M] [--prompt-tokens P] [--time-scale S] [--sim-sglang-version V]

prints one JSON object; :func:`expected` returns the same dict.

The model is the engine's, in steady state (closed loop: ``concurrency`` requests always
in flight, each ``max_new_tokens`` long with ``prompt_tokens`` of prompt):

* ``τ = 1 + Σ_k Π_{i≤k} q_i`` tokens per request-round (:mod:`specdash.sim.scenario`), or with
  ``simulate_acc_len`` L (SGLang's ``SGLANG_SIMULATE_ACC_LEN``, as the engine does it) the mean of
  ``min(⌊L⌋ or ⌈L⌉, depth + 1)`` over the floor/ceiling draw that matches L (at least 1);
* one round takes ``round_ms(b)`` with ``b = min(concurrency, max_running_requests)``;
* a request needs ``R = (max_new_tokens − 1) / τ`` rounds after its prefill (the first token
  comes from the prefill), and in a closed loop every request's prefill stalls the whole
  batch once, so its latency is ``b · prefill_ms + R · round_ms``;
* per-request output tok/s = ``max_new_tokens / latency``; total = ``b ×`` that.

Model milliseconds become wall clock through the time scale (``--time-scale``, else the
scenario's ``time_scale``): the ``*_tok_s`` figures are what a client measures against
the simulator; ``round_time_ms`` and ``latency_model_s`` stay in model time.
"""

from __future__ import annotations

import math
from typing import Any

from specdash.sim.scenario import (
    Scenario,
    SpecShape,
    accepted_distribution,
    expected_accepted,
    mean1_lognormal_factor,
    shape_success_probs,
    tree_branching,
)


def _settings_from(flags_or_settings: Any, scenario: Scenario, version: str | None) -> dict[str, Any]:
    """Normalise the first argument of :func:`expected` into effective settings."""
    from specdash.sglang.cmdline import parse_command_line
    from specdash.sglang.speculative import SpecResolution, resolve_flags

    if isinstance(flags_or_settings, SpecResolution):
        res = flags_or_settings
        return {"algorithm": res.algorithm, "steps": res.num_steps, "topk": res.eagle_topk,
                "num_draft_tokens": res.num_draft_tokens, "max_running_requests": res.max_running_requests,
                "flags": {}, "resolution": res}
    if isinstance(flags_or_settings, (str, list)):
        flags = parse_command_line(flags_or_settings).flags
    elif isinstance(flags_or_settings, dict) and any(str(k).startswith("--") for k in flags_or_settings):
        flags = dict(flags_or_settings)
    elif isinstance(flags_or_settings, dict):
        s = dict(flags_or_settings)
        algo = s.get("speculative_algorithm", s.get("algorithm"))
        flags = {}
        if algo:
            flags["--speculative-algorithm"] = algo
        for key, flag in (("speculative_num_steps", "--speculative-num-steps"), ("num_steps", "--speculative-num-steps"),
                          ("steps", "--speculative-num-steps"),
                          ("speculative_eagle_topk", "--speculative-eagle-topk"), ("eagle_topk", "--speculative-eagle-topk"),
                          ("topk", "--speculative-eagle-topk"),
                          ("speculative_num_draft_tokens", "--speculative-num-draft-tokens"),
                          ("num_draft_tokens", "--speculative-num-draft-tokens"),
                          ("max_running_requests", "--max-running-requests")):
            if s.get(key) is not None:
                flags[flag] = s[key]
    else:
        raise TypeError("expected() takes an SGLang command line, canonical flags, a settings dict or a "
                        "SpecResolution")
    from specdash.checkpoint.reader import peek_architectures

    archs = peek_architectures(flags.get("--model-path")) or peek_architectures(scenario.target_model)
    kwargs = {"version": version} if version else {}
    res = resolve_flags(flags, target_architectures=archs, **kwargs)
    return {"algorithm": res.algorithm, "steps": res.num_steps, "topk": res.eagle_topk,
            "num_draft_tokens": res.num_draft_tokens, "max_running_requests": res.max_running_requests,
            "flags": flags, "resolution": res}


def _simulated(length: float, depth: int) -> tuple[float, float, list[float]]:
    """``(τ, E[accepted], P(accepted = k))`` under ``SGLANG_SIMULATE_ACC_LEN`` = ``length`` for a
    draft of ``depth`` levels: the engine draws ⌊L⌋ with probability ``1 − (L − ⌊L⌋)``, else ⌈L⌉, and
    accepts ``clip(min(drawn, depth + 1) − 1, 0, depth)`` drafts (SGLang's ``spec_utils.py``)."""
    lo = math.floor(length)
    frac = length - lo
    dist = [0.0] * (depth + 1)
    for drawn, prob in ((lo, 1.0 - frac), (lo + 1, frac)):
        if prob > 0:
            dist[min(max(min(drawn, depth + 1) - 1, 0), depth)] += prob
    ea = sum(k * p for k, p in enumerate(dist))
    return 1.0 + ea, ea, dist


def expected(
    flags_or_settings: Any,
    scenario: Scenario | str = "healthy",
    concurrency: int = 1,
    *,
    max_new_tokens: int = 1024,
    prompt_tokens: int = 20,
    time_scale: float | None = None,
    alpha_factor: float = 1.0,
    alpha_override: float | None = None,
    temperature: float = 0.0,
    prompts: list[str] | None = None,
    seed: int | None = None,
    version: str | None = None,
    graph_max_bs: int | None = None,
    simulate_acc_len: float | None = None,
) -> dict[str, Any]:
    """What the simulator should deliver for these settings (see the module docstring).

    Args:
        flags_or_settings: an SGLang command line (str/argv), canonical flags
            (``{"--speculative-num-steps": 3, …}``), a settings dict
            (``{"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, …}``) or a
            :class:`~specdash.sglang.speculative.SpecResolution`.  SGLang's adjustments
            (``resolve_flags``) are applied first.
        scenario: a :class:`Scenario` or a scenario name/path.
        concurrency: requests kept in flight.
        max_new_tokens, prompt_tokens: request shape.
        time_scale: wall-clock speed-up (default: the scenario's).
        alpha_factor, alpha_override: a wiring factor / override (default healthy).
        temperature: sampling temperature (α × the scenario's temperature factor).
        prompts: when given (and ``seed`` too), the per-prompt α factors (category × seeded
            lognormal) are applied prompt by prompt and figures are pooled over the prompts
            as a client measures them (Σ tokens / Σ time at concurrency 1).
        seed: ``--sim-seed`` (for per-prompt factors).
        version: emulated SGLang release (for ``resolve_flags``).
        graph_max_bs: largest CUDA-graph batch (default: no eager penalty).
        simulate_acc_len: ``SGLANG_SIMULATE_ACC_LEN`` in effect (None or ≤ 0: off; the caller reads
            the environment, e.g. :func:`specdash.sglang.simulate.simulate_acc_len`): every verify
            round accepts ``min(L, depth + 1)`` tokens, L drawn as ⌊L⌋ or ⌈L⌉ with the probabilities
            that match its mean, whatever the draft (the engine's ``_decode``); α is then unused.

    Returns:
        ``{accept_length, accept_length_per_request, accept_rate, accept_histogram (probabilities),
        round_time_ms, output_tok_s_per_request, output_tok_s_total, baseline_tok_s_per_request,
        speedup_vs_baseline, latency_model_s, batch, time_scale, effective {…}}``.
    """
    from specdash.sim.scenario import load_scenario

    sc = load_scenario(scenario) if isinstance(scenario, str) else scenario
    st = _settings_from(flags_or_settings, sc, version)
    ts = float(time_scale or sc.time_scale)
    spec = None
    if st["algorithm"] and st["steps"]:
        spec = SpecShape(int(st["steps"]), int(st["topk"] or 1), int(st["num_draft_tokens"] or st["steps"] + 1))
    max_running = st["max_running_requests"] or 4096
    b = max(1, min(int(concurrency), int(max_running)))
    eager = graph_max_bs is not None and b > graph_max_bs
    round_ms = sc.round_ms(b, spec, eager=eager)
    base_round_ms = sc.round_ms(b, None, eager=eager)
    prefill_ms = sc.prefill_ms(prompt_tokens, spec=spec is not None)
    base_prefill_ms = sc.prefill_ms(prompt_tokens, spec=False)
    m = max(1, int(max_new_tokens))

    sim_len = float(simulate_acc_len) if simulate_acc_len is not None and simulate_acc_len > 0 else None

    def per_prompt(alpha: float) -> tuple[float, float, list[float]]:
        if spec is None:
            return 1.0, 0.0, [1.0]
        if sim_len is not None:
            return _simulated(sim_len, len(tree_branching(spec.steps, spec.topk, spec.num_draft_tokens)))
        q = shape_success_probs(sc.acceptance, alpha, spec.steps, spec.topk, spec.num_draft_tokens)
        ea = expected_accepted(q)
        return 1.0 + ea, ea, accepted_distribution(q)

    base_alpha = alpha_override if alpha_override is not None else \
        sc.acceptance.alpha * alpha_factor * sc.temperature_factor(temperature)
    if prompts and alpha_override is None:
        from specdash.sim.text import detect_category, unit_uniform

        alphas = [base_alpha * sc.category_factor(detect_category(p)) *
                  mean1_lognormal_factor(unit_uniform(seed or 0, p), sc.acceptance.prompt_sigma) for p in prompts]
    else:
        alphas = [base_alpha]
    taus, accs, dists, lat_model = [], [], [], []
    for a in alphas:
        tau, ea, dist = per_prompt(a)
        rounds = (m - 1) / tau
        taus.append(tau)
        accs.append(ea)
        dists.append(dist)
        lat_model.append((b * prefill_ms + rounds * round_ms) / 1000.0)
    n = len(alphas)
    total_lat = sum(lat_model)
    tau_mean = sum(taus) / n
    per_req_model = m * n / total_lat
    base_lat = (b * base_prefill_ms + (m - 1) * base_round_ms) / 1000.0
    base_per_req_model = m / base_lat
    verify_rounds = sum((m - 1) / t for t in taus)
    hist = [sum(d[k] for d in dists if k < len(d)) / n for k in range(max(len(d) for d in dists))]
    proposed = spec.proposed_per_round if spec else 1
    return {
        "simulated": True,
        "scenario": sc.name,
        "accept_length": tau_mean if spec else None,
        "accept_length_per_request": (m * n / verify_rounds) if spec else None,
        "accept_rate": (sum(accs) / n / proposed) if spec else None,
        "accept_histogram": hist if spec else None,
        "round_time_ms": round_ms,
        "prefill_ms": prefill_ms,
        "latency_model_s": total_lat / n,
        "output_tok_s_per_request": per_req_model * ts,
        "output_tok_s_total": per_req_model * b * ts,
        "baseline_tok_s_per_request": base_per_req_model * ts,
        "baseline_tok_s_total": base_per_req_model * b * ts,
        "speedup_vs_baseline": per_req_model / base_per_req_model,
        "batch": b,
        "simulate_acc_len": sim_len if spec else None,
        "concurrency": int(concurrency),
        "max_new_tokens": m,
        "prompt_tokens": prompt_tokens,
        "time_scale": ts,
        "effective": {
            "speculative_algorithm": st["algorithm"],
            "speculative_num_steps": st["steps"],
            "speculative_eagle_topk": st["topk"],
            "speculative_num_draft_tokens": st["num_draft_tokens"],
            "max_running_requests": st["max_running_requests"],
        },
        "alpha": alphas[0] if n == 1 else alphas,
    }
