"""The GPU panel: per device name, memory used / total (MiB and %), utilisation and the
server's processes on it (NVML + psutil); the reason when NVML is unavailable; 'simulated'
for the simulator's devices.  With GPU exporters of other nodes configured (``--gpu-exporter``,
``[[gpu_exporters]]``), a header line per node (its name, the exporter and its URL, the device
count or why it could not be read) and its devices follow the local table, power (W) and
temperature (°C) in the last column; without any, the panel is exactly the local one.  Below the table,
the last two minutes of memory and utilisation (%) and of power (W) and temperature (°C) as charts, one
line per device.  On a narrow terminal (``compact``) each device takes two short lines instead of a
table row, as nvitop's compact mode does."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from specdash.tui.format import DASH, PlainTable, num
from specdash.tui.state import ViewState
from specdash.tui.widgets.charts import Series, TimeChart

COLORS = ("green", "cyan", "magenta", "yellow", "blue", "red", "white", "orange")


def bar(frac: float, width: int = 20) -> Text:
    """A horizontal bar for a 0–1 fraction (green < 70 %, yellow < 90 %, red above)."""
    frac = max(0.0, min(1.0, frac))
    full = round(frac * width)
    style = "green" if frac < 0.7 else ("yellow" if frac < 0.9 else "red")
    t = Text("█" * full, style=style)
    t.append("░" * (width - full), style="dim")
    return t


def _device_table(last: str = "server processes on it") -> PlainTable:
    tab = PlainTable(expand=True, box=None, padding=(0, 1), show_edge=False)
    for col, kw in (("GPU", {"width": 4}), ("name", {"ratio": 2}), ("memory used / total", {"ratio": 2}),
                    ("", {"width": 22}), ("mem %", {"width": 7}), ("util", {"width": 6}),
                    ("", {"width": 12}), (last, {"ratio": 3})):
        tab.add_column(col, **kw)
    return tab


def _add_device_row(tab: PlainTable, d, procs: Text) -> None:
    """One device's row; a reading an exporter did not send shows as a dash."""
    util = d.utilization_pct
    known = d.memory_used_mib is not None and d.memory_total_mib is not None
    mem = f"{d.memory_used_mib:,.0f} / {d.memory_total_mib:,.0f} MiB" if known else \
        f"{num(d.memory_used_mib, 0)} / {num(d.memory_total_mib, 0)} MiB"
    tab.add_row(
        str(d.index), d.name + (" (sim)" if d.simulated else ""),
        mem, bar(d.memory_pct / 100.0),
        f"{d.memory_pct:.1f} %" if known else DASH, DASH if util is None else f"{util:.0f} %",
        bar((util or 0) / 100.0, 10), procs,
    )


def _compact_device(d, procs: str = "") -> Text:
    """One device in two short lines: index, name and memory; then bars for memory and utilisation, power
    and temperature (nvitop's compact layout: every figure legible at 80 columns)."""
    t = Text()
    t.append(f"GPU {d.index}", style="bold")
    t.append(f" {d.name}{' (sim)' if d.simulated else ''}", style="dim")
    known = d.memory_used_mib is not None and d.memory_total_mib is not None
    t.append("  MEM ", style="dim")
    t.append(f"{d.memory_used_mib:,.0f} / {d.memory_total_mib:,.0f} MiB" if known else DASH, style="bold")
    t.append("\n  mem ")
    t.append_text(bar(d.memory_pct / 100.0, 12))
    t.append(f" {d.memory_pct:4.1f} %" if known else f" {DASH}")
    t.append("  util ")
    t.append_text(bar((d.utilization_pct or 0) / 100.0, 12))
    t.append(f" {DASH if d.utilization_pct is None else f'{d.utilization_pct:3.0f} %'}")
    extra = [num(d.power_w, 0, " W") if d.power_w is not None else "",
             f"{d.temperature_c:.0f} °C" if d.temperature_c is not None else "", procs]
    extra = [e for e in extra if e]
    if extra:
        t.append("  " + " · ".join(extra), style="dim")
    return t


def _exporter_section(reading, compact: bool = False) -> list:
    """A header line for one exporter's node (name, exporter kind, URL, status) and its devices."""
    kind = {"dcgm": "dcgm-exporter", "nvitop": "nvitop-exporter"}.get(reading.kind, "exporter")
    nodes = sorted({d.node for d in reading.devices if d.node}) or [reading.target.node]
    head = Text()
    head.append("node ", style="dim")
    head.append(", ".join(nodes), style="bold cyan")
    if nodes != [reading.target.node]:
        head.append(f" ({reading.target.node})", style="dim")
    head.append(f" · {kind} {reading.target.url}", style="dim")
    if reading.status == "ok":
        head.append(f" · {len(reading.devices)} device(s)")
    else:
        head.append(" · ")
        head.append(reading.status, style="bold yellow")
    if not reading.devices:
        return [head]
    if compact:
        return [head, *(_compact_device(d) for d in reading.devices)]
    tab = _device_table("power · temperature")
    for d in reading.devices:
        bits = [num(d.power_w, 0, " W") if d.power_w is not None else "",
                f"{d.temperature_c:.0f} °C" if d.temperature_c is not None else ""]
        _add_device_row(tab, d, Text(" · ".join(b for b in bits if b) or "no power or temperature reading",
                                     style="dim"))
    return [head, tab]


