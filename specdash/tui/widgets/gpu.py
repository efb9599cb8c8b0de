"""The GPU panel: per device name, memory used / total (MiB and %), utilisation and the
server's processes on it (NVML + psutil); the reason when NVML is unavailable; 'simulated'
for the simulator's devices."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from specdash.tui.format import DASH, num
from specdash.tui.state import ViewState


def bar(frac: float, width: int = 20) -> Text:
    """A horizontal bar for a 0–1 fraction (green < 70 %, yellow < 90 %, red above)."""
    frac = max(0.0, min(1.0, frac))
    full = round(frac * width)
    style = "green" if frac < 0.7 else ("yellow" if frac < 0.9 else "red")
    t = Text("█" * full, style=style)
    t.append("░" * (width - full), style="dim")
    return t


def gpu_renderable(view: ViewState):
    """The whole panel as one Rich renderable."""
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
    tab = Table(expand=True, box=None, padding=(0, 1), show_edge=False)
    for col, kw in (("GPU", {"width": 4}), ("name", {"ratio": 2}), ("memory used / total", {"ratio": 2}),
                    ("", {"width": 22}), ("mem %", {"width": 7}), ("util", {"width": 6}),
                    ("", {"width": 12}), ("server processes on it", {"ratio": 3})):
        tab.add_column(col, **kw)
    pids = set(gv.server_pids)
    for d in gv.devices:
        procs = Text()
        for p in d.processes:
            mine = p.pid in pids or simulated
            procs.append(f"{p.pid} {p.name or '?'} {num(p.used_mib, 0, ' MiB')}",
                         style="bold" if mine else "dim")
            if not mine:
                procs.append(" (other)", style="dim")
            procs.append("\n")
        util = d.utilization_pct
        tab.add_row(
            str(d.index), d.name + (" (sim)" if d.simulated else ""),
            f"{d.memory_used_mib:,.0f} / {d.memory_total_mib:,.0f} MiB", bar(d.memory_pct / 100.0),
            f"{d.memory_pct:.1f} %", DASH if util is None else f"{util:.0f} %",
            bar((util or 0) / 100.0, 10), procs if procs.plain else Text("none", style="dim"),
        )
    parts = [head, tab] if gv.devices else [head, Text(
        "no devices to show" if gv.status in ("ok", "simulated") else
        "The GPU panel needs the NVIDIA driver (NVML). Everything else works without it.", style="dim")]
    procs = view.snapshot.procs
    if procs:
        pt = Table(box=None, padding=(0, 1), show_edge=False, title="server process tree (psutil)",
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


class GpuPanel(VerticalScroll):
    """Per-device table plus the server's process tree."""

    def compose(self):
        yield Static(id="gpu-body")

    def show(self, view: ViewState) -> None:
        """Render from ``view``; sets ``-no-gpu`` when NVML is unavailable."""
        gv = view.snapshot.gpu
        self.set_class(gv.status not in ("ok", "simulated") and not gv.devices, "-no-gpu")
        self.query_one("#gpu-body", Static).update(gpu_renderable(view))
