"""SVG snapshots of the dashboard at a fixed size with frozen data (pytest-textual-snapshot).

The data come from :mod:`specdash.tui.frozen` (closed-form numbers, fixed findings), so the
pictures change only when the UI does.  Update after a deliberate UI change with
``pytest tests/test_tui_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

import pytest

from specdash.profile import load_profile
from specdash.tui.app import AppConfig, create_app
from specdash.tui.frozen import frozen_view

SIZE = (160, 48)


def frozen_app(scenario: str, tab: str):
    prof = load_profile("demo-wrong-algo" if scenario.startswith("wrong") else "demo-eagle3")
    return create_app(AppConfig(frozen=frozen_view(scenario, profile=prof), frozen_tab=tab))


@pytest.mark.parametrize(("scenario", "tab"), [
    ("healthy", "live"),
    ("healthy", "launch"),
    ("healthy", "gpu"),
    ("healthy", "log"),
    ("adaptive", "live"),
    ("wrong_algo_preflight", "launch"),
    ("wrong_algo", "live"),
])
def test_dashboard_snapshot(snap_compare, scenario: str, tab: str) -> None:
    assert snap_compare(frozen_app(scenario, tab), terminal_size=SIZE)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])
@pytest.mark.parametrize("tab", ["live", "gpu", "log", "launch"])
def test_small_terminal_snapshot(snap_compare, size: tuple[int, int], tab: str) -> None:
    """The compact layouts (nvitop-style, below 120 columns or 34 rows): every panel's headline figures
    legible, the key footer on one line."""
    assert snap_compare(frozen_app("healthy", tab), terminal_size=size)
