"""Multi-node emulation: ``--nnodes N --node-rank R --dist-init-addr HOST:PORT`` as SGLang 0.5.14 runs them.

What the real server does (``python/sglang/srt/entrypoints/engine.py`` ``_launch_subprocesses``,
``srt/model_executor/model_runner.py`` ``init_torch_distributed``, ``srt/utils/common.py``
``launch_dummy_health_check_server``):

* every node runs (tp × pp) / nnodes ranks; rank 0 (on node 0) listens for the ``torch.distributed``
  rendezvous at ``dist_init_addr`` and every other rank connects to it; distributed init ends when all
  ``tp × pp`` ranks have joined, or fails after ``--dist-timeout`` seconds (torch's default for NCCL:
  600 s) with ``torch.distributed.DistStoreError: Timed out after S seconds waiting for clients. k/n
  clients joined.`` — a node that never starts leaves node 0 waiting exactly there;
* a rank that cannot reach the rendezvous fails with ``DistNetworkError: The client socket has timed
  out after T ms while trying to connect to (HOST, PORT).`` (both texts from torch's ``TCPStore.cpp``);
* only node 0 runs the tokenizer and the HTTP API (``/generate``, the real ``/health``, ``/metrics``
  with scheduler and tokenizer metrics, the ``Decode batch`` log lines); a node > 0, once its schedulers
  are up, answers a stand-in server whose ``/health``, ``/health_generate`` and ``/ping`` are always 200
  and nothing else (``/metrics`` only under ``--enable-metrics``, without scheduler metrics unless
  ``--enable-metrics-for-all-schedulers`` — which the simulator does not model: its page stays empty).

The simulator's rendezvous is a small TCP exchange standing in for torch's store: node R > 0 connects
to ``dist_init_addr`` and sends ``specdash-sim node R/N``; when all N - 1 have joined node 0 answers
``go`` to each and both sides keep the connection open.  Its loss later (a node killed) ends the other
side with an NCCL-like error (exit 1), as a real deployment cannot survive one node going away.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specdash.sim.logfmt import LogWriter

#: torch.distributed's default init timeout for the NCCL backend, seconds (``default_pg_nccl_timeout``);
#: SGLang passes ``--dist-timeout`` when given (``srt/distributed/parallel_state.py``).
DEFAULT_DIST_TIMEOUT_S = 600.0


class NodeArgsError(ValueError):
    """A multi-node flag the simulator cannot run with (the message names it)."""


class RendezvousError(Exception):
    """Distributed init failed: ``exception`` (torch's class) and ``message`` (its text)."""

    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception, self.message = exception, message


@dataclass
class NodeArgs:
    """``--nnodes`` / ``--node-rank`` / ``--dist-init-addr`` / ``--dist-timeout`` as parsed."""

    nnodes: int = 1
    node_rank: int = 0
    host: str | None = None
    port: int | None = None
    timeout_s: float = DEFAULT_DIST_TIMEOUT_S

    @property
    def multi(self) -> bool:
        """True when the server spans several nodes."""
        return self.nnodes > 1

    def local_ranks(self, world: int) -> range:
        """The global ranks this node runs: (world / nnodes) of them, node by node."""
        per = max(1, world // self.nnodes)
        return range(self.node_rank * per, (self.node_rank + 1) * per)


def node_args(flags: dict[str, Any]) -> NodeArgs:
    """Read the multi-node flags of a checked command line.

    Raises:
        NodeArgsError: a non-integer ``--nnodes`` / ``--node-rank`` / ``--dist-timeout``, a rank outside
            0 … nnodes-1, or several nodes without a ``HOST:PORT`` ``--dist-init-addr``.
    """
    def _int(name: str, default: int) -> int:
        v = flags.get(name)
        if v in (None, True):
            return default
        try:
            return int(v)
        except (TypeError, ValueError):
            raise NodeArgsError(f"argument {name}: invalid int value: {v!r}") from None

    nnodes, rank = _int("--nnodes", 1), _int("--node-rank", 0)
    if nnodes < 1 or not 0 <= rank < nnodes:
        raise NodeArgsError(f"--node-rank {rank} is outside 0-{nnodes - 1} for --nnodes {nnodes}")
    addr = flags.get("--dist-init-addr", flags.get("--nccl-init-addr"))
    host = port = None
    if isinstance(addr, str):
        h, sep, p = addr.rpartition(":")
        if not sep or not h or not p.isdigit():
            raise NodeArgsError(f"--dist-init-addr {addr!r} is not HOST:PORT")
        host, port = h.strip("[]"), int(p)
    if nnodes > 1 and host is None:
        raise NodeArgsError(f"--nnodes {nnodes} needs --dist-init-addr HOST:PORT (node 0's rendezvous address)")
    timeout = flags.get("--dist-timeout")
    try:
        timeout_s = float(timeout) if timeout not in (None, True) else DEFAULT_DIST_TIMEOUT_S
    except (TypeError, ValueError):
        raise NodeArgsError(f"argument --dist-timeout: invalid int value: {timeout!r}") from None
    return NodeArgs(nnodes, rank, host, port, timeout_s)


@dataclass
class Rendezvous:
    """The simulator's stand-in for torch's rendezvous (see the module docstring).

    ``world``: tp × pp ranks over all nodes (for torch's ``k/n clients joined``); ``on_lost``: called
    with the lost node's rank when a joined peer's connection ends.
    """

    nodes: NodeArgs
    world: int
    log: LogWriter
    on_lost: Callable[[int], None] | None = None
    _peers: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=dict)
    _watchers: list[asyncio.Task] = field(default_factory=list)

    async def run(self) -> None:
        """Node 0: listen and wait for every other node; node R > 0: connect and wait for ``go``.

        Raises:
            RendezvousError: the timeout passed first, the address cannot be bound or reached, or
                node 0 went away before everyone joined.
        """
        if self.nodes.node_rank == 0:
            await self._serve()
        else:
            await self._join()

    async def _serve(self) -> None:
        a = self.nodes
        joined: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        all_in = asyncio.Event()

        async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                line = (await asyncio.wait_for(reader.readline(), 10.0)).decode(errors="replace").split()
                rank = int(line[2].split("/")[0]) if len(line) >= 3 and line[:2] == ["specdash-sim", "node"] else -1
            except (TimeoutError, ValueError, IndexError, OSError):
                rank = -1
            if not 0 < rank < a.nnodes or rank in joined:
                writer.close()
                return
            joined[rank] = (reader, writer)
            if len(joined) == a.nnodes - 1:
                all_in.set()

        try:
            server = await asyncio.start_server(hello, a.host, a.port, reuse_address=True)
        except OSError as exc:
            raise RendezvousError(
                "torch.distributed.DistNetworkError",
                f"The server socket has failed to listen on any local network address. port: {a.port}, "
                f"useIpv6: false, code: -{exc.errno or 98}, name: EADDRINUSE, message: "
                f"{(exc.strerror or 'address already in use').lower()}") from None
        try:
            await asyncio.wait_for(all_in.wait(), a.timeout_s)
        except TimeoutError:
            per = max(1, self.world // a.nnodes)
            raise RendezvousError(
                "torch.distributed.DistStoreError",
                f"Timed out after {a.timeout_s:g} seconds waiting for clients. {per * (1 + len(joined))}/{self.world} "
                "clients joined.") from None
        finally:
            server.close()
        for _rank, (_r, w) in sorted(joined.items()):
            w.write(b"go\n")
            with contextlib.suppress(OSError):
                await w.drain()
        self._peers = joined
        self._watch()

    async def _join(self) -> None:
        a = self.nodes
        deadline = time.monotonic() + a.timeout_s
        reader = writer = None
        while reader is None:
            try:
                reader, writer = await asyncio.open_connection(a.host, a.port)
            except OSError:
                if time.monotonic() >= deadline:
                    raise RendezvousError(
                        "torch.distributed.DistNetworkError",
                        f"The client socket has timed out after {int(a.timeout_s * 1000)}ms while trying to "
                        f"connect to ({a.host}, {a.port}).") from None
                await asyncio.sleep(0.1)
        writer.write(f"specdash-sim node {a.node_rank}/{a.nnodes}\n".encode())
        await writer.drain()
        try:
            line = await asyncio.wait_for(reader.readline(), max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            line = None
        if line is None or line.strip() != b"go":
            writer.close()
            raise RendezvousError(
                "torch.distributed.DistStoreError",
                f"Timed out after {a.timeout_s:g} seconds waiting for clients (node 0 at {a.host}:{a.port} "
                "did not complete the rendezvous)" if line is None else
                f"Connection closed by peer [{a.host}]:{a.port}: node 0 went away during the rendezvous")
        self._peers = {0: (reader, writer)}
        self._watch()

    def _watch(self) -> None:
        for rank, (reader, _w) in self._peers.items():
            self._watchers.append(asyncio.ensure_future(self._wait_eof(rank, reader)))

    async def _wait_eof(self, rank: int, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while await reader.read(1024):
                pass
            if self.on_lost is not None:
                self.on_lost(rank)

    def close(self) -> None:
        """Drop the peers' connections (the other side sees the node go away)."""
        for t in self._watchers:
            t.cancel()
        for _r, w in self._peers.values():
            with contextlib.suppress(Exception):
                w.close()


def lost_traceback(exception: str, message: str) -> str:
    """The scheduler's exception as SGLang logs it when a collective fails mid-run (a peer node gone)."""
    return ("Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "sglang/srt/managers/scheduler.py", line 3130, in run_scheduler_process\n'
            "    scheduler.run_event_loop()\n"
            '  File "sglang/srt/model_executor/model_runner.py", line 2403, in forward\n'
            "    output = self._forward_raw(\n"
            '  File "sglang/srt/distributed/parallel_state.py", line 574, in all_reduce\n'
            "    torch.distributed.all_reduce(input_, group=self.device_group)\n"
            f"{exception}: {message}\n")


def dist_traceback(exception: str, message: str) -> str:
    """The scheduler's exception as SGLang logs it when distributed init fails (a rank's
    ``init_torch_distributed`` → torch's rendezvous)."""
    return ("Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "sglang/srt/managers/scheduler.py", line 3124, in run_scheduler_process\n'
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
            '  File "sglang/srt/model_executor/model_runner.py", line 1191, in init_torch_distributed\n'
            "    init_distributed_environment(\n"
            '  File "sglang/srt/distributed/parallel_state.py", line 1482, in init_distributed_environment\n'
            "    torch.distributed.init_process_group(\n"
            '  File "torch/distributed/rendezvous.py", line 198, in _tcp_rendezvous_handler\n'
            "    store = _create_c10d_store(\n"
            f"{exception}: {message}\n")


def standin_app(node: NodeArgs, *, enable_metrics: bool) -> Any:
    """The ASGI app of a node > 0: SGLang's ``launch_dummy_health_check_server`` — ``/health``,
    ``/health_generate`` and ``/ping`` answer 200 with an empty body; ``/metrics`` (only with
    ``--enable-metrics``) has no scheduler or tokenizer metrics; everything else is 404."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    async def ok(_request) -> Response:
        return Response(status_code=200)

    async def metrics(_request) -> Response:
        return PlainTextResponse(
            f"# specdash simulator: node {node.node_rank} of {node.nnodes} (not node 0): no tokenizer or "
            "scheduler metrics here, as on SGLang's stand-in server; read node 0's /metrics\n")

    routes = [Route("/health", ok), Route("/health_generate", ok), Route("/ping", ok)]
    if enable_metrics:
        routes.append(Route("/metrics", metrics))
    return Starlette(routes=routes)
