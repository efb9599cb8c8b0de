"""``specdash profile import|show|list``.

``import`` turns a pasted SGLang launch command (environment assignments in front) into a
profile file (never overwriting one without ``--force``; node 0's command plus ``--node HOST``
per machine for a multi-node server); ``show`` prints the exact argv and env a profile runs —
for a multi-node profile, per node — after SGLang's own normalisation (asked vs effective);
``list`` lists presets and user profiles.  Exit codes (:mod:`specdash.commands.errors`): 0 done;
2 a profile or command line that cannot be read, or a file that exists.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

from specdash.commands.errors import ExitCode, Parser, run
from specdash.profile import (
    Profile,
    ProfileError,
    build_launch,
    load_profile,
    parse_profile,
    profile_entries,
    profile_to_toml,
    safe_name,
    user_profile_dir,
    write_new_file,
)
from specdash.profile.flags import build_node_launches
from specdash.profile.nodes import NODE_FLAGS, NodeLaunch, node_url, parse_host_port
from specdash.sglang.cmdline import ParsedCommand, flags_to_argv, parse_command_line, strip_terminal_codes
from specdash.sglang.launchers import DEFAULT_NODE_LAUNCHER, node_job_name, node_launcher
from specdash.sglang.launchspec import LaunchSpec
from specdash.sglang.secrets import is_secret_flag, redact_text
from specdash.sglang.versions import resolve_version

#: Flags that map to profile fields; everything else goes to ``extra_args``.
_SERVER_FIELDS = {
    "--model-path": ("model_path", str),
    "--tp-size": ("tp_size", int),
    "--mem-fraction-static": ("mem_fraction_static", float),
    "--host": ("host", str),
    "--port": ("port", int),
    "--context-length": ("context_length", int),
    "--api-key": ("api_key", str),
}
_SPEC_FIELDS = {
    "--speculative-algorithm": ("algorithm", str),
    "--speculative-draft-model-path": ("draft_model_path", str),
    "--speculative-num-steps": ("num_steps", int),
    "--speculative-eagle-topk": ("eagle_topk", int),
    "--speculative-num-draft-tokens": ("num_draft_tokens", int),
}


#: Profile names: letters, digits, ``.``, ``_``, ``-``; not starting with ``.`` (a file name, no path).
_NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
_PYTHON_RE = re.compile(r"^python(\d+(\.\d+)*)?$")


def check_profile_name(name: str) -> str:
    """Return ``name`` if it is a valid profile (file) name.

    Raises:
        ProfileError: the name has path separators, spaces or other characters, or starts with ``.``.
    """
    if not _NAME_RE.match(name or ""):
        raise ProfileError(
            f"profile import: invalid profile name {name!r}: use letters, digits, '.', '_' and '-' only "
            "(no path separators or spaces, not starting with '.'); use --out to choose the file's location"
        )
    return name


def _env_references(cmd: ParsedCommand) -> dict[str, str]:
    """The pasted environment for ``[env]``, a variable whose name marks a secret (``*_API_KEY``,
    ``*_TOKEN``, ``*PASSWORD*`` …) kept as a reference ``${NAME}`` to the environment instead of its
    value (with a note): a secret never reaches a profile file."""
    from specdash.sglang.secrets import SECRET_ENV_MARKERS

    out = {}
    for k, v in cmd.env.items():
        if any(mark in k.upper() for mark in SECRET_ENV_MARKERS) and v and not v.startswith("${"):
            out[k] = f"${{{k}}}"
            cmd.notes.append(f"{k} is not written to the profile: [env] reads ${{{k}}} (export {k} before launching)")
        else:
            out[k] = v
    return out


def profile_from_command(
    text: str, *, name: str | None = None, version: str | None = None, nodes: list[str] | None = None
) -> tuple[Profile, ParsedCommand]:
    """Build a :class:`Profile` from a pasted ``sglang.launch_server`` / ``sglang serve`` line.

    Environment assignments in front become ``[env]``; known flags become fields; other
    ``--speculative-*`` flags go to ``[speculative] extra_args``, the rest to
    ``[server] extra_args``; ``--enable-metrics`` is implied (specdash needs it).  Flag
    abbreviations are expanded as SGLang's argparse would for ``version`` (default: the
    installed SGLang, else :data:`~specdash.sglang.versions.DEFAULT_VERSION`).  A launcher
    in front of the interpreter (``uv run``, ``conda run -n X``) cannot be kept (the
    profile holds one interpreter path): it is dropped with a note in ``cmd.notes``.

    Multi-node: ``text`` is node 0's command (``--nnodes N --node-rank 0 --dist-init-addr HOST:PORT``)
    and ``nodes`` the N machines' hosts, node 0 first; they become ``[server] nnodes`` /
    ``dist_init_addr`` and one ``[[nodes]]`` entry each (the pasted environment stays in the shared
    ``[env]``; per-node differences such as ``NCCL_SOCKET_IFNAME`` go in ``[nodes.env]`` by hand).
    ``profile show`` then prints each node's command: node 0's is the pasted one, node R's the same
    with ``--node-rank R`` (SGLang runs the same command on every node, ``srt/server_args.py``).

    Raises:
        ProfileError: not an SGLang launch command, several of them, no ``--model-path``,
            an ambiguous flag abbreviation, a bad value or an invalid ``name``; multi-node: a
            command of another node than 0, ``--node`` hosts that do not match ``--nnodes``, no
            ``--dist-init-addr``.
    """
    if name is not None:
        check_profile_name(name)
    try:
        cmd = parse_command_line(text, version=version or resolve_version()[0])
    except ValueError as exc:
        raise ProfileError(f"profile import: {exc}") from None
    if not cmd.program:
        raise ProfileError(
            "profile import: no command found "
            "(expected `python -m sglang.launch_server …` or `sglang serve …`)"
        )
    prog = " ".join(cmd.program)
    if "sglang" not in prog and "launch_server" not in prog:
        raise ProfileError(
            f"profile import: {prog!r} is not an SGLang launch command "
            "(expected `python -m sglang.launch_server …` or `sglang serve …`)"
        )
    if "--model-path" not in cmd.flags:
        raise ProfileError("profile import: the command has no --model-path")
    if "--nccl-init-addr" in cmd.flags:  # SGLang's alias (server_args.py)
        cmd.flags["--dist-init-addr"] = cmd.flags.pop("--nccl-init-addr")
        cmd.order[cmd.order.index("--nccl-init-addr")] = "--dist-init-addr"
    node_fields = _node_fields(cmd, nodes or [])
    server: dict = {"launcher": "sglang"}
    spec: dict = {}
    extra_server: dict = {}
    extra_spec: dict = {}
    _refuse_shell_substitution(cmd)
    for flag in cmd.order:
        value = cmd.flags[flag]
        try:
            if (flag in _SERVER_FIELDS or flag in _SPEC_FIELDS) and not isinstance(value, str):
                raise ProfileError(_one_value(flag, value))
            if isinstance(value, list) and not all(_is_number(w) for w in value):
                cmd.notes.append(f"{flag} is followed by {len(value)} words ({' '.join(value)}): kept as {len(value)} "
                                 "argv words, as a shell passes them — if it is one value with spaces, quote it")
            if is_secret_flag(flag) and isinstance(value, str) and not value.startswith("${"):
                # a secret never reaches the profile file: the key is read from the environment
                var = "SGLANG_" + flag.lstrip("-").replace("-", "_").upper()
                if flag == "--api-key":
                    server["api_key"] = f"${{{var}}}"
                    cmd.notes.append(f"the API key is not written to the profile: it reads ${{{var}}}; "
                                     f"export {var}=… before launching")
                else:
                    cmd.notes.append(f"{flag} dropped: a secret is never written to a profile "
                                     f"(SGLang reads it from the command line only; add it at launch time)")
                continue
            if flag in _SERVER_FIELDS:
                key, typ = _SERVER_FIELDS[flag]
                server[key] = typ(value)
            elif flag in _SPEC_FIELDS:
                key, typ = _SPEC_FIELDS[flag]
                spec[key] = typ(value)
            elif flag == "--enable-metrics" or (node_fields and flag in NODE_FLAGS):
                continue
            elif flag.startswith("--speculative-"):
                extra_spec[flag] = value
            else:
                extra_server[flag] = value
        except ValueError:
            raise ProfileError(f"profile import: {flag} {value!r} is not a valid value") from None
    _take_interpreter(cmd, server)
    server["extra_args"] = flags_to_argv(extra_server)
    if node_fields:
        server.update(node_fields["server"])
    data: dict = {
        "name": name or default_name(server.get("model_path", "model"), spec.get("algorithm")),
        "description": "imported from an SGLang launch command",
        "server": server,
        "env": _env_references(cmd),
    }
    if spec:
        spec["extra_args"] = flags_to_argv(extra_spec)
        data["speculative"] = spec
    if node_fields:
        data["nodes"] = node_fields["nodes"]
    return parse_profile(data, "<imported command>"), cmd


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _one_value(flag: str, value) -> str:
    """The message for a profile field's flag that got several words (or none)."""
    if value is True:
        return f"profile import: {flag} needs a value (e.g. {flag} VALUE)"
    words = list(value) if isinstance(value, (list, tuple)) else [str(value)]
    joined = " ".join(words)
    if all(_is_number(w) for w in words):
        return f"profile import: {flag} takes one number, but the line gives {len(words)} ({', '.join(words)})"
    return (f"profile import: {flag} takes one value, but the line gives {len(words)} words ({', '.join(map(repr, words))}):"
            f" a value with spaces must be quoted, e.g. {flag} \"{joined}\"")


