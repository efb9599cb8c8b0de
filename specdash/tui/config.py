"""The dashboard's configuration (injected into the app factory; built from the CLI)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdash import DEFAULT_SUITE
from specdash.collect.exporter import cli_targets
from specdash.collect.snapshot import PollIntervals
from specdash.tui.state import ViewState

DEMO_SUITE = DEFAULT_SUITE
DEMO_MAX_TOKENS = 256
DEMO_CONCURRENCY = 4
TABS = ("launch", "live", "gpu", "log", "advice")


@dataclass
class AppConfig:
    """Everything the app needs, injectable for tests (posting's app-factory pattern).

    ``profile``: name or path; ``url``: attach instead of launching; ``demo``: simulator
    demo (launch at once and loop the load); ``autostart`` / ``autoload`` default to
    ``demo``; ``time_scale`` overrides a simulated profile's ``[sim] time_scale``;
    ``max_tokens`` / ``concurrency`` override the suite's for the load driver;
    ``redraw_hz``: UI refresh rate (≥ 2); ``frozen``: draw this fixed :class:`ViewState` and
    start nothing (snapshot tests); ``preset_dir``: where presets are saved (default: the
    user's profile directory); ``gpu_exporters``: other nodes' GPU exporters
    (:class:`~specdash.collect.exporter.ExporterTarget`, from ``--gpu-exporter NODE=URL``); ``baseline``: profile name whose newest run under ``out_dir``
    gives the baseline line; ``baseline_tok_s``: give it directly; ``stall_s``: seconds without token
    progress under load after which the server counts as stalled (default
    :data:`~specdash.tui.session.STALL_S`).
    """

    profile: str | None = None
    url: str | None = None
    api_key: str | None = None
    demo: bool = False
    suite: str | None = None
    out_dir: Path = Path("runs")
    autostart: bool | None = None
    autoload: bool | None = None
    force: bool = False
    time_scale: float | None = None
    max_tokens: int | None = None
    concurrency: int | None = None
    intervals: PollIntervals = field(default_factory=PollIntervals)
    redraw_hz: float = 4.0
    frozen: ViewState | None = None
    frozen_tab: str = "launch"
    preset_dir: Path | None = None
    baseline: str | None = None
    baseline_tok_s: float | None = None
    sglang_version: str | None = None
    ready_timeout_s: float | None = None
    gpu_source: str = "auto"
    gpu_exporters: tuple = ()
    stall_s: float | None = None

    @classmethod
    def from_args(cls, args: Any) -> AppConfig:
        """From the ``specdash`` argparse namespace (``cli.py``)."""
        demo = bool(getattr(args, "demo", False))
        return cls(
            profile=getattr(args, "profile", None),
            url=getattr(args, "url", None),
            api_key=getattr(args, "api_key", None) or os.environ.get("SGLANG_API_KEY"),
            demo=demo,
            suite=getattr(args, "suite", None),
            out_dir=Path(getattr(args, "out", None) or "runs"),
            force=bool(getattr(args, "force", False)),
            max_tokens=getattr(args, "max_tokens", None) or (DEMO_MAX_TOKENS if demo else None),
            concurrency=getattr(args, "concurrency", None) or (DEMO_CONCURRENCY if demo else None),
            baseline=getattr(args, "baseline", None) or ("demo-baseline" if demo else None),
            sglang_version=getattr(args, "sglang_version", None),
            gpu_exporters=cli_targets(getattr(args, "gpu_exporter", None)),
        )