def gpu_renderable(view: ViewState, compact: bool = False):
    """The whole panel as one Rich renderable (``compact``: two short lines per device)."""
    gv = view.snapshot.gpu
    head = Text()
    simulated = gv.status == "simulated"
    if simulated:
        head.append("simulated", style="bold magenta")
        head.append(" devices from the simulator's /sim/gpus — no real GPU is read")
    elif gv.status == "ok":
        head.append("NVML", style="bold green")
        head.append(f" · {len(gv.devices)} device(s)")
    else:
        head.append(gv.status, style="bold yellow")
    tab = _device_table()
    pids = set(gv.server_pids)
    rows: list = []
    for d in gv.devices:
        procs = Text()
        for p in d.processes:
            mine = p.pid in pids or simulated
            procs.append(f"{p.pid} {p.name or '?'} {num(p.used_mib, 0, ' MiB')}",
                         style="bold" if mine else "dim")
            if not mine:
                procs.append(" (other)", style="dim")
            procs.append("\n")
        _add_device_row(tab, d, procs if procs.plain else Text("none", style="dim"))
        mine = [p for p in d.processes if p.pid in pids or simulated]
        rows.append(_compact_device(d, f"{len(mine)} server process(es)" if mine else ""))
    parts = ([head, *rows] if compact else [head, tab]) if gv.devices else [head, Text(
        "no devices to show" if gv.status in ("ok", "simulated") else
        "The GPU panel needs the NVIDIA driver (NVML). Everything else works without it."
        if not gv.exporters else "no local devices (NVML); the other nodes' exporters follow", style="dim")]
    for reading in gv.exporters:
        parts += [Text(""), *_exporter_section(reading, compact)]
    procs = view.snapshot.procs
    if procs and compact:
        parts += [Text(""), Text(f"server process tree: {len(procs)} process(es), "
                                 f"{sum(p.cpu_pct for p in procs):.0f} % CPU, "
                                 f"{sum(p.rss_mib for p in procs):,.0f} MiB RSS", style="dim")]
    elif procs:
        pt = PlainTable(box=None, padding=(0, 1), show_edge=False, title="server process tree (psutil)",
                   title_justify="left", title_style="bold")
        pt.add_column("pid")
        pt.add_column("name")
        pt.add_column("cpu %", justify="right")
        pt.add_column("rss", justify="right")
        for p in procs[:16]:
            pt.add_row("  " * p.depth + str(p.pid), p.name, f"{p.cpu_pct:.0f}", f"{p.rss_mib:,.0f} MiB")
        parts += [Text(""), pt]
    elif view.mode == "attach":
        parts += [Text(""), Text("attached: the server's processes are not specdash's children, so only "
                                 "NVML's process list is shown", style="dim")]
    return Group(*parts)


def history_series(view: ViewState, keys: tuple[tuple[str, str], ...]) -> list[Series]:
    """Lines of the GPU history (``snapshot.gpu_history``), one per device and field of ``keys``
    (``(attribute, label)``), x in seconds before the snapshot."""
    now = view.snapshot.taken_at
    hist = view.snapshot.gpu_history
    devices = list(dict.fromkeys(p.device for p in hist))
    out = []
    for k, (attr, label) in enumerate(keys):
        for i, dev in enumerate(devices):
            pts = [(p.t - now, getattr(p, attr)) for p in hist if p.device == dev and getattr(p, attr) is not None]
            if pts:
                name = f"{dev} {label}" if len(devices) > 1 else label
                out.append(Series(name, tuple(x for x, _ in pts), tuple(y for _, y in pts),
                                  COLORS[(i * len(keys) + k) % len(COLORS)]))
    return out


class GpuPanel(VerticalScroll):
    """Per-device table, the server's process tree, and the devices' history as charts."""

    def compose(self):
        yield Static(id="gpu-body")
        with Horizontal(id="gpu-history"):
            yield TimeChart("GPU memory / utilisation", "%", id="chart-gpu-util")
            yield TimeChart("GPU power / temperature", "W · °C", id="chart-gpu-power")

    def show(self, view: ViewState, compact: bool = False) -> None:
        """Render from ``view``; sets ``-no-gpu`` when NVML is unavailable."""
        gv = view.snapshot.gpu
        self.set_class(gv.status not in ("ok", "simulated") and not gv.devices
                       and not any(r.devices for r in gv.exporters), "-no-gpu")
        self.query_one("#gpu-body", Static).update(gpu_renderable(view, compact))
        hist = bool(view.snapshot.gpu_history)
        self.query_one("#gpu-history").display = hist
        if hist:
            self.query_one("#chart-gpu-util", TimeChart).show(
                history_series(view, (("memory_pct", "memory %"), ("utilization_pct", "util %"))))
            self.query_one("#chart-gpu-power", TimeChart).show(
                history_series(view, (("power_w", "power W"), ("temperature_c", "temp °C"))))
