"""ARGCHECK: SGLang's own argument checks of the exact launch argv, run where SGLang is importable.

:func:`rule_argcheck` finds the Python that will run SGLang (the node's or ``[server] python``, else
``python3`` on ``PATH``, else this interpreter: :func:`specdash.sglang.argcheck.sglang_python`), runs that
release's ``prepare_server_args`` + ``check_server_args`` on the flags the launch will pass
(:func:`specdash.sglang.argcheck.run_argcheck`: a subprocess, bounded in time, no model load, no GPU
allocation) and turns the outcome into findings:

* a refusal → ``error`` quoting SGLang's exception and message, the source line that raised it and the
  flags it names (argparse's ``error: …`` lines too);
* a value SGLang rewrites that the profile asked for (draft tokens shrunk, …) → ``warning`` with what it
  will use; values it chose itself → one ``info`` line;
* SGLang not importable, a time-out or no result → an ``info`` / ``warning`` note saying the check did not
  run and why.

``$SPECDASH_ARGCHECK=0`` turns the check off (a note says so).
"""

from __future__ import annotations

import os

from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.argcheck import flags_named, run_argcheck, sglang_python
from specdash.sglang.cmdline import flags_to_argv
from specdash.sglang.secrets import redact_argv

#: Resolved fields compared with what the profile asked (flag = ``--`` + name with ``-``).
COMPARED = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
            "max_running_requests", "page_size", "attention_backend", "mem_fraction_static", "context_length")


def _dest_to_flag(version: str) -> dict[str, str]:
    from specdash.sglang.facts import facts_for

    f = facts_for(version)
    out: dict[str, str] = {}
    for name, e in (f.flags.items() if f else []):
        if not e.get("alias_of"):
            out.setdefault(e.get("dest") or name[2:].replace("-", "_"), name)
    return out


def rule_argcheck(ctx: RuleContext) -> None:
    """ARGCHECK (see the module docstring); does nothing for the simulator's profiles."""
    prof = ctx.profile
    if prof.server.launcher == "sim":
        return
    if os.environ.get("SPECDASH_ARGCHECK", "1").lower() in ("0", "false", "no", "off"):
        ctx.add("ARGCHECK", "info", "SGLang's own argument checks were not run ($SPECDASH_ARGCHECK=0)", "", "")
        return
    node = prof.node(0) if getattr(prof, "nodes", None) else None
    preferred = (node.python if node is not None else None) or prof.server.python
    env = dict(ctx.env) | (dict(node.env) if node is not None else {})
    python, installed, tried = sglang_python(preferred, env)
    if python is None:
        ctx.add("ARGCHECK", "info",
                f"SGLang is not importable here ({'; '.join(tried)}): its own argument checks were not run",
                "specdash runs the release's prepare_server_args / check_server_args before a launch where the "
                "Python that will run SGLang has it; the rules above judge from the facts extracted from SGLang's "
                "wheels instead.", "set [server] python to the interpreter that has SGLang (or run the doctor on "
                "the GPU host)", tried=tried)
        return
    mib = None
    if ctx.gpus:
        vals = [g.get("memory_total_mib") for g in ctx.gpus if g.get("memory_total_mib")]
        mib = float(min(vals)) if vals else None
    argv = flags_to_argv(ctx.flags)
    chk = run_argcheck(python, argv, env, gpu_memory_mib=mib)
    ver = chk.sglang_version or installed
    red = redact_argv(argv)
    ev = {"python": python, "sglang_version": ver, "seconds": chk.seconds, "import_seconds": chk.import_seconds,
          "stage_seconds": chk.stage_seconds, "modules_imported_while_checking": chk.modules_imported_while_checking,
          **({"standins": chk.standins} if chk.standins else {}),
          "stubbed": chk.stubbed, "argv": red}
    if ver and ctx.source in ("cli", "profile") and ver.split("+")[0] != ctx.version:
        ctx.add("ARGCHECK", "warning",
                f"the doctor judges SGLang {ctx.version} ({ctx.judged}), but {python} has SGLang {ver}: the launch runs "
                f"{ver}", "The release installed where the server starts is the one whose checks and behaviour apply.",
                f"set [server] sglang_version = \"{ver}\" (or install {ctx.version} there)", **ev)
    emulated = []
    if chk.device_added:
        emulated.append("no GPU visible: judged as on a CUDA device")
    if chk.gpu_memory_assumed:
        emulated.append("80 GB of GPU memory assumed")
    if chk.stubbed:
        emulated.append(f"stand-ins for {', '.join(chk.stubbed)} (not installed; SGLang imports them but never "
                        "calls them while parsing)")
    how = (f"run by {python} in {chk.seconds} s, before any weights load" + (f"; {'; '.join(emulated)}" if emulated
                                                                              else ""))
    if chk.status in ("unavailable", "timeout", "error"):
        sev = "info" if chk.status == "unavailable" else "warning"
        ctx.add("ARGCHECK", sev, f"SGLang's own argument checks did not run: {chk.note}",
                "Nothing about SGLang's own validation of this argv is known; the other findings still hold.",
                "check that `python -c 'import sglang.srt.server_args'` works with that interpreter", **ev)
        return
    if chk.status == "refused":
        named = flags_named(chk.message or "", argv, _dest_to_flag(ver or ctx.version))
        if chk.exception == "SystemExit":
            msg = f"SGLang {ver} refuses the command line (argparse, exit 2): '{chk.message}'"
            where = "argparse in prepare_server_args (srt/server_args.py)"
        else:
            msg = f"SGLang {ver}'s own argument check refuses this launch: {chk.exception}: {chk.message}"
            where = chk.where or "prepare_server_args"
        ctx.add("ARGCHECK", "error", msg,
                f"Raised at {where} — the same check fails the real launch, after the import and before any weights "
                f"load ({how}).",
                (f"change {', '.join(named)} as SGLang's message says" if named else "change the launch as SGLang's "
                 "message says") + " (then run the doctor again)", exception=chk.exception, where=chk.where,
                flags=named, **ev)
        return
    # ok: what SGLang will run
    asked = {f: ctx.flags.get("--" + f.replace("_", "-")) for f in COMPARED}
    chosen: dict = {}
    for f in COMPARED:
        if f not in chk.resolved:
            continue
        got, want = chk.resolved[f], asked[f]
        if want is None:
            if got is not None:
                chosen[f] = got
            continue
        if str(got).upper() != str(want).upper() and not _same_number(got, want):
            line = next((w for w in chk.warnings if f in w or f.replace("speculative_", "") in w), None)
            ctx.add("ARGCHECK", "warning", f"SGLang {ver} rewrites {f}: asked {want}, it will use {got}",
                    f"Resolved by SGLang's own start-up code ({how})" + (f"; it logs: '{line}'" if line else "") + ".",
                    f"ask for what will run: --{f.replace('_', '-')} {got}", field=f, asked=want, effective=got,
                    log_line=line, **ev)
    ctx.add("ARGCHECK", "info",
            f"SGLang {ver}'s own argument checks accept this launch"
            + (f"; it will use {', '.join(f'{k} {v}' for k, v in chosen.items())}" if chosen else ""),
            f"prepare_server_args and check_server_args ran ({how})."
            + (f" SGLang warned: {' | '.join(chk.warnings[:6])}" if chk.warnings else ""), "",
            resolved=chk.resolved, warnings=chk.warnings, **ev)


def _same_number(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False