#: Shell constructs that run a command when a shell reads the line: command substitution.
_SUBSTITUTION = ("$(", "`")


def _refuse_shell_substitution(cmd: ParsedCommand) -> None:
    """Refuse a pasted line whose flag or environment values hold a command substitution (``$(…)``,
    backticks): the shell that ran the line replaced it by a command's output, a profile runs no shell (its
    argv goes to SGLang as written), so importing it would launch SGLang with the literal text.

    Raises:
        ProfileError: naming the flag (or variable), the value and the fix.
    """
    items = [(f, v) for f in cmd.order for v in (cmd.flags[f] if isinstance(cmd.flags[f], list) else [cmd.flags[f]])]
    items += [(f"{k}=", v) for k, v in cmd.env.items()]
    for where, v in items:
        if isinstance(v, str) and any(m in v for m in _SUBSTITUTION):
            raise ProfileError(
                f"profile import: {where.rstrip('=') if where.endswith('=') else where} {v!r} holds a shell command "
                "substitution ($(…) or `…`): the shell that ran this line replaced it with a command's output, but "
                "a profile runs no shell — SGLang would get the text as written. Run the command yourself and "
                "paste the line with its output in place (e.g. echo the line first)")


def _node_fields(cmd: ParsedCommand, hosts: list[str]) -> dict | None:
    """``{"server": {nnodes, dist_init_addr}, "nodes": [{host, node_rank}, …]}`` for node 0's
    multi-node command and its hosts; None for a single-node command (its ``--dist-init-addr``,
    if any, stays in ``extra_args`` as before).

    Raises:
        ProfileError: hosts without ``--nnodes`` > 1 or the other way round, a count mismatch,
            another node's command, no or a malformed ``--dist-init-addr``.
    """
    raw_n = cmd.flags.get("--nnodes")
    try:
        nnodes = int(raw_n) if raw_n not in (None, True) else 1
    except (TypeError, ValueError):
        raise ProfileError(f"profile import: --nnodes {raw_n!r} is not a whole number") from None
    if nnodes <= 1 and not hosts:
        return None
    if nnodes <= 1:
        raise ProfileError(
            f"profile import: --node was given {len(hosts)} time(s) but the command is not a multi-node one "
            "(no --nnodes N > 1): paste node 0's command with --nnodes N --node-rank 0 --dist-init-addr HOST:PORT")
    if not hosts:
        raise ProfileError(
            f"profile import: the command runs on {nnodes} nodes (--nnodes {nnodes}): name each node's host, node 0 "
            f"first: --node HOST0 --node HOST1{' …' if nnodes > 2 else ''}")
    if len(hosts) != nnodes:
        raise ProfileError(f"profile import: --nnodes {nnodes} but {len(hosts)} --node host(s) given "
                           f"({', '.join(hosts)}): give one --node per machine, node 0 first")
    rank = cmd.flags.get("--node-rank", "0")
    if str(rank) != "0":
        raise ProfileError(f"profile import: this is node {rank}'s command (--node-rank {rank}): paste node 0's "
                           "(--node-rank 0); specdash derives the others")
    addr = cmd.flags.get("--dist-init-addr")
    if addr in (None, True):
        raise ProfileError("profile import: a multi-node command needs --dist-init-addr HOST:PORT (node 0's "
                           "rendezvous address, which every node connects to)")
    try:
        host, _ = parse_host_port(str(addr))
    except ValueError as exc:
        raise ProfileError(f"profile import: --dist-init-addr: {exc}") from None
    if host != hosts[0]:
        cmd.notes.append(f"--dist-init-addr {addr} names {host}, not node 0's host {hosts[0]}: fine if it is another "
                         "address of node 0 (specdash doctor checks it)")
    if cmd.env:
        cmd.notes.append("the pasted environment is written to [env] for every node; put per-node values "
                         "(NCCL_SOCKET_IFNAME, NCCL_IB_HCA …) in that node's [nodes.env]")
    return {"server": {"nnodes": nnodes, "dist_init_addr": str(addr)},
            "nodes": [{"host": h, "node_rank": i} for i, h in enumerate(hosts)]}


