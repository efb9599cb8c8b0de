"""Profile → SGLang: the flags a profile asks for, the argv + env that start it, what may be shown.

:func:`server_flags` turns the profile's fields into canonical SGLang flags;
:func:`build_launch` adds the program (``sglang.launch_server`` or the simulator) and
SGLang's own normalisation of the speculative flags
(:func:`specdash.sglang.speculative.resolve_flags`), giving a
:class:`~specdash.sglang.launchspec.LaunchSpec`.  :func:`redacted_profile_data` is the
profile as a run's manifest stores it, secrets hidden by :mod:`specdash.sglang.secrets`.
"""

from __future__ import annotations

import sys
from typing import Any

from specdash.profile.nodes import NodeLaunch
from specdash.profile.schema import Profile, ProfileError
from specdash.sglang.adaptive import early_launch
from specdash.sglang.cmdline import flags_to_argv, parse_command_line
from specdash.sglang.launchspec import LaunchSpec
from specdash.sglang.secrets import MASK, redact_argv, redact_env, redact_url
from specdash.sglang.speculative import resolve_flags
from specdash.sglang.versions import DEFAULT_VERSION


def server_flags(profile: Profile, *, port: int | None = None, node_rank: int | None = None) -> dict[str, Any]:
    """The SGLang flags a profile asks for, canonical name → value, in a stable order.

    A multi-node profile (``[[nodes]]``) adds ``--nnodes N --node-rank R --dist-init-addr HOST:PORT``
    right after ``--tp-size`` (the total TP over all nodes, as SGLang takes it) and node ``R``'s own
    ``extra_args`` last; ``node_rank`` None means node 0 (the one whose flags the doctor judges).
    A single-node profile's flags are unchanged (``dist_init_addr`` alone adds ``--dist-init-addr``).
    """
    s, sp = profile.server, profile.speculative
    flags: dict[str, Any] = {"--model-path": s.model_path}
    if s.tp_size != 1:
        flags["--tp-size"] = s.tp_size
    node = None
    if profile.nodes:
        rank = 0 if node_rank is None else node_rank
        node = profile.node(rank)
        if node is None:
            raise ProfileError(f"profile {profile.name!r} has no node with node_rank {rank} "
                               f"(ranks 0-{len(profile.nodes) - 1})")
        flags["--nnodes"] = len(profile.nodes)
        flags["--node-rank"] = rank
        flags["--dist-init-addr"] = s.dist_init_addr
    elif s.dist_init_addr:
        flags["--dist-init-addr"] = s.dist_init_addr
    if s.mem_fraction_static is not None:
        flags["--mem-fraction-static"] = s.mem_fraction_static
    if s.context_length is not None:
        flags["--context-length"] = s.context_length
    flags["--host"] = s.host
    flags["--port"] = port if port is not None else s.port
    if s.enable_metrics:
        flags["--enable-metrics"] = True
    if s.api_key:
        flags["--api-key"] = s.api_key
    extra = parse_command_line(["x"] + list(s.extra_args)).flags if s.extra_args else {}
    if sp is not None and sp.algorithm:
        flags["--speculative-algorithm"] = sp.algorithm
        if sp.draft_model_path:
            flags["--speculative-draft-model-path"] = sp.draft_model_path
        for name, value in (
            ("--speculative-num-steps", sp.num_steps),
            ("--speculative-eagle-topk", sp.eagle_topk),
            ("--speculative-num-draft-tokens", sp.num_draft_tokens),
        ):
            if value is not None:
                flags[name] = value
        if sp.extra_args:
            extra.update(parse_command_line(["x"] + list(sp.extra_args)).flags)
    if node is not None and node.extra_args:
        extra.update(parse_command_line(["x"] + list(node.extra_args)).flags)
    for k, v in extra.items():
        flags[k] = v
    return flags


