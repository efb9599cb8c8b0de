"""NODES: a multi-node profile's consistency (GPUs, per-node overrides, rendezvous address, ports).

SGLang spans machines by running the same command on every node with ``--nnodes`` / ``--node-rank`` /
``--dist-init-addr`` (``python/sglang/srt/server_args.py``); ``--tp-size`` × ``--pp-size`` is the total
over all nodes and each node runs (tp × pp) / nnodes ranks on its local GPUs 0… (``srt/entrypoints/engine.py``
``_compute_node_ranges``: ``tp_size_per_node = tp_size // nnodes_per_tp_group``).  Rank 0 listens for the
``torch.distributed`` rendezvous at ``dist_init_addr`` (``srt/model_executor/model_runner.py``:
``tcp://HOST:PORT``); every other rank connects there, so an address the other nodes cannot reach leaves
node 0 waiting until ``--dist-timeout`` ends it (torch: ``Timed out after … seconds waiting for clients``).
"""

from __future__ import annotations

import ipaddress

from specdash.eagle3.rules.context import RuleContext
from specdash.eagle3.rules.serving import loopback_host
from specdash.sglang.cmdline import canonical_flag

#: Flags that must be the same on every node: what model is loaded, how it is split, how it speculates.
#: A per-node value makes ranks build different models or disagree on the batch layout.
SAME_ON_EVERY_NODE = frozenset({
    "--model-path", "--tokenizer-path", "--revision", "--dtype", "--quantization", "--load-format",
    "--kv-cache-dtype", "--context-length", "--trust-remote-code", "--tp-size", "--pp-size", "--dp-size",
    "--ep-size", "--enable-dp-attention", "--page-size", "--attention-backend", "--max-running-requests",
    "--chunked-prefill-size", "--mem-fraction-static", "--cuda-graph-max-bs", "--disable-cuda-graph",
})
#: Environment variables SGLang's speculative code reads on every rank (``srt/environ.py``).
SPEC_ENV = frozenset({"SGLANG_SIMULATE_ACC_LEN", "SGLANG_ENABLE_SPEC_V2", "SGLANG_ENABLE_METRICS_DEVICE_TIMER"})

_RDZV_WHY = ("Rank 0 (node 0) opens the torch.distributed rendezvous at --dist-init-addr and every rank of every "
             "node connects to it (SGLang srt/model_executor/model_runner.py: init_method tcp://HOST:PORT); a node "
             "that cannot reach it never joins and node 0 hangs in distributed init until --dist-timeout "
             "(torch: 'Timed out after … seconds waiting for clients. k/n clients joined').")


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _pp_size(flags: dict) -> int:
    for name in ("--pp-size", "--pipeline-parallel-size"):
        v = flags.get(name)
        if v not in (None, True):
            try:
                return max(1, int(v))
            except (TypeError, ValueError):
                pass
    return 1


def rule_gpus(ctx: RuleContext) -> None:
    """GPUS: a one-machine profile whose tp × pp needs more GPUs than the machine has
    (:attr:`RuleContext.gpus`: the simulator's scenario for a ``launcher = "sim"`` profile —
    :func:`specdash.launch.sim_gpus` —, else what the doctor read through NVML, counted as
    ``CUDA_VISIBLE_DEVICES`` (``[env]`` first) leaves them; unknown: nothing to judge).  SGLang starts rank R on GPU R
    (``srt/entrypoints/engine.py`` ``_launch_subprocesses``); a rank without one fails at start-up with CUDA
    'invalid device ordinal'.  Multi-node profiles: NODES."""
    prof = ctx.profile
    if getattr(prof, "nodes", None):
        return
    tp, pp = int(prof.server.tp_size or 1), _pp_size(ctx.flags)
    need = tp * pp
    if not ctx.gpus:
        return
    have = len(ctx.gpus)
    where = (f"the simulator's scenario {prof.sim.scenario!r} ([gpu] count)" if prof.server.launcher == "sim"
             else "this machine (NVML)")
    if prof.server.launcher != "sim":
        import os

        visible = ctx.env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
        if visible is not None:
            ids = [x for x in str(visible).split(",") if x.strip() and x.strip() != "-1"]
            have, where = min(have, len(ids)), f"this machine with CUDA_VISIBLE_DEVICES={visible}"
    if have is None or need <= have:
        return
    shape = f"tp {tp}" + (f" × pp {pp}" if pp > 1 else "")
    ctx.add("GPUS", "error", f"{shape} = {need} ranks, but {where} has {have} GPU{'s' if have != 1 else ''}",
            "SGLang starts rank R on local GPU R (srt/entrypoints/engine.py); a rank without a GPU fails at start-up "
            "with CUDA 'invalid device ordinal' and the whole server stops.",
            f"set [server] tp_size = {max(1, have // pp)}" + (
                " or point [sim] scenario at one with more GPUs ([gpu] count)" if prof.server.launcher == "sim"
                else " or run on a machine with more GPUs"),
            tp_size=tp, pp_size=pp, gpus=have)


