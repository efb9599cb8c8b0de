"""``python -m specdash.sim <SGLang flags> [simulator options]`` — the simulator's command line.

Simulator options (everything else is an SGLang launch flag, checked like SGLang's
argparse for the emulated release):

``--sim-scenario NAME|PATH``  scenario (default ``healthy``; bundled: ``specdash/sim/scenarios``)
``--sim-seed N``              seed of every random draw (default 0)
``--time-scale X``            run X times faster than the model's time (default: the scenario's)
``--sim-sglang-version V``    SGLang release to emulate (default 0.5.23)
``--expected``                print the analytic expectation for these flags as JSON and exit
                              (with ``--concurrency N``, ``--max-new-tokens M``, ``--prompt-tokens P``)

Multi-node (SGLang's own flags, :mod:`specdash.sim.nodes`): ``--nnodes N --node-rank R
--dist-init-addr HOST:PORT [--dist-timeout S]``: node 0 waits at HOST:PORT until nodes 1 … N-1 have
joined (else it exits 1 after S seconds, default 600, with torch's ``Timed out … waiting for clients``),
then serves as usual; a node R > 0 joins, then answers only a stand-in ``/health`` (always 200).

Exit codes: 0 after SIGTERM/SIGINT or ``--expected``; 1 when the emulated server would crash
at start-up; 2 for command lines SGLang's argparse refuses (and bad simulator options).
"""

from __future__ import annotations

import asyncio
import sys

USAGE = "usage: sglang serve [-h] --model-path MODEL_PATH [options]  (specdash simulator: python -m specdash.sim)"


def help_text() -> str:
    """The module docstring as terminal text: reST inline markup (````code````, ``:mod:`x```) unwrapped."""
    import re

    text = re.sub(r":\w+:`([^`]+)`", r"\1", __doc__ or "")
    text = re.sub(r"``([^`]+)``", r"\1", text)
    return f"{USAGE}\n\n{text.strip()}"


def _usage_error(message: str) -> int:
    sys.stderr.write(f"{USAGE}\nsglang serve: error: {message}\n")
    sys.stderr.flush()
    return 2


def main(argv: list[str] | None = None) -> int:
    """Run the simulator (or ``--expected``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or "--help" in argv:
        print(help_text())
        return 0
    import orjson

    from specdash.sim import args as A
    from specdash.sim.scenario import ScenarioError, load_scenario

    try:
        sg_argv, opts = A.split_argv(A.expand_config(argv))
        checked = A.check_flags(sg_argv, opts.version)
    except A.UsageError as exc:
        return _usage_error(str(exc))
    if "--model-path" not in checked.flags or checked.flags["--model-path"] is True:
        return _usage_error("the following arguments are required: --model-path/--model")
    from specdash.sim.nodes import NodeArgsError, node_args

    try:
        node_args(checked.flags)
    except NodeArgsError as exc:
        return _usage_error(str(exc))
    try:
        scenario = load_scenario(opts.scenario)
    except ScenarioError as exc:
        sys.stderr.write(f"specdash simulator: {exc}\n")
        return 2
    if opts.expected:
        from specdash.sim.expected import expected

        wiring = _wiring_kwargs(checked, opts, scenario)
        if "error" in wiring:
            sys.stdout.write(orjson.dumps({"simulated": True, "error": wiring["error"]}).decode() + "\n")
            return 1
        result = expected(checked.flags, scenario, opts.concurrency, max_new_tokens=opts.max_new_tokens,
                          prompt_tokens=opts.prompt_tokens, time_scale=opts.time_scale, seed=opts.seed,
                          version=opts.version, **wiring)
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    from specdash.sim.logfmt import LogWriter
    from specdash.sim.server import SimServer, banner

    tp = int(A.coerce(checked.flags.get("--tp-size", 1), 1) or 1)
    log = LogWriter(str(checked.flags.get("--log-level", "info")), tp_size=tp)
    log.line(banner(opts, scenario, float(opts.time_scale or scenario.time_scale)))
    server = SimServer(checked, opts, scenario, log=log)
    try:
        return asyncio.run(server.serve())
    except KeyboardInterrupt:
        return 0


def _wiring_kwargs(checked, opts, scenario) -> dict:
    """The wiring factor and CUDA-graph limit the server would apply (so ``--expected`` matches a
    faulty draft or a small ``--cuda-graph-max-bs-decode`` too)."""
    import io

    from specdash.sim import args as A
    from specdash.sim.logfmt import LogWriter
    from specdash.sim.server import SimServer
    from specdash.sim.serving import SimCrash

    srv = SimServer(checked, opts, scenario, log=LogWriter(stream=io.StringIO()), quiet=True)
    try:
        srv.resolve()
    except SimCrash:
        return {"error": getattr(srv, "crash_message", "the server would not start")}
    w = srv.wiring
    if w.fatal is not None:
        return {"error": f"{w.fatal.exception}: {w.fatal.message}"}
    out: dict = {"graph_max_bs": min(A.graph_max_bs(srv.args), srv.max_running)}
    if w.alpha_override is not None:
        out["alpha_override"] = w.alpha_override
    else:
        out["alpha_factor"] = w.alpha_factor
    return out
