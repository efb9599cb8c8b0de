"""SIMULATED: a profile whose numbers SGLang makes up (simulated acceptance, random weights).

SGLang has two benchmark-only stand-ins (:mod:`specdash.sglang.simulate` restates them):
``SGLANG_SIMULATE_ACC_LEN`` replaces every verify result with a drawn accept length, and
``--load-format dummy`` / ``--speculative-draft-load-format dummy`` load random weights.  A
profile that declares itself a testbed (``testbed = true`` at the top level) uses them on
purpose: that is ``info``.  Any other profile using them measures nothing real — shipped to a
deployment it reports speedups no model has — so there it is an ``error``.
"""

from __future__ import annotations

import os

from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.simulate import (
    SIMULATE_ACC_LEN_ENV,
    SIMULATE_ACC_METHOD_ENV,
    dummy_weights,
    parse_simulate_acc_len,
)

_METHODS = ("match-expected", "multinomial")  # spec_utils.py _sample_simulated_acc_len
_DECLARE = "declare it a testbed: add `testbed = true` at the top level of the profile"


def _env_value(ctx: RuleContext, name: str) -> tuple[str | None, str | None]:
    """(value, where) of ``name``: the profile's ``[env]`` first (a launch applies it over the
    inherited environment), else the calling environment when specdash launches SGLang."""
    if name in ctx.env:
        return ctx.env[name], "[env]"
    if ctx.profile.server.launcher == "sglang" and name in os.environ:
        return os.environ[name], "the calling environment"
    return None, None


def rule_simulated(ctx: RuleContext) -> None:
    """SIMULATED: ``SGLANG_SIMULATE_ACC_LEN`` (``srt/speculative/spec_utils.py``) and dummy load
    formats (``srt/model_loader/loader.py`` ``DummyModelLoader``); ``info`` in a profile with
    ``testbed = true``, ``error`` in any other.  A value SGLang cannot parse is an error either way."""
    testbed = bool(getattr(ctx.profile, "testbed", None))
    spec_on = bool(ctx.flags.get("--speculative-algorithm")) and ctx.res.enabled
    raw, where = _env_value(ctx, SIMULATE_ACC_LEN_ENV)
    ev = {"testbed": testbed, "launcher": ctx.profile.server.launcher}
    if raw is not None:
        _simulated_acceptance(ctx, raw, where, spec_on, testbed, ev)
    roles = [r for r in ("target", "draft") if (r == "target" or spec_on) and dummy_weights(ctx.flags, r)]
    if roles:
        _dummy(ctx, roles, testbed, ev)


