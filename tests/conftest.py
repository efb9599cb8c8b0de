"""Shared fixtures: paths to the shared recordings, isolated user/state dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
GOLDEN = SHARED / "sglang" / "golden"


@pytest.fixture
def golden() -> Path:
    """``../shared/sglang/golden`` (CI lays shared/ beside the checkout); skip when absent."""
    if not GOLDEN.is_dir():
        pytest.skip("../shared/sglang/golden is not present")
    return GOLDEN


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory, monkeypatch):
    """Keep tests away from the real ~/.config and ~/.local/state."""
    base = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("SPECDASH_STATE_DIR", str(base / "state"))
    yield


def pytest_terminal_summary(terminalreporter):
    """How many inputs the fuzz suite tried, per reader (``tests/test_fuzz_inputs.py``), when it ran."""
    import sys

    mod = sys.modules.get("tests.test_fuzz_inputs")
    tried = getattr(mod, "TRIED", None)
    if tried:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(tried.items()))
        terminalreporter.write_line(f"fuzz: {sum(tried.values())} inputs tried ({parts})")
