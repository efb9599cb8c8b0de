"""One profile's measured run: preflight → launch (or attach) → warm up → suite → verify → stop.

The same code path serves the built-in simulator and a real SGLang server (the profile's
``launcher`` only changes the argv), the headless ``--bench`` mode, A/B runs, ``tune`` and
the TUI's load driver.  Preflight, start, manifest and stop are :mod:`specdash.launch`'s
(the dashboard's launches take the same path).  Results are written to a
:class:`~specdash.bench.rundir.RunDir` as they arrive; the RUN dict returned is the
``summary.json`` entry.

Run-scoped truth: acceptance and throughput come from this run's requests (``meta_info``)
and from ``/metrics`` counter deltas taken after warm-up and after the last request —
never from lifetime averages such as ``avg_spec_accept_length``.  Under
``--speculative-adaptive`` the per-tier figures come from the server log's window of the run
(the lines from the first request sent to the last response; :mod:`specdash.bench.adaptive`,
:mod:`specdash.collect.tiers`), and the pooled ``accept_rate`` is recomputed with the drafts the
tiers really proposed (SGLang's per-request figure divides by the launch draft tokens).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from specdash.bench.load import (
    request_extra,
    sampling_params,
    send_suite,
    send_suite_rate,
    work_items,
)
from specdash.bench.points import RATE_POINT_S
from specdash.bench.rundir import RunDir
from specdash.bench.summary import SummaryMixin
from specdash.bench.telemetry import TelemetryMixin
from specdash.bench.watchdog import ServerFault, Watchdog, resume_if_stopped
from specdash.collect.stream import RunStats
from specdash.launch import (
    READY_TIMEOUT_S,
    ServerLaunch,
    build_manifest,
    preflight,
    server_fields,
)
from specdash.profile import Profile, Suite
from specdash.results import LoadFields, RunSummary
from specdash.sglang.records import RequestRecord

WARMUP_MAX_TOKENS = 32
#: The most requests a ``request_rate`` sweep point without an in-flight cap warms up with at once.
RATE_WARMUP_WIDTH = 64


class RunFailed(Exception):
    """The run could not complete (an attached server does not answer, no request succeeded, the
    server exited or stalled mid-run — then ``summary.json`` holds the partial RUN)."""


@dataclass
class RunOptions:
    """Options of one run (CLI flags map 1:1).

    ``repeats``/``max_tokens``/``concurrency`` override the suite's when set;
    ``segment`` tags records of a resumed run; ``repeat_offset`` shifts repeat indices
    (A/B rounds); ``on_record`` is called with each finished record (live UIs);
    ``progress`` receives human progress lines; ``sweep``: the values of ``sweep_var`` to run one after
    the other in the same launch (one RUN per point in ``summary.json``, records tagged with their
    ``concurrency`` or ``request_rate``; :func:`run_sweep`), None for one run at ``concurrency``.
    """

    out_dir: Path = Path("runs")
    url: str | None = None
    api_key: str | None = None
    allow_unverified: bool = False
    force: bool = False
    resume: Path | None = None
    sglang_version: str | None = None
    repeats: int | None = None
    max_tokens: int | None = None
    concurrency: int | None = None
    repeat_offset: int = 0
    stamp: str | None = None
    on_record: Callable[[dict], None] | None = None
    progress: Callable[[str], None] | None = None
    preflight: bool = True
    extra_manifest: dict = field(default_factory=dict)
    sweep: tuple[int | float, ...] | None = None
    #: the swept axis: ``concurrency`` (closed loop) or ``request_rate`` (open loop, requests/s; then
    #: ``concurrency`` caps the requests in flight at every point, None = no cap)
    sweep_var: str = "concurrency"
    #: seconds of arrivals a ``request_rate`` sweep point sends at least
    rate_point_s: float = RATE_POINT_S
    #: seconds without a finished request or a streamed token (while requests are in flight)
    #: after which the server counts as stalled and the run ends partial
    stall_s: float = 60.0
    #: open loop (:func:`send_suite_rate`): requests/s (``inf`` = all at once), None = closed loop;
    #: ``concurrency`` then caps the requests in flight (None = no cap)
    request_rate: float | None = None
    burstiness: float = 1.0
    arrival_seed: int = 0
    #: ``--goodput`` SLOs in ms (``{"ttft_ms": 200, "tpot_ms": 30, "e2e_ms": 5000}``), None = none
    goodput: dict[str, float] | None = None
    #: ``--gpu-exporter``: other nodes' GPU exporters (:class:`~specdash.collect.exporter.ExporterTarget`),
    #: read once the server is ready into the manifest's ``gpu_exporters`` (with the profile's own
    #: ``[[gpu_exporters]]`` for the nodes not named here)
    gpu_exporters: tuple = ()
    #: structured progress for a bar (:class:`specdash.commands.bench.Progress`): called with
    #: ``{"event": "point", "profile", "side", "point" (1-based), "points", "label", "total"}`` when a measured
    #: pass starts and ``{"event": "request", "done", "total", "ok"}`` per finished request
    on_progress: Callable[[dict], None] | None = None
    #: which side of an A/B or a sweep this run is (``"A"``, ``"B"``, ``"baseline"`` …), for progress only
    side: str | None = None


class ProfileRun(TelemetryMixin, SummaryMixin):
    """Run ``profile`` over ``suite`` once (see module docstring); :meth:`run` returns the RUN dict.

    Raises (from :meth:`run`):
        PreflightBlocked: preflight errors without ``force``.
        RunFailed: an attached server does not answer, or no request succeeded.
        ServerStartError: a launched server exited or never became ready.
        ProfileError / CheckpointError: unusable profile.
    """

    def __init__(self, profile: Profile, suite: Suite, options: RunOptions) -> None:
        self.profile = profile.expanded()
        from specdash.profile.chat import apply_prompt_format

        #: the suite as sent: raw-text prompts rendered with the target's chat template where the suite's
        #: ``chat_template`` asks (:mod:`specdash.profile.chat`); ``prompt_format`` is the manifest's record
        self.suite, self.prompt_format = apply_prompt_format(self.profile, suite)
        self._point_value: int | float | None = None  # the sweep point being measured (gpu.jsonl lines carry it)
        self._suite_given = suite  # as written: an attached run renders it again once /server_info names the tokenizer
        self.opt = options
        self.launch: ServerLaunch | None = None
        self.rundir: RunDir | None = None
        self.stats = RunStats()
        self.preflight_report = None
        self._log_base = 0  # first server.log line of this launch (a resumed run appends to the file)
        self._log_start: int | None = None  # first line of the measured window
        #: The RUN of each point, in order (one without a sweep); :meth:`run` returns the last.
        self.runs: list[dict] = []
        #: The records of each point (concurrency → records), for paired comparisons.
        self.point_records: dict[int, list[dict]] = {}
        #: the fault watchdog of this run's loads (its ``fault``: why the run ended early)
        self.watchdog = Watchdog(stall_s=options.stall_s)
        #: the client of the run in progress (an attached server's health is probed through it)
        self.client = None
        #: why the server's ``/metrics`` could not be used (not Prometheus text), else None
        self.metrics_error: str | None = None
        #: ``/server_info`` fields dropped for their types (``checked_server_info``), else empty
        self.server_info_errors: list[str] = []

    @property
    def server(self):
        """The :class:`~specdash.sglang.process.ServerProcess` this run started (None when attached)."""
        return self.launch.server if self.launch is not None else None

    @property
    def fault(self) -> ServerFault | None:
        """Why the run ended early (the server exited, stalled or stopped answering mid-run), else None."""
        return self.watchdog.fault

    def _say(self, msg: str) -> None:
        if self.opt.progress:
            self.opt.progress(msg)

    # -- phases ---------------------------------------------------------------------------------
    def run_preflight(self):
        """Doctor findings for the profile; raises PreflightBlocked on errors unless forced."""
        self.preflight_report = preflight(self.profile, sglang_version=self.opt.sglang_version,
                                          force=self.opt.force)
        return self.preflight_report

    def _open_rundir(self) -> int:
        """Create (or reopen for --resume) the run directory; return the segment number."""
        if self.opt.resume:
            self.rundir = RunDir(Path(self.opt.resume))
            # the earlier records are folded into the statistics, not kept (streamed: O(1) memory
            # per record, :meth:`RunDir.load_stats`); this session's records are kept as they come
            self.stats, segment = self.rundir.load_stats()
            self.stats.keep_records = True
            if self.rundir.bad_lines:
                self._say(f"[{self.profile.name}] warning: {self.rundir.bad_lines} line(s) of requests.jsonl are not "
                          f"records specdash wrote ({self.rundir.bad_line_example}); they were skipped, and their "
                          "requests are sent again")
            return segment
        self.rundir = RunDir.create(self.opt.out_dir, self.profile.name, stamp=self.opt.stamp)
        return 0

    async def run(self) -> dict:
        """Execute the run; always stops a server it started (also on errors/cancellation)."""
        from specdash.profile.nodes import launch_refusal, launches_nodes

        if not self.opt.url and self.profile.multi_node and not launches_nodes(self.profile):  # before the run dir
            from specdash.profile import ProfileError

            raise ProfileError(launch_refusal(self.profile))
        if self.opt.preflight and not self.opt.url:
            self.run_preflight()
        if self.opt.url:
            await self._check_attach()
        segment = self._open_rundir()
        try:
            return await self._run(segment)
        finally:
            if self.launch is not None:
                resume_if_stopped(self.server)  # a SIGSTOPped server acts on SIGTERM only once continued
                self.launch.stop()
            self.rundir.close()

    async def _check_attach(self) -> None:
        """Fail before creating a run directory when the attached server does not answer."""
        import httpx

        from specdash.sglang.client import SGLangClient

        async with SGLangClient(self.opt.url, api_key=self.opt.api_key) as client:
            try:
                ok = await client.health(timeout=10.0)
            except httpx.HTTPError as exc:
                raise RunFailed(f"{self.opt.url}: {exc or type(exc).__name__}") from None
        if not ok:
            raise RunFailed(f"{self.opt.url}: no healthy SGLang server there (/health did not answer 200: "
                            "connection refused, still starting, or not SGLang)")

    def _start(self) -> tuple[str, str | None, dict]:
        """Launch (or, with ``url``, note the attached server); returns (url, api key, manifest)."""
        if self.opt.url is not None:
            manifest = build_manifest(self.profile, url=self.opt.url, suite=self.suite,
                                      sglang_version=self.opt.sglang_version, extra=self.opt.extra_manifest)
            self.rundir.write_manifest(manifest)
            return self.opt.url, self.opt.api_key, manifest
        from specdash.profile.nodes import command_warnings

        for w in command_warnings(self.profile):  # a profile is code (README "Profiles are code")
            self._say(f"[{self.profile.name}] warning: {w}")
        log = self.rundir.server_log_path
        self._log_base = _count_lines(log)
        self.launch = ServerLaunch.prepare(self.profile, self.rundir, sglang_version=self.opt.sglang_version,
                                           suite=self.suite, preflight=self.preflight_report,
                                           extra_manifest=self.opt.extra_manifest)
        self._say(f"[{self.profile.name}] launching: {self.launch.spec.shell_line()}")
        self.launch.start()
        if self.launch.secret_note:
            self._say(f"[{self.profile.name}] warning: {self.launch.secret_note}")
        elif self.launch.secrets_in_config:
            self._say(f"[{self.profile.name}] the API key reaches SGLang in a private --config file (0600, deleted "
                      "once the server is ready), not in argv: the line above shows it as ***")
        return self.launch.base_url, self.launch.api_key, self.launch.manifest

    def _format_for_server(self, info: dict | None) -> None:
        """An attached run whose profile names no local tokenizer (``--url`` alone, or a profile whose
        model is a hub id): the prompts are rendered again with the chat template of the tokenizer the
        server says it loaded (``/server_info`` ``tokenizer_path``, else ``model_path``) when that is a
        directory on this machine too; otherwise the record says what the server named."""
        from specdash.profile.chat import RAW, apply_prompt_format, tokenizer_dir

        if self.suite.suite.api == "chat" or tokenizer_dir(self.profile)[0] is not None:
            return
        named = next((info.get(k) for k in ("tokenizer_path", "model_path")
                      if isinstance(info, dict) and isinstance(info.get(k), str) and info.get(k)), None)
        if named is None:
            return
        path = Path(os.path.expanduser(named))
        if not (path.is_dir() or path.is_file()):
            if self.prompt_format.get("format") == RAW and self.suite.suite.chat_template != "none":
                self.prompt_format = {**self.prompt_format, "note": f"the server's tokenizer {named} (/server_info) "
                                      "is not a directory on this machine: its chat template is unknown"}
            return
        from specdash.profile.schema import parse_profile

        stand_in = parse_profile({"name": self.profile.name, "server": {"model_path": str(path)}},
                                 f"<{self.profile.name}: the server's tokenizer>")
        self.suite, self.prompt_format = apply_prompt_format(stand_in, self._suite_given)
        self.prompt_format["tokenizer_from"] = "server_info"

    def _check_context(self, info: dict, max_tokens: int, manifest: dict) -> None:
        """Refuse the run before its first request when a prompt cannot fit the server's context
        (exact token counts), warn when an estimate says so (:mod:`specdash.bench.context`: the context from
        ``/server_info`` ``context_length``, else the model's own config as SGLang derives it; the draft
        slots speculation reserves added).

        Raises:
            RunFailed: an exactly counted prompt + its max_tokens + draft slots reach the context length.
        """
        from specdash.bench.context import context_limit, context_problems, draft_reserve

        limit, source = context_limit(info, self.profile if self.launch is not None else None)
        chk = context_problems(self.suite, self.profile, limit, max_tokens, reserve=draft_reserve(info, self.profile),
                               source=source)
        if chk is None or not chk.too_long:
            return
        msg = chk.message(self.suite.name)
        manifest["context_check"] = {"context_length": chk.context_length, "source": chk.source,
                                     "reserved_draft_slots": chk.reserve, "exact": chk.exact,
                                     "too_long": [list(t) for t in chk.too_long]}
        self.rundir.write_manifest(manifest)
        if chk.exact:
            raise RunFailed(msg + "; no request was sent")
        self._say(f"[{self.profile.name}] warning: {msg}")

    async def _run(self, segment: int) -> dict:
        from specdash.sglang.client import SGLangClient

        url, api_key, manifest = self._start()
        from specdash.profile.chat import describe as describe_format

        async with SGLangClient(url, api_key=api_key) as client:
            self.client = client
            self.watchdog.server, self.watchdog.client = self.server, client
            if self.launch is not None:
                t_ready = await self.launch.wait_ready(client, READY_TIMEOUT_S)
                self._say(f"[{self.profile.name}] server ready in {t_ready:.1f} s")
            info = await client.server_info()
            self._refuse_foreign(info, url)
            self._warn_invalid_info(info)
            if self.opt.url is not None:
                self._format_for_server(info)
            manifest["prompt_format"] = self.prompt_format
            self._say(f"[{self.profile.name}] {describe_format(self.prompt_format)}")
            if self.prompt_format.get("warning"):
                self._say(f"[{self.profile.name}] warning: {self.prompt_format['warning']}")
            manifest.update(server_fields(info, self.launch.ready_s if self.launch is not None else None))
            max_tokens = self.opt.max_tokens or self.suite.suite.max_tokens
            self._check_context(info, max_tokens, manifest)
            concurrency = self.opt.concurrency or self.suite.suite.concurrency
            points = list(self.opt.sweep) if self.opt.sweep else [concurrency]
            base_opt = self.opt
            if self._rate_sweep:  # each point runs open loop at its own rate (self.opt per point)
                self.opt = replace(base_opt, request_rate=float(points[0]))
            manifest.update({"max_tokens": max_tokens,
                             "concurrency": self.opt.concurrency if self._rate_sweep else points[0],
                             "repeats": self.opt.repeats or self.suite.suite.repeats, **self._load_fields()})
            if self.opt.sweep:
                manifest["sweep"] = {self.opt.sweep_var: points}
            self.rundir.write_manifest(manifest)
            if len(points) > 1:  # what every point repeats, said once (each point then names only its load)
                var = self.opt.sweep_var
                self._say(f"[{self.profile.name}] {len(points)} points ({var} {', '.join(f'{x:g}' for x in points)}); "
                          f"each point: warm-up (max(suite warm-up, the point's batch) requests of ≤ "
                          f"{WARMUP_MAX_TOKENS} tokens), radix cache flushed, /metrics read before and after, then "
                          + ("≥ 2 × concurrency requests" if var == "concurrency" else
                             f"≥ {self.opt.rate_point_s:g} s of arrivals")
                          + f" of the suite's prompts at max_tokens {max_tokens} — one RUN per point")
            exporters = self._start_exporters(manifest)  # beside the load: never before the first request
            try:
                for i, x in enumerate(points):
                    self._point_no = (i + 1, len(points))
                    if i:
                        self.stats = RunStats()
                    if self._rate_sweep:
                        self.opt = replace(base_opt, request_rate=float(x))
                    try:
                        run = await self._point(client, info, segment, x, max_tokens,
                                                tag=self.opt.sweep is not None)
                    except (asyncio.CancelledError, KeyboardInterrupt):
                        if self.opt.sweep:  # the point cut short stays in summary.json, marked partial
                            self._interrupted_point(info, i, x, max_tokens)
                        raise
                    if self.opt.sweep:
                        run["sweep_point"] = i
                    self.runs.append(run)
                    self.rundir.write_summary(self.runs)  # results written as they come
                    if self.fault is not None:
                        break
            except BaseException:
                await self._join_exporters(exporters, cancel=True)
                raise
            finally:
                self.opt = base_opt
            await self._join_exporters(exporters, cancel=False)
        if self.fault is not None:
            raise RunFailed(self.fault.message(self))
        var = self.opt.sweep_var if self.opt.sweep else "concurrency"
        bad = [r[var] for r in self.runs if r["requests"] == 0]
        if bad:
            from specdash.bench.points import axis_name

            raise RunFailed(f"[{self.profile.name}] no request succeeded"
                            + (f" at {axis_name(var)} {', '.join(f'{b:g}' for b in bad)}" if self.opt.sweep else "")
                            + f"; see {self.rundir.path}/requests.jsonl")
        return self.runs[-1]

    def _interrupted_point(self, info: dict, i: int, x: int | float, max_tokens: int) -> None:
        """Ctrl-C / SIGTERM during sweep point ``i``: its RUN from the records it finished (no
        after-run ``/metrics``: server-side figures unknown), ``partial`` with the reason, appended to
        ``summary.json`` after the points that completed.  Best effort: the interruption goes on."""
        with contextlib.suppress(Exception):  # never mask the interruption itself
            run = self._summarize(info, None, None, None, self.opt.concurrency if self._rate_sweep else int(x),
                                  max_tokens)
            run.update(sweep_point=i, partial=True, partial_reason=(
                f"interrupted during this point, after {run.get('requests', 0)} answered requests; the sweep "
                "ended here (run it again: a sweep cannot be resumed)"))
            self.runs.append(run)
            self.rundir.write_summary(self.runs)

    @property
    def _rate_sweep(self) -> bool:
        """Whether this run is a ``request_rate`` sweep (each point open loop at its own rate)."""
        return bool(self.opt.sweep) and self.opt.sweep_var == "request_rate"

    async def _point(self, client, info: dict, segment: int, point: int | float, max_tokens: int, *,
                     tag: bool) -> dict:
        """One measured pass of the suite at ``point`` — a concurrency, or in a ``request_rate`` sweep
        the rate in requests/s that ``self.opt.request_rate`` already holds — (flushed cache,
        ``/metrics`` and log window around it); returns its RUN.  ``tag``: a sweep point (records carry
        ``concurrency`` or ``request_rate``, metrics files are named ``metrics-{before,after}-c<N>.txt``
        or ``-r<rate>.txt``).

        A rate point sends at least ``rate_point_s`` seconds of arrivals; its warm-up runs at the
        in-flight cap, or without one at ⌈rate⌉ requests at once (at most :data:`RATE_WARMUP_WIDTH`):
        about the batch one second of arrivals builds."""
        from specdash.sglang.client import SGLangError

        rate_pt = tag and self._rate_sweep
        if rate_pt:
            concurrency = self.opt.concurrency
            width = concurrency or max(1, min(RATE_WARMUP_WIDTH, math.ceil(float(point))))
            key, label = "request_rate", f"{point:g}/s"
        else:
            concurrency = width = int(point)
            key, label = "concurrency", f"c{point}"
        suffix = (f"-r{point:g}" if rate_pt else f"-c{point}") if tag else ""
        self._point_value = point if tag else None
        metrics_before = None
        await self._warmup(client, max_tokens, width)
        try:
            await client.flush_cache()
            metrics_before = await client.metrics_text()
        except SGLangError:
            if not await self._note_exit(after="the warm-up, flushing its cache and reading /metrics"):
                raise  # not the server dying under us: a real error
        self.rundir.write_text(f"metrics-before{suffix}.txt", metrics_before)
        metrics_before = self._usable_metrics(metrics_before)
        self._log_start = await self._settled_log_count()
        items = self._remaining_items()
        if tag:  # a sweep point keeps its batch full: at least 2 × concurrency requests (rate: seconds of arrivals)
            want = (max(2 * width, math.ceil(float(point) * self.opt.rate_point_s)) if rate_pt else 2 * concurrency)
            reps = max(self.opt.repeats or self.suite.suite.repeats, math.ceil(want / max(1, len(self.suite.prompts))))
            items = work_items(self.suite, reps, self.opt.repeat_offset)
        load = f"concurrency {concurrency}" if self.opt.request_rate is None else (
            f"request rate {self.opt.request_rate:g}/s, burstiness {self.opt.burstiness:g}, "
            f"max in flight {self.opt.concurrency or 'unlimited'}"
            + (f", arrivals over ~{len(items) / self.opt.request_rate:.0f} s"
               if math.isfinite(self.opt.request_rate) else ""))
        if not (tag and len(self.opt.sweep or ()) > 1):
            self._say(f"[{self.profile.name}] {len(items)} requests, {load}, "
                      f"max_tokens {max_tokens}, suite {self.suite.name}")
        else:
            self._say(f"[{self.profile.name}] point {self._point_no[0]} of {self._point_no[1]}: {len(items)} "
                      f"requests, {load}")
        if self.opt.on_progress:
            no, of = getattr(self, "_point_no", (1, 1))
            self.opt.on_progress({"event": "point", "profile": self.profile.name, "side": self.opt.side,
                                  "point": no, "points": of, "label": label if tag else load, "total": len(items)})
        done = [0]
        cpu0, wall0 = time.process_time(), time.monotonic()
        records = self.point_records.setdefault(point, [])

        def on_record(rec: dict) -> None:
            if tag:
                rec[key] = point
            self.rundir.append_request(rec)
            self.stats.add(rec)
            records.append(rec)
            done[0] += 1
            tok_s = rec["completion_tokens"] / rec["e2e_s"] if rec.get("e2e_s") else 0.0
            self._say(f"[{self.profile.name}] {done[0]}/{len(items)} prompt {rec['prompt_index']} "
                      f"repeat {rec['repeat']}{f' {label}' if tag else ''}: {rec['completion_tokens']} "
                      f"tokens, {tok_s:.1f} tok/s" + ("" if rec.get("ok") else f" FAILED: {rec.get('error')}"))
            if self.opt.on_record:
                self.opt.on_record(rec)
            if self.opt.on_progress:
                self.opt.on_progress({"event": "request", "done": done[0], "total": len(items),
                                      "ok": bool(rec.get("ok"))})

        if self.fault is None:
            await self._send_watched(client, items, concurrency=width, max_tokens=max_tokens,
                                     segment=segment, on_record=on_record)
        metrics_after = info_after = None
        if self.fault is None:
            try:  # a server that goes away after the last answer: its counters are lost, the records are not
                metrics_after = await client.metrics_text()
                self.rundir.write_text(f"metrics-after{suffix}.txt", metrics_after)
                metrics_after = self._usable_metrics(metrics_after)
                info_after = await client.server_info()
            except SGLangError:
                if not await self._note_exit(after="the last request, reading its /metrics and /server_info"):
                    raise
                metrics_after = info_after = None
        wall = time.monotonic() - wall0
        self._client_cpu = (time.process_time() - cpu0) / wall if wall > 0 else None
        await self._settled_log_count()
        run = self._summarize(info, info_after, metrics_before, metrics_after, concurrency, max_tokens)
        run["partial"] = self.fault is not None
        run["partial_reason"] = self.fault.reason if self.fault is not None else None
        return run

    def _refuse_foreign(self, info: dict, url: str) -> None:
        """Stop before the first request when ``/server_info`` answered a JSON object with none of the fields
        every SGLang release sends (``version``, ``model_path``: ``ServerArgs`` + ``sglang.version``), not even
        with a wrong type — another program on that port, whose every request would fail.

        Raises:
            RunFailed: the message names the URL, the keys it did send and the fix.
        """
        from specdash.sglang.client import INVALID_FIELDS_KEY

        dropped = {str(x).split(":", 1)[0].strip() for x in info.get(INVALID_FIELDS_KEY) or ()}
        present = (set(info) - {INVALID_FIELDS_KEY}) | dropped
        if present & {"version", "model_path"}:
            return
        keys = ", ".join(sorted(set(info) - {INVALID_FIELDS_KEY})[:8]) or "none"
        raise RunFailed(f"{url} is not an SGLang server: its /server_info answered JSON without SGLang's fields "
                        f"(version, model_path; it sent: {keys}); no request was sent. Check --url (SGLang's HTTP "
                        "port: --port of sglang.launch_server, 30000 by default; for a multi-node server node 0's)")

    def _warn_invalid_info(self, info: dict) -> None:
        """Say which ``/server_info`` fields had types SGLang never sends (they were dropped, see
        :func:`specdash.sglang.client.checked_server_info`): the run goes on with them unknown."""
        from specdash.sglang.client import INVALID_FIELDS_KEY

        bad = info.get(INVALID_FIELDS_KEY)
        if bad:
            self.server_info_errors = list(bad)
            self._say(f"[{self.profile.name}] warning: /server_info fields with types SGLang never sends were "
                      f"ignored ({'; '.join(bad)}): is this an SGLang server? Speculative settings and the release "
                      "read back from it are unknown for this run")

    def _usable_metrics(self, text: str | None) -> str | None:
        """``text`` when it parses as Prometheus exposition, else None — once per run, a warning that
        the server-side cross-checks (server τ, device timer, adaptive gauges) are skipped; the raw
        text stays in the run directory (``metrics-*.txt``) as evidence."""
        from specdash.sglang.metrics import MetricsFormatError, parse_metrics

        if not text:
            return text
        try:
            parse_metrics(text)
        except MetricsFormatError as exc:
            if self.metrics_error is None:
                self.metrics_error = str(exc)
                self._say(f"[{self.profile.name}] warning: {exc} — the server-side cross-checks (server accept "
                          "length, device timer) are skipped; the client's figures stand")
            return None
        return text

    # -- faults: the server exits or stalls mid-run ---------------------------------------------
    async def _send_watched(self, client, items, *, concurrency: int, max_tokens: int, segment: int,
                            on_record: Callable[[dict], None]) -> None:
        """:func:`send_suite` under the run's :class:`~specdash.bench.watchdog.Watchdog`: when the launched
        server exits, or no request finishes and no token streams for ``stall_s`` while requests are in
        flight, the load is cancelled (records already written stay) and :attr:`fault` says why.
        Requests that failed because the server died are not recorded (a resume re-sends them)."""
        async def load(watched, stop: asyncio.Event) -> None:
            await self._send_suite(watched, self.suite, items, concurrency=concurrency, max_tokens=max_tokens,
                                   segment=segment, on_record=on_record, stop=stop)

        sampler = asyncio.ensure_future(self._sample_gpus_while(client, segment))
        try:
            await self.watchdog.watch_load(load, client)
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler

    async def _note_exit(self, wait_s: float = 1.0, after: str = "a request broke off") -> bool:
        """:meth:`Watchdog.note_exit <specdash.bench.watchdog.Watchdog.note_exit>`: True (and :attr:`fault`
        set) when a failed call was the server going away."""
        return await self.watchdog.note_exit(wait_s, after)

    async def _warmup(self, client, max_tokens: int, width: int) -> None:
        """The suite's warm-up before a measured point (excluded from results): ``max(warmup,
        width)`` requests of at most :data:`WARMUP_MAX_TOKENS` tokens, ``width`` (the point's
        concurrency) in flight, so the server has run prefill, draft extend and decode at the batch
        size it is measured at.  A warm-up one request at a time leaves that to the first measured
        wave: on SGLang 0.5.14 (H200, 8B-shaped testbed, EAGLE3) the first 8 requests at
        concurrency 8 after two single warm-up requests waited 0.4–1.1 s for their first token,
        the next 8 0.06–0.11 s, which cost a 16-request point 14–31 % of its tok/s and reordered
        3 / 1 / 4 against 2 / 1 / 3.  ``warmup = 0`` in the suite turns it off."""
        n = self.suite.suite.warmup
        if n <= 0:
            return
        width = max(1, int(width or 1))
        total = max(n, width)
        self._say(f"[{self.profile.name}] warm-up: {total} request(s), {min(width, total)} at a time "
                  "(excluded from results)")
        params = sampling_params(self.suite, min(WARMUP_MAX_TOKENS, max_tokens))
        extra = request_extra(self.suite, "generate") or None
        sem = asyncio.Semaphore(width)

        limit = 2.0 * self.opt.stall_s  # a warm-up request is short: a server silent this long is stuck

        async def one(i: int) -> None:
            async with sem:
                prompt = self.suite.prompts[i % len(self.suite.prompts)]
                try:
                    res = await asyncio.wait_for(client.generate_stream(prompt.text, params, extra=extra), timeout=limit)
                except TimeoutError:
                    from specdash.sglang.secrets import redact_url

                    raise RunFailed(
                        f"[{self.profile.name}] warm-up: a {WARMUP_MAX_TOKENS}-token request got no complete answer "
                        f"in {limit:g} s from {redact_url(client.base_url)} — the server accepted it and then "
                        "stalled (hung scheduler, a proxy holding the stream, or not SGLang); nothing was "
                        "measured") from None
                if not res.ok:
                    self._say(f"[{self.profile.name}] warm-up request failed: {res.error}")

        await asyncio.gather(*(one(i) for i in range(total)))

    async def _settled_log_count(self, quiet_s: float = 0.05, max_s: float = 0.5) -> int | None:
        """Lines the server has logged so far, once its log reader has caught up (no new line for
        ``quiet_s``, at most ``max_s``); None for an attached server."""
        if self.server is None:
            return None
        ring = self.server.ring
        seq, t_end = ring.seq, time.monotonic() + max_s
        while time.monotonic() < t_end:
            await asyncio.sleep(quiet_s)
            if ring.seq == seq:
                break
            seq = ring.seq
        return len(self.server.log_lines())

    def _remaining_items(self) -> list[tuple[int, int]]:
        repeats = self.opt.repeats or self.suite.suite.repeats
        items = work_items(self.suite, repeats, self.opt.repeat_offset)
        done = self.stats.done_keys()
        return [it for it in items if it not in done]

    # -- load shape: closed loop (workers) or open loop (--request-rate) ------------------------
    def _send_suite(self, client, suite: Suite, items, *, concurrency: int, **kw):
        """The load of a point (a coroutine): :func:`send_suite` with ``concurrency`` workers or,
        with ``request_rate``, :func:`send_suite_rate` with ``--concurrency`` as the in-flight cap."""
        if self.opt.request_rate is None:
            return send_suite(client, suite, items, concurrency=concurrency, **kw)
        return send_suite_rate(client, suite, items, request_rate=self.opt.request_rate,
                               burstiness=self.opt.burstiness, max_concurrency=self.opt.concurrency,
                               seed=self.opt.arrival_seed, **kw)

    def _load_fields(self) -> LoadFields:
        """The RUN's and the manifest's load-shape keys: ``request_rate`` (asked; ``"inf"`` for all at
        once, as vLLM writes it; None in closed loop), ``burstiness``, ``arrival_seed`` and, in open
        loop, ``concurrency`` = the in-flight cap (None = uncapped)."""
        rate = self.opt.request_rate
        if rate is None:
            return {"request_rate": None, "burstiness": None}
        return {"request_rate": "inf" if math.isinf(rate) else rate, "burstiness": self.opt.burstiness,
                "arrival_seed": self.opt.arrival_seed, "concurrency": self.opt.concurrency}

def _count_lines(path: Path) -> int:
    """Lines in a log file (0 when absent), counted as :meth:`ServerProcess.log_lines` splits them."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return 0
    return data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)


