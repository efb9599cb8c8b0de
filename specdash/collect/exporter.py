"""GPU readings of other nodes from an existing Prometheus exporter — never a home-made agent.

Two exporters are read, both through ``prometheus_client.parser.text_string_to_metric_families``
(the exposition format has a parser; nothing here splits lines by hand), into the same
:class:`~specdash.collect.gpu.GpuSample` NVML gives for the local host, with ``node`` set:

**NVIDIA dcgm-exporter** (default ``http://HOST:9400/metrics``).  Metric names, types and units
are those of its ``etc/default-counters.csv`` (NVIDIA/dcgm-exporter):

=============================  =======  ======================================
``DCGM_FI_DEV_FB_USED``        gauge    framebuffer memory used, MiB
``DCGM_FI_DEV_FB_FREE``        gauge    framebuffer memory free, MiB
``DCGM_FI_DEV_FB_RESERVED``    gauge    framebuffer memory reserved, MiB (newer default counters)
``DCGM_FI_DEV_GPU_UTIL``       gauge    GPU utilisation, % (0–100)
``DCGM_FI_DEV_GPU_TEMP``       gauge    GPU temperature, °C
``DCGM_FI_DEV_POWER_USAGE``    gauge    power draw, W
=============================  =======  ======================================

Labels, as ``internal/pkg/rendermetrics/render_metrics.go`` renders them: ``gpu`` (index),
``UUID``, ``pci_bus_id``, ``device`` (``nvidia0``), ``modelName``, ``GPU_I_PROFILE`` /
``GPU_I_ID`` for a MIG instance, and the host as ``Hostname`` — renamed ``hostname`` by
dcgm-exporter commit d5e5f51 ("Rename Hostname label to hostname (#655)", May 2026), so both
spellings are read.  The memory total is **FB_USED + FB_FREE (+ FB_RESERVED when the exporter
sends it)**: dcgm-exporter has no total in its default counters, and on drivers that report
reserved memory apart, used + free alone falls short of ``nvidia-smi``'s total by the reserve.
DCGM writes "blank" sentinels for a value it cannot read (``DCGM_INT64_BLANK`` =
0x7ffffffffffffff0 and the NOT_FOUND / NOT_SUPPORTED / NOT_PERMISSIONED values just above it;
``DCGM_FP64_BLANK`` = 2⁴⁷ and above, ``dcgm_structs.h``; the dcgm-exporter README's own sample
shows ``DCGM_FI_DEV_MEMORY_TEMP … 9223372036854775794``): these, NaN and ±Inf read as not available.

**nvitop-exporter** (XuehaiPan/nvitop, ``nvitop-exporter/nvitop_exporter/exporter.py``; its
``--port`` defaults to 8000, its README serves on 5050).  Its gauges are declared with a
``unit`` and ``prometheus_client`` appends the unit to the name, so the exposed names (as its
``grafana/dashboard.json`` queries them) are ``gpu_memory_used_MiB``, ``gpu_memory_free_MiB``,
``gpu_memory_total_MiB`` (MiB), ``gpu_utilization_Percentage`` (%), ``gpu_power_usage_W`` (W),
``gpu_temperature_C`` (°C), labelled ``hostname``, ``index`` (``"0"``, ``"0:1"`` for a MIG
device), ``devicename``, ``uuid``.  Its total is its own ``gpu_memory_total_MiB``.

The node of a device is the exporter's host label when it has one, else the node name it was
configured with (``--gpu-exporter NODE=URL``, ``[[gpu_exporters]]``).  Bad or partial text never
raises out of :func:`read_exporter`: garbage is an :class:`ExporterFormatError` turned into a
status string (like :func:`~specdash.collect.gpu.nvml_status`); a missing metric leaves that
reading None ("not available").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from specdash.collect.gpu import GpuSample

#: dcgm-exporter's default listen address is ``:9400`` and its path ``/metrics``.
DCGM_DEFAULT_PORT = 9400
#: Seconds one exporter fetch may take in all (connect + headers + body) before it counts as timed out.
DEFAULT_TIMEOUT_S = 3.0

# DCGM blank sentinels (dcgm_structs.h): DCGM_INT64_BLANK = 0x7ffffffffffffff0 (NOT_FOUND,
# NOT_SUPPORTED, NOT_PERMISSIONED follow it); DCGM_FP64_BLANK = 140737488355328.0 (2**47).
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0

_DCGM = {
    "DCGM_FI_DEV_FB_USED": "used",
    "DCGM_FI_DEV_FB_FREE": "free",
    "DCGM_FI_DEV_FB_RESERVED": "reserved",
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_DEV_GPU_TEMP": "temp",
    "DCGM_FI_DEV_POWER_USAGE": "power",
}
_NVITOP = {
    "gpu_memory_used_MiB": "used",
    "gpu_memory_free_MiB": "free",
    "gpu_memory_total_MiB": "total",
    "gpu_utilization_Percentage": "util",
    "gpu_temperature_C": "temp",
    "gpu_power_usage_W": "power",
}


class ExporterFormatError(ValueError):
    """The text is not Prometheus exposition text, or holds no GPU metric of either exporter."""


@dataclass(frozen=True)
class ExporterTarget:
    """One exporter to read: ``node`` (the name shown when the exporter gives no host label)
    and ``url`` (the full ``…/metrics`` URL)."""

    node: str
    url: str


@dataclass(frozen=True)
class ExporterReading:
    """One fetch of one exporter: ``status`` is ``"ok"`` or why there are no devices
    (``"exporter down: ConnectError: …"``, ``"not exporter text: …"``); ``kind`` is
    ``"dcgm"``, ``"nvitop"`` or ``""``; ``devices`` as :class:`GpuSample` with ``node`` set."""

    target: ExporterTarget
    status: str
    kind: str = ""
    devices: tuple[GpuSample, ...] = ()
    t: float = field(default_factory=time.time)

    def to_json(self) -> dict:
        """A JSON-able dict (run manifests): the URL without its userinfo (``//user:password@`` → ``//***@``)."""
        from specdash.sglang.secrets import redact_url

        return {"node": self.target.node, "url": redact_url(self.target.url), "status": self.status, "kind": self.kind,
                "devices": [d.to_json() for d in self.devices]}


def normalise_url(url: str) -> str:
    """``host``, ``host:port`` or a URL → a full URL: ``http://`` when no scheme is given, port
    :data:`DCGM_DEFAULT_PORT` when neither a scheme nor a port is, ``/metrics`` when no path is.

    Raises:
        ValueError: a scheme other than http / https, no host, or a port that is not 1–65535 (the
            message says which, e.g. for ``node1:99999``).
    """
    u = url.strip()
    if "://" not in u:
        hostport = u.split("/", 1)[0]
        if ":" not in hostport.rsplit("]", 1)[-1]:
            u = u.replace(hostport, f"{hostport}:{DCGM_DEFAULT_PORT}", 1)
        u = "http://" + u
    scheme, rest = u.split("://", 1)
    if "/" not in rest:
        rest += "/metrics"
    out = f"{scheme}://{rest}"
    check_url(out)
    return out


def check_url(url: str) -> None:
    """Raise ValueError unless ``url`` is an http(s) URL with a host and a port in 1–65535 (what
    httpx would otherwise refuse with ``InvalidURL`` at the first fetch)."""
    from urllib.parse import urlsplit

    from specdash.sglang.secrets import redact_url

    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError: "Port out of range 0-65535" / not a number
    except ValueError as exc:
        raise ValueError(f"GPU exporter URL {shown}: {exc}; give http://HOST:PORT/metrics with a port of "
                         "1–65535 (dcgm-exporter listens on 9400)") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"GPU exporter URL {shown}: an exporter is read over http or https, not "
                         f"{parts.scheme or 'no scheme'}")
    if not parts.hostname:
        raise ValueError(f"GPU exporter URL {shown}: no host; give http://HOST:PORT/metrics")
    if port is not None and port < 1:
        raise ValueError(f"GPU exporter URL {shown}: port {port} is not 1–65535 (dcgm-exporter listens on 9400)")


