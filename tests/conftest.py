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


def _fuzz_tried() -> dict[str, int]:
    """This process's counts of ``tests/test_fuzz_inputs.py`` (empty when it did not run here)."""
    import sys

    mod = sys.modules.get("tests.test_fuzz_inputs")
    return dict(getattr(mod, "TRIED", None) or {})


#: counts handed over by pytest-xdist workers (``-n``), summed by reader
_WORKERS_TRIED: dict[str, int] = {}


def pytest_sessionfinish(session):
    """On a pytest-xdist worker: hand this worker's fuzz counts to the controller."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["fuzz_tried"] = _fuzz_tried()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """On the pytest-xdist controller: sum the counts a worker handed over."""
    for k, v in (getattr(node, "workeroutput", None) or {}).get("fuzz_tried", {}).items():
        _WORKERS_TRIED[k] = _WORKERS_TRIED.get(k, 0) + v


def pytest_terminal_summary(terminalreporter):
    """How many inputs the fuzz suite tried, per reader (``tests/test_fuzz_inputs.py``), when it ran (in this
    process or, under pytest-xdist, in the workers)."""
    tried = _fuzz_tried()
    for k, v in _WORKERS_TRIED.items():
        tried[k] = tried.get(k, 0) + v
    if tried:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(tried.items()))
        terminalreporter.write_line(f"fuzz: {sum(tried.values())} inputs tried ({parts})")