async def run_one(profile: Profile, suite: Suite, opts: RunOptions) -> tuple[RunSummary, list[RequestRecord]]:
    """Run one profile (:class:`ProfileRun`); returns (the RUN dict, its request records — under
    ``resume`` only the ones this call sent: the earlier ones are folded into the RUN, not kept).

    Raises: as :class:`ProfileRun`.
    """
    pr = ProfileRun(profile, suite, opts)
    run = await pr.run()
    return run, pr.stats.records


async def run_sweep(profile: Profile, suite: Suite, opts: RunOptions, points: Sequence[int | float], *,
                    var: str = "concurrency") -> tuple[list[RunSummary], dict[int | float, list[RequestRecord]]]:
    """Run ``profile`` at each of ``points`` of the ``var`` axis (``concurrency``, or ``request_rate``
    in requests/s) in one launch (one run directory, one RUN per point, in order); returns (the RUNs,
    point → that point's records).

    Raises: as :class:`ProfileRun` (a point where no request succeeded raises after all points ran).
    """
    pts = tuple(float(x) for x in points) if var == "request_rate" else tuple(int(x) for x in points)
    pr = ProfileRun(profile, suite, replace(opts, sweep=pts, sweep_var=var))
    await pr.run()
    return pr.runs, pr.point_records