def rule_nodes(ctx: RuleContext) -> None:
    """NODES: only for a profile with ``[[nodes]]``.

    * tp × pp must divide by nnodes (SGLang asserts it at start-up, ``server_args.py``
      ``check_server_args``: "tp_size must be divisible by number of nodes"), and each node with a known
      GPU count (its ``gpus``, else ``[server] gpus_per_node``) must hold (tp × pp) / nnodes GPUs: fewer
      fail at start-up (CUDA ``invalid device ordinal``), more sit idle;
    * model, parallelism and speculative flags (and speculative ``SGLANG_*`` variables) are the same on
      every node: a node's ``extra_args`` / ``env`` overriding one is an error;
    * the rendezvous host is node 0's (or at least reachable): not loopback with several hosts, not
      ``0.0.0.0``, not another node's host;
    * the rendezvous port differs from the HTTP port (both are bound on node 0), and with
      ``--enable-dp-attention`` stays clear of the five ports SGLang derives from it.
    """
    prof = ctx.profile
    nodes = list(getattr(prof, "nodes", None) or [])
    if not nodes:
        return
    from specdash.profile.nodes import parse_host_port

    s = prof.server
    n = len(nodes)
    tp = int(s.tp_size)
    pp = _pp_size(ctx.flags)
    total = tp * pp
    _gpus(ctx, nodes, n, tp, pp, total)
    _overrides(ctx, nodes)
    try:
        host, port = parse_host_port(str(s.dist_init_addr))
    except ValueError:  # the schema refuses it already; nothing more to judge
        return
    _rendezvous_host(ctx, nodes, host, port)
    _ports(ctx, host, port)
    _hosts(ctx, nodes)


def _hosts(ctx: RuleContext, nodes: list) -> None:
    """Two nodes on one host (each SGLang node takes all the GPUs it is given: on one machine they
    would need disjoint ``CUDA_VISIBLE_DEVICES``), and node 0's API bound to loopback while its host is
    another address (``--host 127.0.0.1`` answers only on that machine: the URL ``profile show`` prints
    would not)."""
    seen: dict[str, int] = {}
    for nd in nodes:
        if nd.host in seen and not loopback_host(nd.host):  # loopback twice: a test deployment on one machine
            ctx.add("NODES", "warning", f"nodes {seen[nd.host]} and {nd.node_rank} are both on {nd.host}",
                    "SGLang runs one node per machine; two on one host share its GPUs unless each node's env sets "
                    "disjoint CUDA_VISIBLE_DEVICES.",
                    "give each node its own host, or set CUDA_VISIBLE_DEVICES per node in [nodes.env]",
                    host=nd.host)
        seen.setdefault(nd.host, nd.node_rank)
    node0 = next((nd for nd in nodes if nd.node_rank == 0), None)
    bind = str(ctx.profile.server.host)
    if node0 is not None and loopback_host(bind) and not loopback_host(node0.host):
        ctx.add("NODES", "warning", f"node 0 ({node0.host}) serves the HTTP API on --host {bind}: it answers only "
                f"on node 0 itself, not at http://{node0.host}:{ctx.profile.server.port}",
                "SGLang binds the API to --host (server_args.py); a loopback address is unreachable from other "
                "machines, including the one specdash runs on when that is not node 0.",
                f'set [server] host = "0.0.0.0" (with an API key) or host = "{node0.host}", or run specdash on '
                "node 0", host=bind)


