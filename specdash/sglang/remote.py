"""Starting one node of a multi-node SGLang server over ssh (``[server] node_launcher = "ssh"``).

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


def node_script(argv: Sequence[str], *, workdir: str | None = None, with_config: bool = False) -> str:
    """The ``sh`` script one node runs (module docstring); ``argv`` may hold :data:`CONFIG_WORD`
    where the path of the ``--config`` file goes (``with_config``: the file's contents follow the
    environment on standard input, up to a second :data:`ENV_END`)."""
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
    lines += [
        f"setsid {words} < /dev/null 3<&- 2>&1 &",
        "pg=$!",
        "echo \"specdash-node pgid $pg\"",
        f"( cat <&3 > /dev/null; kill -TERM -$pg 2>/dev/null; sleep {KILL_GRACE_S}; "
        "kill -KILL -$pg 2>/dev/null ) > /dev/null 2>&1 &",  # not holding ssh's output: the channel closes at once
        "w=$!",
        "wait $pg; rc=$?",
        "kill -TERM -$pg 2>/dev/null; kill $w 2>/dev/null",
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


class SSHNodeProcess(ServerProcess):
    """One node's ``ssh`` client as a :class:`ServerProcess` (its own session, parent-death signal,
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


__all__ = ["CONFIG_WORD", "ENV_END", "KILL_GRACE_S", "NodeGroup", "SSHNodeProcess", "env_block", "node_script", "ssh_argv"]