def _take_interpreter(cmd: ParsedCommand, server: dict) -> None:
    """Set ``server["python"]`` from the command's interpreter; note a dropped launcher."""
    prog = cmd.program
    at = next((j for j, w in enumerate(prog) if _PYTHON_RE.match(w.rsplit("/", 1)[-1])), None)
    if at is None:  # `sglang serve …`, `launch_server.py …`
        at = next((j for j, w in enumerate(prog) if w.rsplit("/", 1)[-1] in ("sglang", "launch_server.py")), 0)
        interp = None
    else:
        interp = prog[at]
        if interp not in ("python", "python3"):
            server["python"] = interp
    launcher = prog[:at]
    if launcher:
        runs = server.get("python", "python3")
        cmd.notes.append(
            f"the launcher prefix `{' '.join(launcher)}` was dropped (a profile runs one interpreter): "
            f"the profile runs `{runs} -m sglang.launch_server`; if SGLang lives in that launcher's "
            "environment, set [server] python to its interpreter path (e.g. /path/to/.venv/bin/python)"
        )


def default_name(model_path: str, algorithm: str | None) -> str:
    """A file-friendly name from the model's last path part and the algorithm."""
    base = Path(model_path.rstrip("/")).name or "model"
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", base).strip("-.").lower() or "model"
    return f"{slug}-{(algorithm or 'baseline').lower()}"


