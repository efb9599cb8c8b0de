"""The import contracts of ``[tool.importlinter]`` in pyproject.toml, checked by import-linter.

Floors, lowest first: checkpoint → sglang → profile → eagle3 | collect | sim → launch | advisor →
bench → commands | tui → cli; only tui imports Textual; only the drafter self-test imports
torch; no module cycle inside any package; ``bench/`` in three floors (experiments → analysis → one run,
every module placed).  The linter runs in a subprocess from the repository root, so it analyses this checkout's
``specdash`` (an installed copy elsewhere on ``sys.path`` does not count).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]

_LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    return subprocess.run([sys.executable, "-c", _LINT, "--no-cache"],  # config: ./pyproject.toml
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_import_contracts_are_kept():
    r = _lint(ROOT)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "0 broken" in out, out
    assert "Contracts: 6 kept" in out, out  # every contract was read and checked


@pytest.mark.parametrize("module, line, broken", [
    # a floor importing from above it
    ("sglang/_layer_probe.py", "import specdash.bench.stats\n", "floors"),
    # siblings on one floor are independent
    ("sim/_layer_probe.py", "import specdash.eagle3.findings\n", "floors"),
    # Textual outside tui/
    ("bench/_layer_probe.py", "import textual\n", "only tui imports"),
    # torch outside the self-test
    ("eagle3/_layer_probe.py", "import torch\n", "only eagle3.selftest imports torch"),
])
def test_a_broken_contract_fails(tmp_path, module, line, broken):
    """The same contracts on a copy of the package with one bad import added: the linter fails."""
    shutil.copytree(ROOT / "specdash", tmp_path / "specdash", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "specdash" / module).write_text(line, encoding="utf-8")
    r = _lint(tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert any(broken in ln and "BROKEN" in ln for ln in out.splitlines()), out


@pytest.mark.parametrize("writes, appends, broken", [
    # two modules of one package importing each other
    ({"profile/_cycle_a.py": "import specdash.profile._cycle_b\n",
      "profile/_cycle_b.py": "import specdash.profile._cycle_a\n"}, {}, "no cycles inside any package"),
    # one run (rundir) importing analysis (stats): a bench floor upside down
    ({}, {"bench/rundir.py": "import specdash.bench.stats\n"}, "bench: experiments, analysis, one run"),
    # a bench module on no floor
    ({"bench/_unplaced.py": "\"\"\"placed on no floor.\"\"\"\n"}, {}, "bench: experiments, analysis, one run"),
])
def test_a_broken_inner_contract_fails(tmp_path, writes, appends, broken):
    """The inner contracts (no cycles inside a package, bench's floors) on a copy with one fault added."""
    shutil.copytree(ROOT / "specdash", tmp_path / "specdash", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for module, text in writes.items():
        (tmp_path / "specdash" / module).write_text(text, encoding="utf-8")
    for module, text in appends.items():
        with open(tmp_path / "specdash" / module, "a", encoding="utf-8") as fh:
            fh.write(text)
    r = _lint(tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert any(broken in ln and "BROKEN" in ln for ln in out.splitlines()), out
