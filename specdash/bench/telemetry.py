"""One run's GPU telemetry: the configured GPU exporters read once beside the load, and a reading of every
local device each :data:`GPU_SAMPLE_S` into the run directory's ``gpu.jsonl`` while requests are in flight.
A mixin of :class:`specdash.bench.runner.ProfileRun` (it uses ``self.profile``, ``self.opt``, ``self.rundir``,
``self._say`` and the point being measured); a reading that fails is skipped, never a failed run."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

GPU_FILE = "gpu.jsonl"
"""Device readings taken while a run's requests are in flight (:meth:`TelemetryMixin._sample_gpus`)."""
GPU_SAMPLE_S = 1.0
"""Seconds between two readings."""


class TelemetryMixin:
    """GPU exporters and local GPU readings of :class:`~specdash.bench.runner.ProfileRun`."""

    profile: Any
    opt: Any
    rundir: Any
    _rate_sweep: bool
    _point_value: Any

    async def _read_gpu_exporters(self, manifest: dict) -> None:
        """The configured GPU exporters, read once, into ``manifest["gpu_exporters"]`` (nothing is
        added when none is configured; the manifest is written again with them); a node that cannot be
        read is named on the progress line.  Each exporter has a total deadline
        (:data:`specdash.collect.exporter.DEFAULT_TIMEOUT_S`) and a size cap, so this ends within seconds
        whatever the exporters do; it runs as a task beside the load (:meth:`_start_exporters`)."""
        from specdash.collect.exporter import merge_targets, profile_targets, read_exporters

        targets = merge_targets(self.opt.gpu_exporters, profile_targets(self.profile))
        if not targets:
            return
        readings = await read_exporters(targets)
        manifest["gpu_exporters"] = [r.to_json() for r in readings]
        self.rundir.write_manifest(manifest)
        for r in readings:
            self._say(f"[{self.profile.name}] GPU exporter {r.target.node}: "
                      + (f"{len(r.devices)} device(s)" if r.status == "ok" else r.status))

    def _start_exporters(self, manifest: dict) -> asyncio.Task:
        """:meth:`_read_gpu_exporters` as a task: the first request does not wait for a slow exporter."""
        return asyncio.create_task(self._read_gpu_exporters(manifest), name="specdash-gpu-exporters")

    @staticmethod
    async def _join_exporters(task: asyncio.Task | None, *, cancel: bool) -> None:
        """Wait for the exporters' task (bounded by their deadline), or cancel it (the run is being cut short)."""
        if task is None:
            return
        if cancel and not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # a reading is never worth a failed run
            await task

    async def _sample_gpus_while(self, client, segment: int) -> None:
        """One GPU reading every :data:`GPU_SAMPLE_S` into ``gpu.jsonl`` while the load runs, the first at once
        (cancelled with the load)."""
        while True:
            await self._sample_gpus(client, segment)
            await asyncio.sleep(GPU_SAMPLE_S)

    async def _sample_gpus(self, client, segment: int) -> None:
        """Append one reading of every device to the run directory's ``gpu.jsonl`` (:data:`GPU_FILE`):
        the simulator's ``/sim/gpus`` for a simulated server, else NVML (``read_gpus``; nothing without a
        driver).  A line is a :class:`~specdash.collect.gpu.GpuSample` (``to_json``, processes left out)
        with ``t`` (epoch s), ``segment`` and ``concurrency`` / ``request_rate`` of the point.  Never raises:
        a reading that fails is skipped."""
        from specdash.collect.gpu import gpus_from_sim, read_gpus

        if self.rundir is None:
            return
        try:
            if self.profile.server.launcher == "sim" and not self.opt.url:
                devices = gpus_from_sim(await client.get_json("/sim/gpus") or {})
            else:
                devices = await asyncio.to_thread(read_gpus, processes=False)
        except Exception:  # a reading is telemetry: never a reason to fail the run
            return
        if not devices:
            return
        import json

        t = time.time()
        point = {"request_rate" if self._rate_sweep else "concurrency": self._point_value} \
            if self._point_value is not None else {}
        lines = "".join(json.dumps({"t": t, "segment": segment, **point,
                                    **{k: v for k, v in d.to_json().items() if k not in ("processes", "timestamp")}})
                        + "\n" for d in devices)
        with contextlib.suppress(OSError), open(self.rundir.path / GPU_FILE, "a", encoding="utf-8") as fh:
            fh.write(lines)
