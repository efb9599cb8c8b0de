"""Multi-node profiles: validation, the per-node commands, and why specdash does not start them yet.

SGLang runs one server over several machines by starting **the same command on every node** with
``--nnodes N --node-rank R --dist-init-addr HOST:PORT`` added (``python/sglang/srt/server_args.py``:
``nnodes``, ``node_rank``, ``dist_init_addr``; ``--tp-size`` is the total over all nodes, e.g. TP 16
over two 8-GPU nodes).  Only node 0 serves the HTTP API, the real ``/health`` and the tokenizer's
metrics; nodes > 0 run their schedulers and answer a stand-in ``/health`` that is always 200
(``srt/entrypoints/engine.py`` ``_launch_subprocesses`` → ``launch_dummy_health_check_server`` in
``srt/utils/common.py``).  ``dist_init_addr`` is where rank 0's ``torch.distributed`` rendezvous listens
(``srt/model_executor/model_runner.py``: ``tcp://HOST:PORT``); a node that never joins leaves node 0
waiting there until ``--dist-timeout`` (torch's default for NCCL: 600 s).

A profile says so with ``[server] nnodes`` / ``dist_init_addr`` and one ``[[nodes]]`` entry per machine
(``host``, ``node_rank``, optional ``gpus``, ``env`` additions, ``workdir``, ``python``, ``extra_args``).
:func:`node_problems` validates the structure (every ``parse_profile`` runs it); the doctor's ``NODES``
rule (:mod:`specdash.eagle3.rules.nodes`) judges consistency.  :func:`specdash.profile.flags.build_node_launches`
gives each node's exact argv and env (``profile show``) as :class:`NodeLaunch`.  This module imports nothing of
:mod:`specdash.profile` (the schema runs its checks), so the schema, the flags and it stay free of cycles.  With ``node_launcher = "ssh"`` or ``"slurm"`` specdash
starts every node itself (:mod:`specdash.sglang.remote`, :func:`launches_nodes`); ``"attach"`` (the
default) ends with :func:`launch_refusal`, which says how to start the nodes and attach.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specdash.profile.schema import NodeSection, Profile
    from specdash.sglang.launchspec import LaunchSpec

#: The flags that say how a server spans nodes: profile fields, never ``extra_args``
#: (``--nccl-init-addr`` is SGLang's alias of ``--dist-init-addr``, server_args.py).
NODE_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr")

_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\s:\[\]/]+)):(?P<port>\d{1,5})$")


def parse_host_port(addr: str) -> tuple[str, int]:
    """``"10.0.0.1:50000"`` → ``("10.0.0.1", 50000)``; ``"[fd00::1]:50000"`` → ``("fd00::1", 50000)``.

    Raises:
        ValueError: not ``HOST:PORT`` (IPv6 in brackets), or the port is outside 1–65535.
    """
    m = _HOST_PORT.match(str(addr).strip())
    if not m:
        raise ValueError(f"{addr!r} is not HOST:PORT (e.g. 10.0.0.1:50000, [fd00::1]:50000)")
    port = int(m.group("port"))
    if not 1 <= port <= 65535:
        raise ValueError(f"{addr!r}: port {port} is outside 1-65535")
    return (m.group("v6") or m.group("host")), port


def _flag_words(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0].replace("_", "-") for w in words if w.startswith("--")]


def node_problems(prof: Profile) -> list[str]:
    """What breaks a profile's multi-node structure, one line per broken rule naming the key and the fix
    (empty for a sound profile; nothing to check for a single-node one).  :func:`~specdash.profile.schema.parse_profile`
    raises them as one :class:`~specdash.profile.schema.ProfileError`, each line after the file's name.

    Rules: ``[[nodes]]`` holds at least two machines; ``nnodes`` (when given) equals their number;
    ``nnodes`` > 1 needs ``[[nodes]]``; node ranks are 0 … N-1, each once, node 0 first;
    ``dist_init_addr`` is ``HOST:PORT`` (required with nodes); ``--nnodes`` / ``--node-rank`` /
    ``--dist-init-addr`` are never in ``extra_args`` of a multi-node profile; ``node_launcher`` only
    with nodes; ``slurm_options`` only with ``node_launcher = "slurm"``.
    """
    s, nodes = prof.server, prof.nodes
    errs: list[str] = []
    if s.slurm_options and s.node_launcher != "slurm":
        errs.append(f"server.slurm_options is set but node_launcher is {s.node_launcher or 'attach'!r}: srun options "
                    "apply to node_launcher = \"slurm\" only; set it, or remove slurm_options")
    if not nodes and (s.nnodes or 1) == 1:
        if s.node_launcher is not None:
            errs.append("server.node_launcher is set but the profile has no [[nodes]]: remove it, or add one "
                        "[[nodes]] entry per machine")
        if s.dist_init_addr is not None:
            try:
                parse_host_port(s.dist_init_addr)
            except ValueError as exc:
                errs.append(f"server.dist_init_addr: {exc}")
        return errs
    if not nodes:
        errs.append(f"server.nnodes = {s.nnodes} but there are no [[nodes]] entries: add one per machine, node 0 "
                    "first, e.g. [[nodes]] host = \"10.0.0.1\" node_rank = 0")
    elif len(nodes) == 1:
        errs.append("[[nodes]] has a single entry: a one-machine server needs no [[nodes]] (remove it; the "
                    "HTTP address is [server] host)")
    if len(nodes) > 1 and s.nnodes is not None and s.nnodes != len(nodes):
        errs.append(f"server.nnodes = {s.nnodes} but [[nodes]] lists {len(nodes)} machines: make them agree "
                    f"(nnodes = {len(nodes)}, or one [[nodes]] entry per machine)")
    if nodes:
        n = len(nodes)
        ranks = [x.node_rank for x in nodes]
        dup = sorted({r for r in ranks if ranks.count(r) > 1})
        missing = sorted(set(range(n)) - set(ranks))
        beyond = sorted(r for r in set(ranks) if r >= n)
        if dup:
            errs.append(f"[[nodes]] node_rank {', '.join(map(str, dup))} appears more than once: each rank 0-{n - 1} "
                        "exactly once")
        if beyond:
            errs.append(f"[[nodes]] node_rank {', '.join(map(str, beyond))} is out of range for {n} nodes: ranks are "
                        f"0-{n - 1}")
        if missing and not dup and not beyond:
            errs.append(f"[[nodes]] has no node_rank {', '.join(map(str, missing))}: ranks are 0-{n - 1}, each once")
        if ranks and ranks[0] != 0:
            errs.append(f"the first [[nodes]] entry has node_rank {ranks[0]}: list node 0 first (it serves the "
                        "HTTP API and the rendezvous)")
        if s.dist_init_addr is None:
            host = nodes[0].host
            errs.append(f"server.dist_init_addr is missing: every node connects to node 0's rendezvous there; "
                        f"set dist_init_addr = \"{host}:50000\" (node 0's host, a free port apart from the HTTP "
                        f"port {s.port})")
    if s.dist_init_addr is not None:
        try:
            parse_host_port(s.dist_init_addr)
        except ValueError as exc:
            errs.append(f"server.dist_init_addr: {exc}")
    for where, words in (("server.extra_args", s.extra_args),
                         ("speculative.extra_args", prof.speculative.extra_args if prof.speculative else []),
                         *((f"nodes[{i}].extra_args", x.extra_args) for i, x in enumerate(nodes))):
        for flag in _flag_words(list(words)):
            if flag in NODE_FLAGS:
                key = {"--nnodes": "server.nnodes", "--node-rank": "[[nodes]] node_rank"}.get(
                    flag, "server.dist_init_addr")
                errs.append(f"{where} holds {flag}: in a multi-node profile it comes from {key} (specdash adds it "
                            f"to each node's command); remove it from {where}")
    return errs


# -- per-node commands -------------------------------------------------------------------------------
@dataclass
class NodeLaunch:
    """One node's command: ``spec`` (argv / env, the profile's ``[env]`` then the node's additions),
    the node entry, and where it runs (``workdir``: None = wherever it is started)."""

    node: NodeSection
    spec: LaunchSpec

    @property
    def rank(self) -> int:
        """``--node-rank``."""
        return self.node.node_rank

    @property
    def serves_api(self) -> bool:
        """True for node 0 (the only node with SGLang's HTTP API, engine.py)."""
        return self.node.node_rank == 0

    def shell_line(self) -> str:
        """The copy-pasteable line to run on this node (secrets as ``***``): ``cd WORKDIR && ENV… argv``."""
        line = self.spec.shell_line()
        if self.node.workdir:
            line = f"cd {shlex.quote(self.node.workdir)} && {line}"
        return line


def node_url(prof: Profile, port: int | None = None) -> str:
    """``http://<node 0's host>:<port>``: where the multi-node server's API answers."""
    host = prof.nodes[0].host if prof.nodes else prof.server.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port if port is not None else prof.server.port}"


