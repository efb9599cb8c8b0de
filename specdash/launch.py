"""The one launch path of the bench, ``tune`` and the dashboard.

preflight gate → start the server → manifest (secrets redacted) → wait until ready → stop::

    report = preflight(profile, sglang_version=v, force=force)        # raises PreflightBlocked
    launch = ServerLaunch.prepare(profile, rundir, sglang_version=v, preflight=report)
    launch.start()                                                     # ServerProcess, own group
    ready_s = await launch.wait_ready(client)                          # raises ServerStartError
    launch.record_server(await client.server_info())                   # manifest += what it runs
    launch.stop()                                                      # the whole process tree

:func:`build_manifest` is the one manifest builder: a launched run and an attached one
(``launch=None``) write the same fields, argv / env / profile with secrets as ``***``.
Nothing here prints (callers report progress their own way).  The run directory is anything
with ``path``, ``server_log_path`` and ``write_manifest`` (a
:class:`specdash.bench.rundir.RunDir`): this module sits below ``bench`` and does not import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from specdash.eagle3.findings import DoctorReport
    from specdash.profile import Profile, Suite
    from specdash.results import Effective
    from specdash.sglang.client import SGLangClient
    from specdash.sglang.launchspec import LaunchSpec
    from specdash.sglang.process import ServerProcess

#: Seconds a launched server may take to answer ``/health`` 200 (real servers: 1–5 min of
#: weight loading, CUDA graphs and JIT); ``$SPECDASH_READY_TIMEOUT`` overrides it.
READY_TIMEOUT_S = float(os.environ.get("SPECDASH_READY_TIMEOUT", "900"))


class PreflightBlocked(Exception):
    """Preflight found errors and ``force`` was not given: nothing was launched.

    Attributes:
        report: the :class:`~specdash.eagle3.rules.DoctorReport` with the error findings.
    """

    def __init__(self, report: DoctorReport) -> None:
        super().__init__("preflight found errors")
        self.report = report


class RunDirLike(Protocol):
    """What the launch path needs of a run directory (a ``RunDir`` has it)."""

    path: Path

    @property
    def server_log_path(self) -> Path: ...

    def write_manifest(self, manifest: dict) -> None: ...


# -- preflight ----------------------------------------------------------------------------------
def run_preflight(profile: Profile, *, sglang_version: str | None = None, gpus: list[dict] | None = None,
                  concurrency: int | None = None, argcheck: bool = True) -> DoctorReport:
    """The doctor's findings for ``profile`` — the one entry of ``specdash doctor`` and of every launch's
    preflight (bench, tune, dashboard), so both judge the same inputs.

    Builds them here: the GPUs (``gpus`` when the caller knows them — ``--gpu-memory-mib`` —, else a
    simulator profile's scenario GPUs, else NVML's devices), the simulator scenario check (SIM_SCENARIO), and
    SGLang's own argument checks of the exact argv where the profile's Python has SGLang (ARGCHECK; off with
    ``argcheck=False`` or ``$SPECDASH_ARGCHECK=0``).

    Raises:
        ProfileError: the profile cannot be expanded; ValueError: an unparsable version.
    """
    from specdash.eagle3.doctor import run_doctor

    if gpus is None:
        gpus = sim_gpus(profile) if profile.server.launcher == "sim" else nvml_gpus()
    report = run_doctor(profile, sglang_version=sglang_version, gpus=gpus, concurrency=concurrency,
                        argcheck=argcheck)
    scenario = sim_scenario_finding(profile)
    if scenario is not None:
        report.findings.insert(0, scenario)
    return report


def nvml_gpus() -> list[dict] | None:
    """This host's GPUs through NVML (``[{"name", "memory_total_mib"}, …]``), None without a driver."""
    try:
        from specdash.collect.gpu import read_gpus

        found = read_gpus(processes=False)
    except Exception:  # no driver, no pynvml: the memory checks say "unknown"
        return None
    return [{"name": g.name, "memory_total_mib": g.memory_total_mib} for g in found] or None