def _command_lines(launch: LaunchSpec, indent: str = "") -> list[str]:
    """``env:`` and ``argv:`` blocks of one command (secrets as ``***``), one flag with its values a line."""
    lines = [f"{indent}env:"]
    for k, v in launch.redacted_env().items() or {}:
        lines.append(f"{indent}  {k}={shlex.quote(v)}")
    if not launch.env:
        lines.append(f"{indent}  (none beyond the inherited environment)")
    lines.append(f"{indent}argv:")
    argv = [shlex.quote(w) for w in launch.redacted_argv()]
    lines.append(f"{indent}  " + " ".join(argv[:3]))
    i = 3
    while i < len(argv):
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):  # one flag with all its values
            j += 1
        lines.append(f"{indent}    " + " ".join(argv[i:j]))
        i = j
    return lines


def render_show(launch: LaunchSpec, profile: Profile, nodes: list[NodeLaunch] | None = None) -> str:
    """Human-readable ``profile show``: argv, env, asked vs effective speculative values; for a
    multi-node profile (``nodes``) each node's env, argv and the exact line to run on it."""
    spec = launch.spec
    lines = [f"profile   {profile.name}  ({profile.path or 'unsaved'})"]
    ver, src = profile.judged_version()
    lines.append(f"judged    SGLang {ver} ({src})")
    lines.append("")
    if not nodes:
        lines.extend(_command_lines(launch))
    else:
        url = node_url(profile, launch.port)
        lines.append(f"{len(nodes)} nodes, the same command on each with its --node-rank (dist_init_addr "
                     f"{profile.server.dist_init_addr}); only node 0 serves the HTTP API, at {url}")
        for n in nodes:
            role = "serves the HTTP API" if n.serves_api else "no HTTP API: a stand-in /health, as SGLang's engine.py"
            gpus = n.node.gpus or profile.server.gpus_per_node
            lines.append("")
            lines.append(f"node {n.rank}  host {n.node.host}  ({role}"
                         + (f"; {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "") + ")")
            if n.node.workdir:
                lines.append(f"  workdir: {n.node.workdir}")
            lines.extend(_command_lines(n.spec, indent="  "))
            lines.append("  run on the node:")
            lines.append(f"    {n.shell_line()}")
        lines.append("")
        launcher = node_launcher(profile.server.node_launcher)
        options = getattr(profile.server, launcher.options_field) if launcher.options_field else []
        lines.append(launcher.show(options, node_job_name(safe_name(profile.name), "<R>"), url))
    lines.append("")
    if not spec.enabled and not spec.rejections:
        lines.append("speculation: off")
    else:
        lines.append("speculative settings (asked → effective, after SGLang's normalisation):")
        rows = [
            ("algorithm", "speculative_algorithm", spec.algorithm),
            ("num steps", "speculative_num_steps", spec.num_steps),
            ("eagle topk", "speculative_eagle_topk", spec.eagle_topk),
            ("num draft tokens", "speculative_num_draft_tokens", spec.num_draft_tokens),
            ("max running requests", "max_running_requests", spec.max_running_requests),
        ]
        adjusted = {a.field: a for a in spec.adjustments}
        for label, key, eff in rows:
            asked = spec.asked.get(key)
            mark = ""
            if key in adjusted:
                mark = f"   ← {adjusted[key].reason}"
            lines.append(f"  {label:<22} {_fmt(asked):>8} → {_fmt(eff):<8}{mark}")
        for adj in spec.adjustments:
            if adj.log_line:
                lines.append(f"  SGLang logs: {adj.log_line}")
        for rej in spec.rejections:
            lines.append(f"  REJECTED at start-up ({rej.exception}): {rej.message}")
            if rej.fix:
                lines.append(f"    fix: {rej.fix}")
    return "\n".join(lines)


def _fmt(v) -> str:
    return "(unset)" if v is None else str(v)


def show_json(launch: LaunchSpec, profile: Profile, nodes: list[NodeLaunch] | None = None) -> dict:
    """``profile show --json``: argv, env (redacted), asked, effective, adjustments, rejections.

    A multi-node profile adds ``nodes``: per node (node 0 first) ``node_rank``, ``host``, ``gpus``,
    ``workdir``, ``serves_api``, ``argv``, ``env`` and ``shell_line`` (what to run there), plus
    ``url`` (node 0's API); top-level ``argv`` / ``env`` are node 0's.
    """
    spec = launch.spec
    ver, src = profile.judged_version()
    extra: dict = {}
    if nodes:
        extra = {"url": node_url(profile, launch.port), "dist_init_addr": profile.server.dist_init_addr,
                 "node_launcher": profile.server.node_launcher or DEFAULT_NODE_LAUNCHER,
                 "nodes": [{"node_rank": n.rank, "host": n.node.host,
                            "gpus": n.node.gpus or profile.server.gpus_per_node, "workdir": n.node.workdir,
                            "serves_api": n.serves_api, "argv": n.spec.redacted_argv(),
                            "env": n.spec.redacted_env(), "shell_line": n.shell_line()} for n in nodes]}
    return {
        "profile": profile.name,
        "profile_path": str(profile.path) if profile.path else None,
        "sglang_version": ver,
        "version_source": src,
        "argv": launch.redacted_argv(),
        "env": launch.redacted_env(),
        "asked": spec.asked,
        "effective": spec.effective() | {"max_running_requests": spec.max_running_requests},
        "adjustments": [
            {"field": a.field, "asked": a.asked, "effective": a.effective, "reason": a.reason, "log_line": a.log_line}
            for a in spec.adjustments
        ],
        "rejections": [{"message": r.message, "exception": r.exception, "fix": r.fix} for r in spec.rejections],
    } | extra


PROG = "specdash profile"


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Create, show and list launch profiles.")
    sub = p.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="turn a pasted SGLang launch command into a profile file")
    imp.add_argument("command", help='the command line, quoted: "NCCL_X=1 python -m sglang.launch_server …"')
    imp.add_argument("--name", help="profile name (default: from the model and the algorithm)")
    imp.add_argument("--out", help="file to write (default ./<name>.toml, which `profile show <name>` then finds)")
    imp.add_argument("--force", action="store_true", help="overwrite an existing file")
    imp.add_argument("--sglang-version", help="expand flag abbreviations as this SGLang release would")
    imp.add_argument("--node", action="append", metavar="HOST",
                     help="multi-node: one machine's host, node 0 first, once per node (the command is node 0's, "
                          "with --nnodes N --node-rank 0 --dist-init-addr HOST:PORT)")
    show = sub.add_parser("show", help="print the argv + env a profile runs, asked vs effective")
    show.add_argument("profile", help="profile name or path")
    show.add_argument("--json", action="store_true")
    show.add_argument("--sglang-version", help="judge against this SGLang version")
    lst = sub.add_parser("list", help="list profiles (your profile directory, the presets, ./*.toml profiles)")
    lst.add_argument("--json", action="store_true",
                     help='print [{"name", "path", "source": "builtin"|"user"|"file", "valid", "error"}]')
    return p