def launches_nodes(prof: Profile) -> bool:
    """True when specdash starts the nodes itself (a launcher of :data:`specdash.sglang.launchers.NODE_LAUNCHERS`
    that starts them: ``ssh``, ``slurm``); single-node profiles are launched as always."""
    from specdash.sglang.launchers import node_launcher

    return bool(prof.nodes) and node_launcher(prof.server.node_launcher).starts_nodes


def launch_refusal(prof: Profile) -> str:
    """Why a multi-node profile is not launched, and what to do instead (what, why, the fix)."""
    from specdash.sglang.launchers import DEFAULT_NODE_LAUNCHER, starting_launchers

    how = prof.server.node_launcher or DEFAULT_NODE_LAUNCHER
    name = str(prof.path) if prof.path else prof.name
    starting = starting_launchers()
    why = (f'node_launcher = "{how}"' + (" (the default)" if how == DEFAULT_NODE_LAUNCHER else "")
           + ": you start the nodes, specdash attaches to node 0; node_launcher = "
           + " or ".join(f'"{x.name}" ({x.what})' for x in starting) + " lets specdash start them")
    return (f"profile {prof.name!r} runs on {prof.num_nodes} nodes; specdash did not launch it: {why}. "
            f"Start every node yourself with the command `specdash profile show {name}` prints for it "
            f"(node 0 waits in torch.distributed's rendezvous until all have joined), then attach to node 0 with "
            f"--url {node_url(prof)}: `specdash --bench --profile {name} --url {node_url(prof)}` or "
            f"`specdash --url {node_url(prof)}` (tune relaunches servers: it needs node_launcher = "
            + " or ".join(f'"{x.name}"' for x in starting) + ")")