def parse_target(spec: str) -> ExporterTarget:
    """``NODE=URL`` (the ``--gpu-exporter`` form) → :class:`ExporterTarget` (URL normalised by
    :func:`normalise_url`).

    Raises:
        ValueError: no ``=``, an empty node name or an empty URL, or a URL :func:`check_url` refuses.
    """
    node, sep, url = spec.partition("=")
    if not sep or not node.strip() or not url.strip():
        from specdash.sglang.secrets import redact_url

        raise ValueError(f"--gpu-exporter wants NODE=URL (e.g. node1=http://node1:9400/metrics), got "
                         f"{redact_url(spec)!r}")
    try:
        return ExporterTarget(node.strip(), normalise_url(url))
    except ValueError as exc:
        raise ValueError(f"--gpu-exporter {node.strip()}=…: {exc}") from None


def merge_targets(*groups) -> tuple[ExporterTarget, ...]:
    """Targets of several sources, the first occurrence of a node name winning (the command
    line's before a profile's)."""
    out: dict[str, ExporterTarget] = {}
    for group in groups:
        for t in group or ():
            out.setdefault(t.node, t)
    return tuple(out.values())


def profile_targets(profile) -> tuple[ExporterTarget, ...]:
    """A profile's ``[[gpu_exporters]]`` as targets (none for None or a profile without any)."""
    return tuple(ExporterTarget(e.node, normalise_url(e.url)) for e in (getattr(profile, "gpu_exporters", None) or ()))