def profile_main(argv: list[str]) -> int:
    """Entry of ``specdash profile …`` (``argv`` after ``profile``); returns the exit code."""
    args = _parser().parse_args(argv)
    body = {"import": _import, "show": _show, "list": _list}[args.cmd]
    return run(PROG, lambda: body(args), json_output=bool(getattr(args, "json", False)))


def _import(args: argparse.Namespace) -> int:
    prof, cmd = profile_from_command(args.command, name=args.name, version=args.sglang_version, nodes=args.node)
    for note in cmd.notes:
        print(f"note: {note}")
    out = Path(args.out or f"{prof.name}.toml")
    from specdash.sglang.secrets import SECRET_ENV_MARKERS

    secrets = [v for f, v in cmd.flags.items() if is_secret_flag(f) and isinstance(v, str)]
    secrets += [v for k, v in parse_command_line(args.command).env.items()
                if v and any(mark in k.upper() for mark in SECRET_ENV_MARKERS)]
    header = (
        f"Imported by specdash profile import from:\n{_wrap(strip_terminal_codes(redact_text(args.command, secrets)))}\n"
        "Flags specdash does not model are kept in extra_args; --enable-metrics is always on."
        + (f"\nNodes (--node, node 0 first): {', '.join(args.node)}" if args.node else "")
    )
    write_new_file(out, profile_to_toml(prof, header=header), force=args.force)
    print(f"wrote {out}")
    print(_found_by(prof.name, out))
    try:
        launch = build_launch(parse_profile(_reload(out), out).expanded())
    except ProfileError as exc:  # e.g. ${SGLANG_API_KEY} not exported yet: the file is written all the same
        print(f"note: SGLang's adjustments not shown until this is fixed: {exc}")
        return ExitCode.OK
    for adj in launch.spec.adjustments:
        if adj.field != "max_running_requests":
            print(f"note: SGLang will run {adj.field} = {adj.effective} (asked {adj.asked}): {adj.reason}")
    return ExitCode.OK