def sim_scenario_finding(profile: Profile):
    """An error finding (``SIM_SCENARIO``) when a simulator profile's ``[sim] scenario`` is neither a
    bundled scenario nor a readable scenario file (the simulator would refuse to start); else None."""
    if profile.server.launcher != "sim":
        return None
    from pathlib import Path

    from specdash.eagle3.findings import Finding
    from specdash.sim.scenario import SCENARIO_DIR, ScenarioError, load_scenario, scenario_names

    ref = profile.sim.scenario_ref(profile)
    try:
        load_scenario(ref)
    except (ScenarioError, OSError, ValueError) as exc:
        known = scenario_names()
        name = (ref or "healthy").strip()
        found = Path(name).expanduser() if Path(name).expanduser().is_file() else SCENARIO_DIR / f"{name}.toml"
        if found.is_file():  # the scenario is there; its content is what the simulator refuses
            fix = (f"correct {found} as the message says (the keys and tables a scenario takes: "
                   f"{SCENARIO_DIR / 'healthy.toml'}), or set [sim] scenario to one of {', '.join(known)}")
        else:
            fix = f"set [sim] scenario to one of {', '.join(known)}, or to the path of a scenario TOML file"
        return Finding(
            "SIM_SCENARIO", "error",
            f"[sim] scenario {profile.sim.scenario!r} cannot be used: {exc}",
            why="The simulator loads the scenario at start-up and exits when it is unknown or unreadable.",
            fix=fix, evidence={"scenario": profile.sim.scenario, "known": known,
                               "file": str(found) if found.is_file() else None})
    return None


def sim_gpus(profile: Profile) -> list[dict] | None:
    """The GPUs of a ``launcher = "sim"`` profile's scenario (``[gpu] count`` × ``{"name",
    "memory_total_mib"}``, what the doctor's GPUS and MEMORY checks read); None for another launcher or
    an unreadable scenario (SIM_SCENARIO says why)."""
    if profile.server.launcher != "sim":
        return None
    try:
        from specdash.sim.scenario import load_scenario

        g = load_scenario(profile.sim.scenario_ref(profile)).gpu
    except Exception:  # an unknown or unreadable scenario: the simulator refuses it, SIM_SCENARIO reports it
        return None
    return [{"name": g.name, "memory_total_mib": g.memory_mib}] * int(g.count)


def gate(report: DoctorReport | None, *, force: bool = False) -> None:
    """Refuse a launch whose preflight ``report`` has errors, unless ``force``.

    Raises:
        PreflightBlocked: ``report`` has an error finding and ``force`` is False.
    """
    if report is not None and report.has_errors and not force:
        raise PreflightBlocked(report)


def preflight(profile: Profile, *, sglang_version: str | None = None, force: bool = False) -> DoctorReport:
    """:func:`run_preflight`, then :func:`gate`; returns the report (also when forced).

    Raises:
        PreflightBlocked, ProfileError, ValueError: see :func:`gate` and :func:`run_preflight`.
    """
    report = run_preflight(profile, sglang_version=sglang_version)
    gate(report, force=force)
    return report


def attached_profile() -> Profile:
    """The stand-in profile of a run on an attached server (``--url`` without ``--profile``):
    name ``attached``, model ``(attached)``, no speculation."""
    from specdash.profile import parse_profile

    return parse_profile({"name": "attached", "server": {"model_path": "(attached)"}})


