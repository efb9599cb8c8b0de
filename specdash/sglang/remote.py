"""Starting one node of a multi-node SGLang server over ssh or Slurm (``[server] node_launcher = "ssh"`` /
``"slurm"``).

The system OpenSSH client runs, non-interactively (``-T -o BatchMode=yes``: no password or host-key
prompt ever blocks a run), a small POSIX ``sh`` script on the node; the script is one argument of
``sh -c`` built with :func:`shlex.quote`, never a local shell line.  On the node it:

1. reads the node's environment from its standard input, one ``NAME=value`` line each, up to a
   marker line, and exports it — so ``[env]`` values (tokens, keys) are in no argv on either side;
   an SGLang API key comes the same way, as the contents of a ``--config`` file the script writes
   with mode 0600 into a fresh ``mktemp -d`` directory and deletes when the server ends (SGLang reads
   ``--config`` before its flags: ``prepare_server_args`` in ``srt/server_args.py``, 0.5.11+);
2. ``cd`` to the node's ``workdir`` when given, and starts the server with ``setsid`` in a session of
   its own, its output going back through ssh (the local run directory's ``server.log`` for node 0,
   ``node-<R>.log`` for the others), printing ``specdash-node pgid <N>`` first;
3. watches its standard input: when it ends — specdash closed it to stop the node, or specdash and
   with it the local ``ssh`` client died (the client gets the parent-death signal of
   :mod:`specdash.sglang.process`), which closes the connection — it sends SIGTERM to the server's
   process group, and SIGKILL 10 s later;
4. exits with the server's exit code once it is gone.

So nothing outlives specdash on any node, without an agent on the node and without a pty.

Under Slurm (``node_launcher = "slurm"``, specdash running inside an allocation: ``salloc`` / ``sbatch``)
the same script runs as one job step per node, ``srun --nodes=1 --ntasks=1 --nodelist=HOST …
sh -c SCRIPT`` (:func:`srun_argv`; srun forwards its standard input to the step's one task and takes the
command as argv — no shell on either side).  There the server stays in the step's process group
(``new_session=False``): slurmstepd tracks and ends every process of a step when its task exits or its
``srun`` dies (SIGKILL included), also with ``ProctrackType=proctrack/pgid``, which a ``setsid`` would
escape.  Each node's rank is the profile's (``--node-rank R``, as ``profile show`` prints it), not
``SLURM_NODEID`` (0 in every one-node step).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence

from specdash.sglang.process import ServerProcess

#: The line that ends the environment block on the node's standard input.
ENV_END = "__specdash_env_end__"
#: Where the node script puts the ``--config`` file path in the server's argv.
CONFIG_WORD = "@specdash-config@"
#: Seconds between the remote SIGTERM and SIGKILL of the server's process group.
KILL_GRACE_S = 10
#: ssh options always given (before the profile's ``ssh_options``): no prompt, no pty, a connect timeout
#: (a host that drops packets fails the start instead of hanging it), keep-alives.
SSH_BASE = ("-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4")


def node_script(argv: Sequence[str], *, workdir: str | None = None, with_config: bool = False,
                new_session: bool = True) -> str:
    """The ``sh`` script one node runs (module docstring); ``argv`` may hold :data:`CONFIG_WORD`
    where the path of the ``--config`` file goes (``with_config``: the file's contents follow the
    environment on standard input, up to a second :data:`ENV_END`).  ``new_session``: the server in a
    session of its own (ssh: nothing else would end its children); False under Slurm, whose step
    tracking ends them (module docstring) — the stop signals then go to the server's pid."""
    words = " ".join('"$cfg"' if a == CONFIG_WORD else shlex.quote(str(a)) for a in argv)
    lines = [
        "set -u",
        "exec 3<&0",  # the watcher's copy of stdin: a background list's own stdin is /dev/null (POSIX)
        f"while IFS= read -r line; do [ \"$line\" = {ENV_END} ] && break; export \"$line\"; done",
        "cfg=''",
    ]
    if with_config:
        lines += [
            "umask 077; d=$(mktemp -d) || exit 97; cfg=\"$d/server-secrets.yaml\"",
            f"while IFS= read -r line; do [ \"$line\" = {ENV_END} ] && break; printf '%s\\n' \"$line\" >> \"$cfg\"; done",
        ]
    if workdir:
        lines.append(f"cd {shlex.quote(workdir)} || exit 98")
    target = "-$pg" if new_session else "$pg"  # the server's process group, or (Slurm) the server itself
    lines += [
        f"{'setsid ' if new_session else ''}{words} < /dev/null 3<&- 2>&1 &",
        "pg=$!",
        f"echo \"specdash-node {'pgid' if new_session else 'pid'} $pg\"",
        f"( cat <&3 > /dev/null; kill -TERM {target} 2>/dev/null; sleep {KILL_GRACE_S}; "
        f"kill -KILL {target} 2>/dev/null ) > /dev/null 2>&1 &",  # not holding ssh's output: the channel closes at once
        "w=$!",
        "wait $pg; rc=$?",
        f"kill -TERM {target} 2>/dev/null; kill $w 2>/dev/null",
        "[ -n \"$cfg\" ] && rm -rf \"$(dirname \"$cfg\")\"",
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


def env_block(env: Mapping[str, str], config_text: str | None = None) -> bytes:
    """What the node script reads first: ``NAME=value`` lines, :data:`ENV_END`, then (with a
    config) its lines and :data:`ENV_END` again.

    Raises:
        ValueError: a value or the config holds a line equal to the marker, or a value holds a
            newline (one line per variable).
    """
    out = []
    for k, v in env.items():
        if "\n" in str(v) or "\r" in str(v):
            raise ValueError(f"[env] {k}: a value sent to an ssh node cannot hold a line break")
        out.append(f"{k}={v}")
    out.append(ENV_END)
    if config_text is not None:
        body = config_text.splitlines()
        if ENV_END in body:
            raise ValueError("the --config contents hold specdash's marker line")
        out += [*body, ENV_END]
    return ("\n".join(out) + "\n").encode()


def ssh_argv(host: str, script: str, options: Sequence[str] = ()) -> list[str]:
    """``ssh <base options> <options> HOST sh -c '<script>'`` (the remote command is one word list
    joined with :func:`shlex.join`, which the node's login shell splits back)."""
    target = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return ["ssh", *SSH_BASE, *options, target, shlex.join(["sh", "-c", script])]


#: srun options always given (before the profile's ``slurm_options``): one task on the named node, its
#: output unbuffered, the whole step ended when that task fails.
SRUN_BASE = ("--nodes=1", "--ntasks=1", "--kill-on-bad-exit=1", "--unbuffered")


def srun_argv(host: str, script: str, options: Sequence[str] = (), *, job_name: str = "specdash") -> list[str]:
    """``srun <base options> --nodelist=HOST --job-name=NAME <options> sh -c <script>``: one job step on
    Slurm node ``HOST`` of the current allocation (``SLURM_JOB_ID`` in the environment), the script as
    one argv word (srun execs it on the node; no shell parses it)."""
    return ["srun", *SRUN_BASE, f"--nodelist={host}", f"--job-name={job_name}", *options, "sh", "-c", script]


def slurm_problem(hosts: Sequence[str], environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``node_launcher = "slurm"`` cannot start ``hosts`` from here, else None: no ``srun`` on PATH,
    no allocation (``SLURM_JOB_ID`` or ``SLURM_JOB_NODELIST`` unset: specdash runs inside ``salloc`` /
    ``sbatch``), ``scontrol show hostnames $SLURM_JOB_NODELIST`` failing (Slurm not reachable: srun would
    fail too), or hosts that are not nodes of the allocation.  Without ``scontrol`` on PATH the membership
    is not checked (srun then says)."""
    import os
    import shutil
    import subprocess

    env = os.environ if environ is None else environ
    if shutil.which("srun", path=env.get("PATH")) is None:
        return ("node_launcher = \"slurm\" needs Slurm's srun on PATH (the slurm-client package on Debian/Ubuntu); "
                "run specdash on a login or compute node of the cluster")
    if not env.get("SLURM_JOB_ID"):
        n = len(hosts)
        return ("node_launcher = \"slurm\" starts one job step per node inside an allocation, and there is none "
                f"(SLURM_JOB_ID is unset): run specdash inside one, e.g. `salloc --nodes {n} --gpus-per-node 8 "
                "specdash --bench --profile …` or from an sbatch script")
    job = env.get("SLURM_JOB_ID")
    nodelist = env.get("SLURM_JOB_NODELIST")
    if not nodelist:
        return (f"SLURM_JOB_ID is {job} but SLURM_JOB_NODELIST is unset (salloc and sbatch set both): specdash cannot "
                "tell which nodes the allocation holds; run it in the allocation's own shell, or export "
                f"SLURM_JOB_NODELIST=$(squeue -h -j {job} -o %N)")
    if shutil.which("scontrol", path=env.get("PATH")):
        try:
            r = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                               timeout=20, env=dict(env))
        except (OSError, subprocess.SubprocessError) as exc:
            return f"`scontrol show hostnames {nodelist}` failed ({exc}): is Slurm reachable from here?"
        if r.returncode != 0:
            why = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit code {r.returncode}"]
            return (f"`scontrol show hostnames {nodelist}` failed: {why[0][:200]} — srun would fail the same way; "
                    "is Slurm's configuration reachable from here (SLURM_CONF, slurm.conf)?")
        names = set(r.stdout.split())
        missing = [h for h in hosts if names and h not in names]
        if missing:
            return (f"[[nodes]] host {', '.join(missing)}: not a node of allocation {env.get('SLURM_JOB_ID')} "
                    f"({', '.join(sorted(names))}); under node_launcher = \"slurm\" each host is a Slurm node name "
                    "of the allocation (`scontrol show hostnames $SLURM_JOB_NODELIST` lists them)")
    return None


class SSHNodeProcess(ServerProcess):
    """One node's ``ssh`` (or ``srun``) client as a :class:`ServerProcess` (its own session, parent-death signal,
    leftover record, log with secrets as ``***``); :meth:`stop` first ends its standard input — the
    node script then stops the server and exits with its code — and waits for that, before the
    process-tree stop of the local client."""

    def stop(self, timeout_s: float = 30.0) -> int | None:
        proc = self._proc
        if proc is not None and proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            deadline = time.monotonic() + max(1.0, min(timeout_s, KILL_GRACE_S + 10))
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        return super().stop(timeout_s)


class NodeGroup:
    """The processes of one multi-node server, node 0 first, behaving as node 0's
    :class:`ServerProcess` (its pid, log, ring, ``wait_ready``) for the code that runs a server,
    except: :meth:`wait_ready` fails as soon as any node exits, :attr:`returncode` is node 0's or else
    the first other node's that exited, and :meth:`stop` stops every node (in parallel)."""

    def __init__(self, nodes: Sequence[ServerProcess]) -> None:
        if not nodes:
            raise ValueError("a node group needs at least one node")
        self.nodes = list(nodes)
        self.head = self.nodes[0]

    def __getattr__(self, name: str):
        return getattr(self.head, name)

    def start(self) -> NodeGroup:
        """Start the nodes > 0, then node 0 (all wait for each other in torch.distributed's rendezvous);
        a node that fails to start stops the ones already started.

        Raises:
            OSError: an ``ssh`` client cannot be executed.
        """
        started = []
        try:
            for n in [*self.nodes[1:], self.head]:
                n.start()
                started.append(n)
        except BaseException:
            for n in started:
                n.stop(5.0)
            raise
        return self

    @property
    def returncode(self) -> int | None:
        code = self.head.returncode
        if code is not None:
            return code
        return next((n.returncode for n in self.nodes[1:] if n.returncode is not None), None)

    def dead_nodes(self) -> list[tuple[int, ServerProcess]]:
        """``(node rank, process)`` of every node > 0 whose process has exited."""
        return [(i, n) for i, n in enumerate(self.nodes) if i and n.returncode is not None]

    def node_status(self) -> list[str]:
        """One line per node > 0: exited (code), or running and how long since its last output line
        (with that line) — a node that hangs without exiting shows as the silent one."""
        import time

        out = []
        now = time.monotonic()
        for i, n in enumerate(self.nodes):
            if not i:
                continue
            name = n.name or "ssh"
            if n.returncode is not None:
                out.append(f"node {i} ({name}): exited with code {n.returncode}")
                continue
            last = n.last_output_at
            tail = (n.log_tail(1) or "").strip()
            if last is None:
                out.append(f"node {i} ({name}): running, no output at all since its start")
            else:
                out.append(f"node {i} ({name}): running, last output {now - last:.0f} s ago"
                           + (f": {tail[:160]}" if tail else ""))
        return out

    async def wait_ready(self, client=None, timeout_s: float = 600.0, poll_s: float = 0.5) -> float:
        """Node 0's :meth:`ServerProcess.wait_ready`, failing as soon as another node exits.

        Raises:
            ServerStartError: node 0 exited or timed out (as for one node, with every other node's
                state: :meth:`node_status`), or node R exited first (its exit code and log tail; node 0
                would wait for it until ``--dist-timeout``).
        """
        import asyncio

        from specdash.sglang.process import ServerStartError

        task = asyncio.ensure_future(self.head.wait_ready(client, timeout_s, poll_s))
        try:
            while not task.done():
                dead = self.dead_nodes()
                if dead:
                    rank, n = dead[0]
                    task.cancel()
                    raise ServerStartError(
                        f"node {rank} ({n.name or 'ssh'}) exited with code {n.returncode} before node 0 was ready "
                        "(node 0 would wait for it in torch.distributed's rendezvous): its log is "
                        f"{n.log_path or 'in memory'}", n.returncode, n.log_tail())
                await asyncio.wait({task}, timeout=poll_s)
            try:
                return task.result()
            except ServerStartError as exc:
                if len(self.nodes) < 2:
                    raise
                raise ServerStartError(f"{exc.message}; the other nodes: " + "; ".join(self.node_status())
                                       + " (a node running but silent while node 0 waits is the one to look at)",
                                       exc.exit_code, exc.log_tail) from None
        finally:
            if not task.done():
                task.cancel()

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """Stop every node, in parallel; returns node 0's exit code."""
        import threading

        codes: dict[int, int | None] = {}

        def one(i: int, n: ServerProcess) -> None:
            try:
                codes[i] = n.stop(timeout_s)
            except Exception:  # keep stopping the others
                codes[i] = None

        threads = [threading.Thread(target=one, args=(i, n), daemon=True) for i, n in enumerate(self.nodes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s + 30)
        return codes.get(0)

    async def astop(self, timeout_s: float = 30.0) -> int | None:
        import asyncio

        return await asyncio.to_thread(self.stop, timeout_s)


__all__ = ["CONFIG_WORD", "ENV_END", "KILL_GRACE_S", "SRUN_BASE", "NodeGroup", "SSHNodeProcess", "env_block",
           "node_script", "slurm_problem", "srun_argv", "ssh_argv"]