def _simulated_acceptance(ctx: RuleContext, raw: str, where: str | None, spec_on: bool, testbed: bool,
                          ev: dict) -> None:
    env_src = "srt/environ.py (EnvFloat(-1)) and srt/speculative/spec_utils.py"
    try:
        length = parse_simulate_acc_len(raw)
    except ValueError as exc:
        ctx.add("SIMULATED", "error", f"{SIMULATE_ACC_LEN_ENV}={raw!r} in {where} is not a number: SGLang fails at "
                f"start-up with ValueError: {exc}",
                f"SGLang reads the variable as a float when spec_utils.py is imported ({env_src}).",
                f"remove {SIMULATE_ACC_LEN_ENV} from {where}, or set it to an accept length such as \"3.0\"",
                variable=SIMULATE_ACC_LEN_ENV, value=raw, where=where, **ev)
        return
    if length is None:
        ctx.add("SIMULATED", "info", f"{SIMULATE_ACC_LEN_ENV}={raw} in {where} is SGLang's 'off' value: acceptance "
                "is the model's", f"Simulation runs only while the value is > 0 ({env_src}).",
                f"remove {SIMULATE_ACC_LEN_ENV} from {where}", variable=SIMULATE_ACC_LEN_ENV, value=raw,
                where=where, **ev)
        return
    method, _ = _env_value(ctx, SIMULATE_ACC_METHOD_ENV)
    steps = ctx.res.num_steps
    cap = f"min({length:g}, steps + 1 = {steps + 1})" if steps is not None else f"min({length:g}, steps + 1)"
    why = (f"With {SIMULATE_ACC_LEN_ENV} > 0 the EAGLE verify (srt/speculative/eagle_utils.py) replaces its result "
           "with generate_simulated_accept_index (srt/speculative/spec_utils.py): every verify round accepts "
           f"{cap} tokens on average ({SIMULATE_ACC_METHOD_ENV} {method or 'match-expected'}: "
           "_sample_simulated_acc_len draws floor(L) or ceil(L), clamped to [1, steps + 1]) and overwrites them "
           "with token id 100 — accept length, accept rate and the text are the variable's, whatever the draft "
           "is; only the timing of that acceptance is real.")
    common = {"variable": SIMULATE_ACC_LEN_ENV, "value": raw, "accept_length": length, "where": where, **ev}
    if method is not None and method.strip() not in _METHODS:
        ctx.add("SIMULATED", "error", f"{SIMULATE_ACC_METHOD_ENV}={method!r} is not a method SGLang knows: the "
                "first verify raises ValueError('Invalid simulate_acc_method: …')",
                "_sample_simulated_acc_len (srt/speculative/spec_utils.py) accepts 'match-expected' and "
                "'multinomial' only.", f"set {SIMULATE_ACC_METHOD_ENV} = \"match-expected\"", method=method,
                **common)
    if not spec_on:
        ctx.add("SIMULATED", "info", f"{SIMULATE_ACC_LEN_ENV}={raw} in {where} has no effect without speculation",
                "It only replaces the verify result of speculative decoding (spec_utils.py).",
                "" if testbed else f"remove {SIMULATE_ACC_LEN_ENV} from {where}", **common)
        return
    if testbed:
        ctx.add("SIMULATED", "info",
                f"acceptance is simulated ({SIMULATE_ACC_LEN_ENV}={raw} in {where}): this testbed measures the cost "
                f"of speculation at accept length ≈ {length:g}, not a draft's acceptance", why,
                "label results as simulated (summary acceptance_simulated); never compare them with a real "
                "draft's acceptance", **common)
        return
    ctx.add("SIMULATED", "error",
            f"{SIMULATE_ACC_LEN_ENV}={raw} in {where}: SGLang fakes every verify round (accept length ≈ {length:g}) "
            "and this profile does not declare itself a testbed: it measures nothing real", why
            + " A deployment profile carrying it reports a speedup no model has.",
            f"remove {SIMULATE_ACC_LEN_ENV} from {where} to measure the draft, or {_DECLARE}", **common)


def _dummy(ctx: RuleContext, roles: list[str], testbed: bool, ev: dict) -> None:
    flag = {"target": "--load-format dummy",
            "draft": "--speculative-draft-load-format dummy" if ctx.flags.get("--speculative-draft-load-format")
            else "--load-format dummy (the draft inherits it)"}
    what = " and ".join(f"the {r} ({flag[r]})" for r in roles)
    why = ("SGLang's DummyModelLoader (srt/model_loader/loader.py) fills every parameter with random values; the "
           "draft follows --load-format unless --speculative-draft-load-format is given (srt/managers/scheduler.py). "
           "The output text is noise and a random draft accepts almost nothing; only the timing of the shapes is "
           "real.")
    evidence = {"roles": roles, "flags": [flag[r] for r in roles], **ev}
    if testbed:
        ctx.add("SIMULATED", "info", f"random weights for {what}: this testbed times the model shapes, not a model",
                why, "label results as simulated; never read acceptance or output quality from them", **evidence)
        return
    ctx.add("SIMULATED", "error", f"random weights for {what}, and this profile does not declare itself a testbed: "
            "it measures nothing real", why, f"drop the dummy load format(s) and point the profile at real weights, "
            f"or {_DECLARE}", **evidence)