# -- manifest -----------------------------------------------------------------------------------
def build_manifest(
    profile: Profile,
    *,
    url: str,
    launch: LaunchSpec | None = None,
    suite: Suite | None = None,
    preflight: DoctorReport | None = None,
    sglang_version: str | None = None,
    extra: dict | None = None,
) -> dict:
    """``manifest.json`` of a run before the server answers (the one builder).

    Args:
        profile: the (expanded) profile; written redacted as ``profile_data``.
        url: the server's base URL.
        launch: the launch's argv / env / speculative resolution; None when attached.
        suite: the suite the run sends (None: the dashboard, whose load may change suites).
        preflight: the doctor report the launch was gated on, when it ran.
        sglang_version: ``--sglang-version`` of the command line (the judged version).
        extra: caller fields merged last (``{"ab": …}``, ``{"source": "tui"}``).

    Returns:
        A JSON-able dict: ``profile``, ``profile_path``, ``profile_data``, ``variant``
        (:func:`~specdash.profile.variants.variant_record`), ``suite``,
        ``suite_path``, ``url``, ``attached``, ``simulated``, ``judged_sglang_version``,
        ``version_source``, ``gpus`` (NVML now), the extras; for a launch also ``argv``,
        ``env`` (redacted), ``asked``, ``expected_effective``, ``adjustments``; ``preflight``
        when given.  :func:`server_fields` adds what the running server says.
    """
    from specdash.collect.gpu import gpu_snapshot
    from specdash.profile import redacted_profile_data
    from specdash.profile.variants import variant_record
    from specdash.sglang.secrets import redact_url

    ver, src = profile.judged_version(cli=sglang_version)
    m = {
        "profile": profile.name,
        "profile_path": str(profile.path) if profile.path else None,
        "profile_data": redacted_profile_data(profile),
        # a derived profile (tune's baseline and explorations): the source file and what changed, so that
        # ``--bench --resume`` makes the same profile again (None: the file's own profile)
        "variant": variant_record(profile),
        "suite": suite.name if suite is not None else None,
        "suite_path": str(suite.path) if suite is not None and suite.path else None,
        "url": redact_url(url) if url else url,  # never a password from http://user:pass@host
        "attached": launch is None,
        "simulated": profile.server.launcher == "sim" and launch is not None,
        "judged_sglang_version": ver,
        "version_source": src,
        "gpus": gpu_snapshot(),
    } | (extra or {})
    if launch is not None:
        m["argv"] = launch.redacted_argv()
        m["env"] = launch.redacted_env()
        m["asked"] = launch.spec.asked
        m["expected_effective"] = launch.spec.effective()
        m["adjustments"] = [a.__dict__ for a in launch.spec.adjustments]
    if preflight is not None:
        m["preflight"] = preflight.to_json()
    return m


def effective_from_server_info(info: dict | None) -> Effective:
    """The four speculative values read back from ``/server_info`` (None when unknown or off)."""
    info = info or {}
    algo = info.get("speculative_algorithm")
    return {
        "speculative_algorithm": algo if algo not in ("", "NONE", None) else None,
        "speculative_num_steps": info.get("speculative_num_steps") if algo else None,
        "speculative_eagle_topk": info.get("speculative_eagle_topk") if algo else None,
        "speculative_num_draft_tokens": info.get("speculative_num_draft_tokens") if algo else None,
    }


def captured_decode_bs(info: dict | None) -> list[int] | None:
    """The decode batch sizes the server captured CUDA graphs for, from ``/server_info``:
    ``cuda_graph_config.decode.bs`` (0.5.14+; None when its backend is ``disabled``), else
    ``cuda_graph_bs`` (earlier releases; None with ``disable_cuda_graph``).  None when unknown."""
    info = info or {}
    cfg = info.get("cuda_graph_config")
    if isinstance(cfg, dict) and isinstance(cfg.get("decode"), dict):
        dec = cfg["decode"]
        bs = None if dec.get("backend") == "disabled" else dec.get("bs")
    else:
        bs = None if info.get("disable_cuda_graph") else info.get("cuda_graph_bs")
    if isinstance(bs, list) and bs and all(isinstance(b, int) and not isinstance(b, bool) for b in bs):
        return sorted(set(bs))
    return None