def _gpus(ctx: RuleContext, nodes: list, n: int, tp: int, pp: int, total: int) -> None:
    s = ctx.profile.server
    shape = f"--tp-size {tp}" + (f" × --pp-size {pp}" if pp > 1 else "")
    if total % n:
        ctx.add("NODES", "error",
                f"{shape} = {total} ranks do not split evenly over {n} nodes",
                "SGLang refuses it at start-up: AssertionError 'tp_size must be divisible by number of nodes' "
                "(srt/server_args.py check_server_args); every node runs the same number of ranks.",
                f"make tp × pp a multiple of {n}: e.g. --tp-size {max(n, (tp // n) * n or n)} ([server] tp_size)",
                tp_size=tp, pp_size=pp, nnodes=n)
        return
    per_node = total // n
    for node in nodes:
        gpus = node.gpus or s.gpus_per_node
        if gpus is None or gpus == per_node:
            continue
        where = f"node {node.node_rank} ({node.host})"
        right_tp = gpus * n // pp
        if gpus < per_node:
            ctx.add("NODES", "error",
                    f"{where} has {gpus} GPUs but {shape} over {n} nodes puts {per_node} ranks on each",
                    f"Each node runs (tp × pp) / nnodes = {per_node} ranks on its local GPUs 0-{per_node - 1} "
                    "(SGLang srt/entrypoints/engine.py _compute_node_ranges); a rank without a GPU fails at "
                    "start-up with CUDA 'invalid device ordinal' and the whole server stops.",
                    f"set [server] tp_size = {right_tp} (tp × pp = GPUs per node × nodes = {gpus} × {n}), or run "
                    f"on nodes with {per_node} GPUs (and fix the node's gpus)",
                    node_rank=node.node_rank, gpus=gpus, ranks_per_node=per_node, tp_size=tp, pp_size=pp, nnodes=n)
        else:
            ctx.add("NODES", "warning",
                    f"{where} has {gpus} GPUs but {shape} over {n} nodes uses only {per_node} of them",
                    f"SGLang starts (tp × pp) / nnodes = {per_node} ranks per node (srt/entrypoints/engine.py "
                    f"_compute_node_ranges); the other {gpus - per_node} GPUs of the node stay idle.",
                    f"set [server] tp_size = {right_tp} to use every GPU (tp × pp = {gpus} × {n}), or set the "
                    f"node's gpus = {per_node} if the rest belong to something else",
                    node_rank=node.node_rank, gpus=gpus, ranks_per_node=per_node, tp_size=tp, pp_size=pp, nnodes=n)


def _overrides(ctx: RuleContext, nodes: list) -> None:
    for node in nodes:
        where = f"node {node.node_rank} ({node.host})"
        for word in node.extra_args:
            if not word.startswith("--"):
                continue
            flag = canonical_flag(word.split("=", 1)[0])
            if flag in SAME_ON_EVERY_NODE or flag.startswith("--speculative-"):
                ctx.add("NODES", "error",
                        f"{where} overrides {flag} in its own extra_args",
                        "Every node must run the same model, split and speculative settings: SGLang builds one "
                        "model over all ranks (the same command on every node, srt/server_args.py); ranks built "
                        "with different weights, shapes or draft settings fail in their first collective or "
                        "produce wrong tokens.",
                        f"remove {flag} from [[nodes]] node_rank = {node.node_rank} extra_args; set it once for "
                        "every node in [server] / [speculative]",
                        node_rank=node.node_rank, flag=flag)
        for key, value in node.env.items():
            shared = ctx.profile.env.get(key)
            if key in SPEC_ENV and value != shared:
                ctx.add("NODES", "error",
                        f"{where} sets {key}={value} in its env ([env] has {shared if shared is not None else 'none'})",
                        f"{key} changes how speculative decoding runs and SGLang reads it on every rank "
                        "(srt/environ.py); ranks that disagree take different paths in the same batch.",
                        f"move {key} to [env] (one value for every node) and remove it from the node's env",
                        node_rank=node.node_rank, variable=key)