def cli_targets(specs) -> tuple[ExporterTarget, ...]:
    """``--gpu-exporter NODE=URL`` values as targets (see :func:`parse_target`; raises ValueError)."""
    return tuple(parse_target(s) for s in specs or ())


def _value(v) -> float | None:
    """A reading, or None for NaN, ±Inf and DCGM's blank sentinels."""
    if v is None:
        return None
    if isinstance(v, int) and v >= _INT64_BLANK:
        return None
    f = float(v)
    if math.isnan(f) or math.isinf(f) or f >= _FP64_BLANK:
        return None
    return f


def _families(text: str) -> list:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        return list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises ValueError (and, on odd input, others)
        raise ExporterFormatError(f"not Prometheus exposition text ({type(exc).__name__}: {exc})") from None


def detect_kind(families) -> str:
    """``"dcgm"``, ``"nvitop"`` or ``""`` from the metric names present."""
    names = {s.name for f in families for s in f.samples}
    if names & set(_DCGM):
        return "dcgm"
    if names & set(_NVITOP):
        return "nvitop"
    return ""


def _index(s: str) -> int:
    try:
        return int(s.split(":", 1)[0])
    except ValueError:
        return 0


def parse_exporter_text(text: str, *, node: str = "") -> tuple[str, list[GpuSample]]:
    """Exporter text → ``(kind, devices)``, devices in index order.

    ``node``: the node name for devices whose labels carry no host.  A metric missing for a
    device leaves its reading None (memory: ``memory_used_mib`` / ``memory_total_mib`` None when
    used, or the parts of the total, are missing).

    Raises:
        ExporterFormatError: not exposition text, or no metric of dcgm-exporter or nvitop-exporter.
    """
    families = _families(text)
    kind = detect_kind(families)
    if not kind:
        raise ExporterFormatError("no GPU metric of dcgm-exporter (DCGM_FI_DEV_FB_USED, …) or nvitop-exporter "
                                  "(gpu_memory_used_MiB, …) in the text")
    table = _DCGM if kind == "dcgm" else _NVITOP
    devs: dict[tuple, dict] = {}
    for fam in families:
        for s in fam.samples:
            field_name = table.get(s.name)
            if field_name is None:
                continue
            lb = s.labels
            if kind == "dcgm":
                key = (lb.get("gpu", ""), lb.get("GPU_I_ID", ""))
                name = lb.get("modelName", "")
                if lb.get("GPU_I_PROFILE"):
                    name = f"{name} MIG {lb['GPU_I_PROFILE']}".strip()
                meta = {"index": lb.get("gpu", ""), "uuid": lb.get("UUID", lb.get("uuid", "")), "name": name,
                        "host": lb.get("Hostname") or lb.get("hostname") or ""}
            else:
                key = (lb.get("index", ""),)
                meta = {"index": lb.get("index", ""), "uuid": lb.get("uuid", ""), "name": lb.get("devicename", ""),
                        "host": lb.get("hostname", "")}
            d = devs.setdefault(key, {"meta": meta})
            d.setdefault(field_name, _value(s.value))  # the first sample of a device wins
    out: list[GpuSample] = []
    for key in sorted(devs, key=lambda k: (_index(k[0]), k)):
        d = devs[key]
        meta = d["meta"]
        used = d.get("used")
        if kind == "dcgm":
            parts = [d.get("used"), d.get("free")]
            total = sum(parts) + (d.get("reserved") or 0.0) if None not in parts else None
        else:
            total = d.get("total")
            if total is None and used is not None and d.get("free") is not None:
                total = used + d["free"]
        out.append(GpuSample(
            index=_index(meta["index"]), name=meta["name"] or "?", memory_used_mib=used, memory_total_mib=total,
            utilization_pct=d.get("util"), uuid=meta["uuid"], temperature_c=d.get("temp"), power_w=d.get("power"),
            node=meta["host"] or node))
    return kind, out