def server_fields(info: dict, ready_s: float | None) -> dict:
    """Manifest fields from the server's ``/server_info`` once it answers: ``sglang_version``,
    ``server_simulated``, ``effective`` (see :func:`effective_from_server_info`),
    ``time_to_ready_s`` (process start → ``/health`` 200, seconds; None when attached),
    ``launch_command`` and ``cuda_graph_bs`` (:func:`captured_decode_bs`)."""
    return {
        "sglang_version": info.get("version"),
        "server_simulated": bool(info.get("simulated")),
        "effective": effective_from_server_info(info),
        "time_to_ready_s": ready_s,
        "launch_command": info.get("launch_command"),
        "cuda_graph_bs": captured_decode_bs(info),
    }


# -- the launch ---------------------------------------------------------------------------------
def split_secrets(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` without SGLang's secret flags (``--api-key``, ``--admin-api-key``, either spelling), and
    those flags' values as ``{"api-key": …}`` (the ``--config`` YAML keys, see :func:`secrets_via_config`)."""
    from specdash.sglang.secrets import SECRET_FLAGS

    secrets: dict[str, str] = {}
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if name in SECRET_FLAGS and eq:
            secrets[name[2:]] = val
        elif a in SECRET_FLAGS and i + 1 < len(argv):
            secrets[a[2:]] = argv[i + 1]
            i += 1
        else:
            out.append(a)
        i += 1
    return out, secrets


def _own_config(argv: list[str]) -> bool:
    return "--config" in argv or any(x.startswith("--config=") for x in argv)


_OWN_CONFIG_NOTE = ("the profile passes its own --config and SGLang reads only one, so the API key stays on the "
                    "command line (visible to other local users in ps)")


def secrets_via_config(argv: list[str]) -> tuple[list[str], str | None, str | None]:
    """``argv`` with SGLang's secret flags (``--api-key``, ``--admin-api-key``) moved into a ``--config``
    file, so other local users cannot read the key in ``ps`` / ``/proc/<pid>/cmdline``; returns
    ``(argv, private dir holding the file or None, note or None)``.

    SGLang reads ``--config FILE.yaml`` before parsing its flags (``prepare_server_args`` in
    ``srt/server_args.py``, ``ConfigArgumentMerger`` in ``srt/server_args_config_parser.py``, 0.5.11–
    0.5.14: a YAML mapping of flag names to values, merged as ``--name value``).  The file is
    ``{"api-key": …}`` (JSON, which YAML reads as a flow mapping), mode 0600 in a fresh 0700 directory
    of the temp dir; :class:`ServerLaunch` deletes it once the server is ready (or failed, or stopped), and a
    specdash killed before that leaves it to the next start, which deletes it
    (:func:`specdash.sglang.leftovers.remove_stale_secret_dirs`).
    When ``argv`` already has a ``--config`` (SGLang takes one), the key stays in argv and the note says
    so.  Without secret flags ``argv`` is returned unchanged.
    """
    import json
    import os

    out, secrets = split_secrets(list(argv))
    if not secrets:
        return list(argv), None, None
    if _own_config(out):
        return list(argv), None, _OWN_CONFIG_NOTE
    from specdash.sglang.leftovers import make_secret_dir

    d = make_secret_dir()  # mode 0700, named after this process: the next start deletes it if we are killed
    path = os.path.join(d, "server-secrets.yaml")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(secrets) + "\n")
    return out + ["--config", path], d, None


def node_secrets_via_config(argv: list[str]) -> tuple[list[str], str | None, str | None]:
    """:func:`secrets_via_config` for a node started over ssh: the ``--config`` path is
    :data:`specdash.sglang.remote.CONFIG_WORD` (the node script writes the file there, mode 0600) and its
    contents are returned to go over the connection's standard input; ``(argv, contents or None, note)``."""
    import json

    from specdash.sglang.remote import CONFIG_WORD

    out, secrets = split_secrets(list(argv))
    if not secrets:
        return list(argv), None, None
    if _own_config(out):
        return list(argv), None, _OWN_CONFIG_NOTE
    return out + ["--config", CONFIG_WORD], json.dumps(secrets), None


@dataclass
class ServerLaunch:
    """One server launch into a run directory (see the module docstring).

    Build it with :meth:`prepare` (nothing started yet), then :meth:`start`,
    :meth:`wait_ready`, :meth:`record_server`, :meth:`stop`.

    Attributes:
        profile: the expanded profile.
        spec: argv / env / speculative resolution (``build_launch``) on the chosen port.
        rundir: where ``server.log``, ``server_process.json`` and ``manifest.json`` go.
        manifest: the manifest as last written.
        server: the :class:`~specdash.sglang.process.ServerProcess` once started.
        ready_s: process start → ``/health`` 200, seconds, once ready.
    """

    profile: Profile
    spec: LaunchSpec
    rundir: RunDirLike
    manifest: dict = field(default_factory=dict)
    server: ServerProcess | None = None
    ready_s: float | None = None
    #: the SGLang release the command was built for (``prepare``'s ``sglang_version``)
    version: str | None = None

    @classmethod
    def prepare(
        cls,
        profile: Profile,
        rundir: RunDirLike,
        *,
        sglang_version: str | None = None,
        suite: Suite | None = None,
        preflight: DoctorReport | None = None,
        extra_manifest: dict | None = None,
    ) -> ServerLaunch:
        """Expand ``profile``, pick its port (a free one for port 0), build argv / env for
        ``sglang_version`` and write the manifest.  Starts nothing.

        Raises:
            ProfileError: the profile cannot be expanded or turned into a command line, or it
                spans several nodes that specdash does not start itself (``node_launcher`` other than
                ``"ssh"``: :func:`specdash.profile.nodes.launch_refusal` says what to do instead).
        """
        from specdash.profile import ProfileError, build_launch
        from specdash.profile.nodes import launch_refusal, launches_nodes
        from specdash.sglang.process import free_port

        if profile.multi_node and not launches_nodes(profile):
            raise ProfileError(launch_refusal(profile))
        if profile.multi_node:
            from specdash.sglang.launchers import node_launcher

            check = node_launcher(profile.server.node_launcher).problem
            problem = check([n.host for n in profile.nodes]) if check is not None else None
            if problem:
                raise ProfileError(f"profile {profile.name!r}: {problem}")
        prof = profile.expanded()
        port = prof.server.port or free_port()
        spec = build_launch(prof, version=sglang_version, port=port)
        if prof.multi_node:  # node 0's command; its API answers on node 0's host (as node_url writes it)
            h = prof.nodes[0].host
            spec = replace(spec, host=h if h.startswith("[") or ":" not in h else f"[{h}]")
        manifest = build_manifest(prof, url=spec.base_url, launch=spec, suite=suite, preflight=preflight,
                                  sglang_version=sglang_version, extra=extra_manifest)
        rundir.write_manifest(manifest)
        return cls(prof, spec, rundir, manifest, version=sglang_version)

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the server."""
        return self.spec.base_url

    @property
    def api_key(self) -> str | None:
        """The server's ``--api-key`` (None: none)."""
        return self.spec.api_key

    def start(self) -> ServerProcess:
        """Start the server in its own process group, its log (secrets as ``***``) going to
        ``rundir/server.log``; returns the :class:`ServerProcess`.

        Raises:
            RuntimeError: already started.  OSError: the command cannot be executed.
        """
        from specdash.sglang.process import ServerProcess

        if self.server is not None:
            raise RuntimeError("ServerLaunch already started")
        from specdash.sglang.secrets import secret_values

        if self.profile.multi_node:
            server = self._node_group()
        else:
            argv, self._secret_dir, self.secret_note = secrets_via_config(self.spec.argv)
            self.secrets_in_config = self._secret_dir is not None
            server = ServerProcess(argv, env=self.spec.env, log_path=self.rundir.server_log_path,
                                   run_dir=self.rundir.path, url=self.spec.base_url, name=self.profile.name,
                                   secrets=secret_values(self.spec.argv))
        try:
            server.start()
        except BaseException:
            self._drop_secrets()
            raise
        self.server = server
        return server

    def _node_group(self):
        """Every node of a profile whose ``node_launcher`` starts them (``ssh``, ``slurm``:
        :data:`specdash.sglang.launchers.NODE_LAUNCHERS`) as one :class:`~specdash.sglang.remote.NodeGroup`:
        node R's exact command (``profile show``'s, on the launch's port) run by the launcher's client — ``ssh``
        on its host, ``srun`` as a job step on that Slurm node; node 0's log is ``server.log``, node R's
        ``node-R.log``; the environment and the API key (as a ``--config`` file's contents) go over each
        client's standard input.
        """
        from specdash.profile import build_launch, safe_name
        from specdash.sglang.launchers import node_job_name, node_launcher
        from specdash.sglang.remote import NodeGroup, SSHNodeProcess, env_block, node_script
        from specdash.sglang.secrets import secret_values

        launcher = node_launcher(self.profile.server.node_launcher)
        options = getattr(self.profile.server, launcher.options_field) if launcher.options_field else []
        nodes = []
        for node in self.profile.nodes:
            rank = node.node_rank
            spec = build_launch(self.profile, version=self.version, port=self.spec.port, node_rank=rank)
            argv, config_text, note = node_secrets_via_config(spec.argv)
            self.secret_note = self.secret_note or note
            self.secrets_in_config = self.secrets_in_config or config_text is not None
            script = node_script(argv, workdir=node.workdir, with_config=config_text is not None,
                                 new_session=launcher.new_session)
            log_path = self.rundir.server_log_path if rank == 0 else Path(self.rundir.path) / f"node-{rank}.log"
            client = launcher.client(node.host, script, options, node_job_name(safe_name(self.profile.name), rank))
            nodes.append(SSHNodeProcess(
                client,
                env={}, stdin_data=env_block(spec.env, config_text), log_path=log_path,
                run_dir=self.rundir.path if rank == 0 else None, url=self.spec.base_url if rank == 0 else None,
                name=f"{self.profile.name} node {rank}", secrets=secret_values(spec.argv)))
        return NodeGroup(nodes)

    _secret_dir: str | None = field(default=None, repr=False)
    #: why an API key stayed in argv (a ``--config`` of the profile's own), else None
    secret_note: str | None = None
    #: the API key went to SGLang in a ``--config`` file (or, over ssh, its contents on stdin), not argv
    secrets_in_config: bool = False

    def _drop_secrets(self) -> None:
        """Delete the private ``--config`` file that carried the API key (the server has read it)."""
        import shutil

        if self._secret_dir:
            shutil.rmtree(self._secret_dir, ignore_errors=True)
            self._secret_dir = None

    async def wait_ready(self, client: SGLangClient, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Poll ``/health`` through ``client`` until 200; returns (and keeps in
        :attr:`ready_s`) the seconds from process start to ready.

        Raises:
            ServerStartError: the server exited first, or ``timeout_s`` passed (it keeps
                running: call :meth:`stop`).  RuntimeError: not started.
        """
        if self.server is None:
            raise RuntimeError("ServerLaunch not started")
        try:
            self.ready_s = await self.server.wait_ready(client, timeout_s)
        finally:  # read at start-up (ServerArgs parsing): not needed once it answers, or once it failed
            self._drop_secrets()
        return self.ready_s

    def record_server(self, info: dict) -> dict:
        """Add :func:`server_fields` of ``info`` (``/server_info``) to the manifest and write
        it; returns the manifest."""
        self.update_manifest(server_fields(info, self.ready_s))
        return self.manifest

    def update_manifest(self, fields: dict[str, Any]) -> None:
        """Merge ``fields`` into the manifest and write it again (atomically)."""
        self.manifest.update(fields)
        self.rundir.write_manifest(self.manifest)

    def stop(self) -> int | None:
        """Stop the whole server tree (SIGTERM, then SIGKILL); idempotent.  Returns the exit
        code (None when never started)."""
        self._drop_secrets()
        return self.server.stop() if self.server is not None else None

    async def astop(self) -> int | None:
        """:meth:`stop` in a worker thread, for the event loop."""
        import asyncio

        return await asyncio.to_thread(self.stop)