__all__ = ["NODE_FLAGS", "NodeLaunch", "command_warnings", "launch_refusal", "launches_nodes", "node_problems",
           "node_url", "parse_host_port"]


#: ssh client options (``-o Key=…`` or a config file) that make ssh run a command on *this* machine
#: (ssh_config(5): ProxyCommand, LocalCommand with PermitLocalCommand, KnownHostsCommand, Match exec).
_SSH_RUNS = ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand")
#: srun options that run a program of the user's around each task (srun(1)).
_SRUN_RUNS = ("--prolog", "--epilog", "--task-prolog", "--task-epilog")
#: Environment variables that make every program of the server load code named by the profile.
_ENV_RUNS = ("LD_PRELOAD", "LD_AUDIT", "BASH_ENV")


def command_warnings(profile: Profile) -> list[str]:
    """Lines saying which of the profile's options run commands of their own, beyond SGLang — a profile is
    code (README "Profiles are code"): ``ssh_options`` with ``ProxyCommand`` / ``LocalCommand`` /
    ``KnownHostsCommand`` / ``Match exec`` or another config file (``-F``), ``slurm_options`` with a prolog or
    epilog, ``[env]`` / ``[nodes.env]`` variables that load code into every process (``LD_PRELOAD``,
    ``LD_AUDIT``, ``BASH_ENV``).  Empty for a profile without them."""
    out: list[str] = []
    s = profile.server
    ssh = [w for w in s.ssh_options if any(k in w.lower().replace(" ", "") for k in _SSH_RUNS)
           or ("match" in w.lower() and "exec" in w.lower())]
    if "-F" in s.ssh_options or any(w.startswith("-F") and len(w) > 2 for w in s.ssh_options):
        ssh.append("-F (another ssh config file, which may hold ProxyCommand …)")
    if ssh:
        out.append(f"server.ssh_options run a command on this machine when ssh connects ({'; '.join(ssh)}): ssh "
                   "executes it with your rights, as it would from ~/.ssh/config; launch only profiles you trust")
    srun = [w for w in s.slurm_options if w.split("=", 1)[0] in _SRUN_RUNS]
    if srun:
        out.append(f"server.slurm_options run programs around each node's task ({'; '.join(srun)}): srun executes "
                   "them with your rights; launch only profiles you trust")
    envs = [f"{where}{k}" for where, table in (("[env] ", profile.env), *((f"[nodes.env] (node {n.node_rank}) ",
                                                                           n.env) for n in profile.nodes))
            for k in table if k in _ENV_RUNS]
    if envs:
        out.append(f"{', '.join(envs)} make every server process load code the profile names: launch only profiles "
                   "you trust")
    return out