async def read_exporter(target: ExporterTarget, *, client=None, timeout_s: float = DEFAULT_TIMEOUT_S
                        ) -> ExporterReading:
    """Fetch and parse one exporter; never raises (the status string says what went wrong).

    ``timeout_s`` is a *total* deadline for the whole answer (connect, headers and body), and the
    body is read up to :data:`specdash.bounded.EXPORTER_BYTES` only (:func:`specdash.bounded.fetch`): an
    exporter that sends a byte a second, or gigabytes, costs ``timeout_s`` seconds and a bounded
    amount of memory at most.  The text is parsed in a worker thread, off the event loop that drives
    the load and the other exporters.  ``client``: an ``httpx.AsyncClient`` to reuse (one is made for
    the call otherwise)."""
    import asyncio

    import httpx

    from specdash.bounded import EXPORTER_BYTES, InputError, TooLarge, TooSlow, fetch
    from specdash.sglang.secrets import redact_url

    what = f"GPU exporter {target.node} ({redact_url(target.url)})"

    async def get(c: httpx.AsyncClient) -> httpx.Response:
        return await fetch(c, "GET", target.url, limit=EXPORTER_BYTES, deadline_s=timeout_s, what=what)

    try:
        check_url(target.url)
        if client is not None:
            r = await get(client)
        else:
            async with httpx.AsyncClient(trust_env=False) as c:
                r = await get(c)
    except TooSlow:
        return ExporterReading(target, f"exporter timed out: no complete answer within {timeout_s:g} s")
    except TooLarge as exc:
        return ExporterReading(target, f"exporter answer too large: {str(exc).removeprefix(what + ': ')}")
    except (httpx.HTTPError, httpx.InvalidURL, InputError, ValueError) as exc:
        text = redact_url(f"{type(exc).__name__}: {exc}".rstrip(": "))
        return ExporterReading(target, f"exporter down: {text}")
    if r.status_code != 200:
        return ExporterReading(target, f"exporter answered HTTP {r.status_code}")
    try:
        kind, devices = await asyncio.to_thread(parse_exporter_text, r.text, node=target.node)
    except ExporterFormatError as exc:
        return ExporterReading(target, f"not exporter text: {exc}")
    if not devices:
        return ExporterReading(target, "the exporter lists no devices", kind)
    return ExporterReading(target, "ok", kind, tuple(devices))


async def read_exporters(targets, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[ExporterReading]:
    """All ``targets`` at once (one shared client), in the order given; returns within about
    ``timeout_s`` seconds whatever the exporters do (each has that total deadline)."""
    import asyncio

    import httpx

    targets = list(targets)
    if not targets:
        return []
    async with httpx.AsyncClient(trust_env=False) as c:
        return list(await asyncio.gather(*(read_exporter(t, client=c, timeout_s=timeout_s) for t in targets)))


__all__ = [
    "DCGM_DEFAULT_PORT", "DEFAULT_TIMEOUT_S", "ExporterFormatError", "ExporterReading", "ExporterTarget",
    "check_url", "cli_targets", "detect_kind", "merge_targets", "normalise_url", "parse_exporter_text", "parse_target",
    "profile_targets", "read_exporter", "read_exporters",
]