def build_launch(profile: Profile, *, version: str | None = None, port: int | None = None,
                 node_rank: int | None = None) -> LaunchSpec:
    """Build the argv + env that start ``profile``'s server (never through a shell).

    ``launcher = "sglang"`` runs ``<python> -m sglang.launch_server <flags>``;
    ``launcher = "sim"`` runs ``<this python> -m specdash.sim <the same flags> --sim-…``.
    ``port`` overrides the profile's port (the runner picks a free one for port 0).
    For a multi-node profile, ``node_rank`` picks the node (None: node 0): its flags
    (:func:`server_flags`), its ``python`` (else ``[server] python``) and env = ``[env]`` with the
    node's ``env`` on top (:func:`build_node_launches` gives them all).

    Raises:
        ProfileError: via profile accessors (bad paths, unset variables).
    """
    from specdash.checkpoint.reader import peek_architectures, peek_vocab

    s = profile.server
    ver = version or profile.judged_version()[0]
    flags = server_flags(profile, port=port, node_rank=node_rank)
    node = profile.node(0 if node_rank is None else node_rank) if profile.nodes else None
    env = dict(profile.env) | (dict(node.env) if node is not None else {})
    if profile.server.launcher == "sim":
        # the simulator runs where specdash is installed: this interpreter unless the node or [server] names one
        program = [(node.python if node is not None else None) or s.python or sys.executable, "-m", "specdash.sim"]
        sim = profile.sim
        flags["--sim-scenario"] = sim.scenario_ref(profile)
        flags["--sim-seed"] = sim.seed
        if sim.time_scale is not None:
            flags["--time-scale"] = sim.time_scale
        flags["--sim-sglang-version"] = sim.sglang_version or s.sglang_version or DEFAULT_VERSION
    else:
        program = [(node.python if node is not None else None) or s.python or "python3", "-m",
                   "sglang.launch_server"]
    target_archs = peek_architectures(s.model_path)
    draft_vocab = peek_vocab(profile.speculative.draft_model_path, "draft_vocab_size") if profile.speculative else None
    # 0.5.14+: --speculative-adaptive fixes top-k / steps / draft tokens before the EAGLE checks
    # (sglang/srt/arg_groups/speculative_hook.py); the doctor resolves the same way.
    resolved, _ = early_launch(flags, ver, env=env)
    spec = resolve_flags(
        resolved,
        version=ver,
        env=env,
        target_architectures=target_archs,
        draft_vocab_size=draft_vocab,
        target_vocab_size=peek_vocab(s.model_path, "vocab_size"),
        draft_architectures=peek_architectures(profile.speculative.draft_model_path) if profile.speculative else None,
    )
    argv = program + flags_to_argv(flags)
    return LaunchSpec(argv, env, spec, s.host, int(flags["--port"]), s.api_key)


def build_node_launches(prof: Profile, *, version: str | None = None) -> list[NodeLaunch]:
    """Each node's exact command, node 0 first: the :func:`build_launch` of the
    profile plus ``--nnodes N --node-rank R --dist-init-addr HOST:PORT`` (after ``--tp-size``), the
    node's ``extra_args`` last; env = ``[env]`` then the node's ``env`` (a node's value wins).

    Raises:
        ProfileError: not a multi-node profile, or via :func:`build_launch`.
    """
    if not prof.nodes:
        raise ProfileError(f"profile {prof.name!r} is a single-node profile (no [[nodes]])")
    return [NodeLaunch(n, build_launch(prof, version=version, node_rank=n.node_rank)) for n in prof.nodes]


def redacted_profile_data(profile: Profile) -> dict:
    """``profile.model_dump()`` with its secrets hidden, for run manifests: ``server.api_key``
    becomes ``***``, secret-looking ``[env]`` values too (:func:`~specdash.sglang.secrets.redact_env`),
    the values of secret flags in ``server.extra_args`` / ``speculative.extra_args``
    (:func:`~specdash.sglang.secrets.redact_argv`), and the userinfo of ``[[gpu_exporters]]`` URLs."""
    data = profile.model_dump()
    if not data.get("nodes"):  # a single-node profile's manifest stays as it was before [[nodes]] existed
        data.pop("nodes", None)
        for key in ("nnodes", "dist_init_addr", "node_launcher", "gpus_per_node"):
            if data["server"].get(key) is None:
                data["server"].pop(key, None)
    for node in data.get("nodes") or []:
        node["env"] = redact_env(node.get("env") or {})
        node["extra_args"] = redact_argv(node.get("extra_args") or [])
    if data["server"].get("api_key"):
        data["server"]["api_key"] = MASK
    data["server"]["extra_args"] = redact_argv(data["server"].get("extra_args") or [])
    if data.get("speculative"):
        data["speculative"]["extra_args"] = redact_argv(data["speculative"].get("extra_args") or [])
    data["env"] = redact_env(data.get("env", {}))
    for e in data.get("gpu_exporters") or []:  # http://user:password@host → http://***@host
        e["url"] = redact_url(e.get("url") or "")
    return data