def _rendezvous_host(ctx: RuleContext, nodes: list, host: str, port: int) -> None:
    addr = ctx.profile.server.dist_init_addr
    node0 = nodes[0].host
    hosts = {x.host for x in nodes}
    # every loopback name (localhost, 127.0.0.1, ::1, 127.x) is this one machine
    several = len({"loopback" if loopback_host(h) else h.lower() for h in hosts}) > 1

    def same(a: str, b: str) -> bool:
        return a.lower() == b.lower() or (loopback_host(a) and loopback_host(b))

    http = ctx.flags.get("--port")
    good = port if str(port) != str(http) else (port + 20000 if port < 45535 else port - 20000)
    fix_addr = f'dist_init_addr = "{node0}:{good}"'
    if _unspecified(host):
        ctx.add("NODES", "error", f"dist_init_addr {addr} is not an address other nodes can connect to",
                _RDZV_WHY + " 0.0.0.0 / :: mean 'any local address' to a listener, nothing to a client.",
                f"use node 0's address: [server] {fix_addr}", dist_init_addr=addr)
    elif loopback_host(host) and several:
        if loopback_host(node0):  # node 0's own address is loopback too: there is no address to copy
            fix = ("give node 0 an address the other nodes reach (its LAN or cluster-network address) as its "
                   f'host in [[nodes]] and in [server] dist_init_addr = "<that address>:{good}"')
        else:
            fix = f"use node 0's address: [server] {fix_addr}"
        ctx.add("NODES", "error",
                f"dist_init_addr {addr} is a loopback address but the nodes are on {len(hosts)} hosts "
                f"({', '.join(sorted(hosts))})",
                _RDZV_WHY + f" On nodes other than node 0, {host} is the node itself, not node 0.",
                fix, dist_init_addr=addr, hosts=sorted(hosts))
    elif not same(host, node0) and host in hosts:
        other = next(x for x in nodes if x.host == host)
        ctx.add("NODES", "error",
                f"dist_init_addr {addr} is node {other.node_rank}'s host, not node 0's ({node0})",
                _RDZV_WHY + " The listener is rank 0's, which runs on node 0: it cannot listen on another "
                "machine's address.", f"[server] {fix_addr}", dist_init_addr=addr, node0=node0)
    elif not same(host, node0):
        ctx.add("NODES", "warning",
                f"dist_init_addr {addr} names {host}, which is not node 0's host ({node0})",
                _RDZV_WHY + " This is right when it is another name or interface of node 0 (e.g. its "
                "InfiniBand or cluster-network address), wrong otherwise.",
                f"if {host} is not node 0, set [server] {fix_addr}; if it is, set node 0's host = \"{host}\" "
                "to silence this", dist_init_addr=addr, node0=node0)


def _ports(ctx: RuleContext, host: str, port: int) -> None:
    http = ctx.flags.get("--port")
    try:
        http = int(http)
    except (TypeError, ValueError):
        return
    addr = ctx.profile.server.dist_init_addr
    if http == port:
        ctx.add("NODES", "error", f"dist_init_addr {addr} uses the HTTP port {http}",
                "Node 0 binds both: SGLang's HTTP server on --port and torch.distributed's rendezvous on the "
                "dist_init_addr port (srt/model_executor/model_runner.py); the second bind fails with "
                "'address already in use' and the server does not start.",
                f'use another port: [server] dist_init_addr = "{host}:{port + 20000 if port < 45535 else port - 20000}"',
                http_port=http, dist_init_port=port)
    elif ctx.flags.get("--enable-dp-attention") and port < http <= port + 6:
        ctx.add("NODES", "error",
                f"the HTTP port {http} is one of the ports SGLang derives from dist_init_addr {addr} under "
                "--enable-dp-attention",
                f"With DP attention SGLang's inter-process sockets use dist_init_port + 1 … + 6 on every node "
                f"({port + 1}-{port + 6}; srt/server_args.py PortArgs.init_new); the HTTP server on one of them "
                "makes start-up fail with 'Port is already in use'.",
                f'move one: [server] dist_init_addr = "{host}:{http + 100}" or [server] port = {port - 100}',
                http_port=http, dist_init_port=port)