def _show(args: argparse.Namespace) -> int:
    from specdash.commands.settings import fill

    fill(args, ("sglang_version",))
    prof = load_profile(args.profile).expanded()
    launch = build_launch(prof, version=args.sglang_version)
    nodes = build_node_launches(prof, version=args.sglang_version) if prof.nodes else None
    from specdash.profile.nodes import command_warnings

    for w in command_warnings(prof):  # a profile is code: say so where it shows what it runs (stderr)
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(show_json(launch, prof, nodes), indent=2))
    else:
        print(render_show(launch, prof, nodes))
    return ExitCode.OK


def _found_by(name: str, out: Path) -> str:
    """How to reach the file just written: by its name when the name lookup finds it, else by its path
    (another profile of that name comes first, or the file is not where names are looked up)."""
    try:
        found = load_profile(name).path
    except ProfileError:
        found = None
    if found is not None and found.resolve() == out.resolve():
        return f"`specdash profile show {name}` and `--profile {name}` find it"
    why = f"the name {name!r} finds {found} first" if found else f"{out.parent} is not where names are looked up"
    return (f"note: {why}: use the path (`specdash profile show {out}`), or move it into your profile directory "
            f"{user_profile_dir()}")


def _list(args: argparse.Namespace) -> int:
    entries = profile_entries()
    if args.json:
        print(json.dumps(entries, indent=2))
        return ExitCode.OK
    for e in entries:
        if e["valid"]:
            try:
                desc = load_profile(e["path"]).description
            except ProfileError as exc:  # pragma: no cover - validated just above
                desc = f"INVALID: {exc}"
        else:
            desc = f"INVALID: {e['error']}"
        print(f"{e['name']:<32} {e['source']:<7} {desc}")
    return ExitCode.OK


def _reload(path: Path) -> dict:
    import tomllib

    return tomllib.loads(path.read_text(encoding="utf-8"))


def _wrap(text: str, width: int = 100) -> str:
    import textwrap

    out: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        out.extend(
            textwrap.wrap(" ".join(line.split()), width=width, break_on_hyphens=False, break_long_words=False)
        )
    return "\n".join(out)
