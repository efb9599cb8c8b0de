"""GPU readings through NVML (nvidia-ml-py) — the only module that imports ``pynvml``.

Modelled on nvitop's ``api/libnvml.py``: NVML is initialised lazily once, every reading
degrades to "not available" instead of raising, and units are in the names
(``memory_used_mib``, ``utilization_pct``).  Without a driver, :func:`nvml_status`
explains why (the GPU panel prints it); in demo mode the simulator's ``/sim/gpus``
provides simulated devices in the same :class:`GpuSample` shape, labelled ``simulated``.

Memory figures are MiB (2²⁰ bytes), as ``nvidia-smi --query-gpu=memory.used`` prints them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

_LOCK = threading.Lock()
_STATE: dict = {"init": False, "error": None, "nvml": None}


@dataclass
class GpuProcess:
    """A process holding memory on a device: ``pid``, ``used_mib`` (None when NVML hides it),
    ``name``/``cmdline`` from psutil when readable."""

    pid: int
    used_mib: float | None
    name: str = ""
    cmdline: str = ""


@dataclass
class GpuSample:
    """One device at one moment.

    ``utilization_pct``: NVML's GPU utilisation over its last sample period (0–100);
    ``memory_*_mib``: device memory (None only when a remote exporter did not send it);
    ``processes``: compute processes on it; ``temperature_c``: °C; ``power_w``: W;
    ``node``: the host the device is on — ``""`` for the local host (NVML, the simulator), the
    exporter's host label or the configured node name for a remote one
    (:mod:`specdash.collect.exporter`).
    """

    index: int
    name: str
    memory_used_mib: float | None
    memory_total_mib: float | None
    utilization_pct: float | None
    uuid: str = ""
    temperature_c: float | None = None
    power_w: float | None = None
    processes: list[GpuProcess] = field(default_factory=list)
    simulated: bool = False
    timestamp: float = field(default_factory=time.time)
    node: str = ""

    @property
    def memory_pct(self) -> float:
        """Used ÷ total memory, percent (0 when either is unknown)."""
        if not self.memory_total_mib or self.memory_used_mib is None:
            return 0.0
        return 100.0 * self.memory_used_mib / self.memory_total_mib

    def to_json(self) -> dict:
        """A JSON-able dict (run manifests, ``--json`` outputs)."""
        d = asdict(self)
        d["memory_pct"] = round(self.memory_pct, 2)
        return d


def _init():
    """Initialise NVML once; returns the module or None (reason in ``_STATE['error']``)."""
    with _LOCK:
        if _STATE["init"]:
            return _STATE["nvml"]
        _STATE["init"] = True
        try:
            import pynvml
        except ImportError as exc:  # pragma: no cover - dependency is declared
            _STATE["error"] = f"nvidia-ml-py is not installed ({exc})"
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            _STATE["error"] = f"no NVIDIA driver ({exc})"
            return None
        except OSError as exc:  # libnvidia-ml.so missing on some builds
            _STATE["error"] = f"no NVIDIA driver (libnvidia-ml not loadable: {exc})"
            return None
        _STATE["nvml"] = pynvml
        return pynvml


def nvml_status() -> str:
    """``"ok"`` or the reason NVML is unavailable (e.g. ``"no NVIDIA driver (NVML Shared Library Not Found)"``)."""
    return "ok" if _init() is not None else str(_STATE["error"])


def _safe(fn, default=None):
    try:
        return fn()
    except Exception:
        return default


def _proc_info(pid: int) -> tuple[str, str]:
    try:
        import psutil

        p = psutil.Process(pid)
        return p.name(), " ".join(p.cmdline())[:200]
    except Exception:
        return "", ""


def _memory_info(nv, handle):
    """Device memory as ``nvidia-smi`` reports it.

    ``nvmlDeviceGetMemoryInfo`` (v1) counts driver-reserved memory as used; ``nvidia-smi``
    on current drivers reads the v2 structure, whose ``used`` excludes it.  On a real H200
    (driver 580, SGLang holding 72 GiB) v1 read 614.7 MiB more than nvidia-smi
    (benchmarks/results/h200-2026-11-29).  Use v2 where the driver has it, else v1.
    """
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is not None:
        mem = _safe(lambda: nv.nvmlDeviceGetMemoryInfo(handle, version=version))
        if mem is not None:
            return mem
    return _safe(lambda: nv.nvmlDeviceGetMemoryInfo(handle))


def read_gpus(*, processes: bool = True) -> list[GpuSample]:
    """Read every visible device (empty list without NVML; see :func:`nvml_status`)."""
    nv = _init()
    if nv is None:
        return []
    out: list[GpuSample] = []
    count = _safe(nv.nvmlDeviceGetCount, 0)
    for i in range(count):
        h = _safe(lambda i=i: nv.nvmlDeviceGetHandleByIndex(i))
        if h is None:
            continue
        mem = _memory_info(nv, h)
        util = _safe(lambda h=h: nv.nvmlDeviceGetUtilizationRates(h))
        name = _safe(lambda h=h: nv.nvmlDeviceGetName(h), "?")
        if isinstance(name, bytes):
            name = name.decode()
        procs: list[GpuProcess] = []
        if processes:
            for p in _safe(lambda h=h: nv.nvmlDeviceGetComputeRunningProcesses(h), []) or []:
                used = getattr(p, "usedGpuMemory", None)
                pname, cmd = _proc_info(p.pid)
                procs.append(GpuProcess(p.pid, used / 2**20 if isinstance(used, int) else None, pname, cmd))
        power = _safe(lambda h=h: nv.nvmlDeviceGetPowerUsage(h))
        out.append(
            GpuSample(
                index=i,
                name=str(name),
                memory_used_mib=mem.used / 2**20 if mem else 0.0,
                memory_total_mib=mem.total / 2**20 if mem else 0.0,
                utilization_pct=float(util.gpu) if util else None,
                uuid=str(_safe(lambda h=h: nv.nvmlDeviceGetUUID(h), "")),
                temperature_c=_safe(lambda h=h: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))),
                power_w=power / 1000.0 if isinstance(power, int) else None,
                processes=procs,
            )
        )
    return out


def gpu_snapshot() -> dict:
    """``{"status": ..., "devices": [GpuSample.to_json()]}`` for run manifests."""
    gpus = read_gpus(processes=False)
    return {"status": nvml_status(), "devices": [g.to_json() for g in gpus]}


def gpus_from_sim(payload: dict) -> list[GpuSample]:
    """:class:`GpuSample` list from the simulator's ``/sim/gpus`` JSON (labelled simulated)."""
    out = []
    for d in payload.get("devices", payload.get("gpus", [])):
        out.append(
            GpuSample(
                index=int(d.get("index", len(out))),
                name=str(d.get("name", "simulated GPU")),
                memory_used_mib=float(d.get("memory_used_mib", 0.0)),
                memory_total_mib=float(d.get("memory_total_mib", 0.0)),
                utilization_pct=d.get("utilization_pct"),
                processes=[GpuProcess(int(p.get("pid", 0)), p.get("used_mib"), p.get("name", ""))
                           for p in d.get("processes", [])],
                simulated=True,
            )
        )
    return out
