"""The README's layout section names every module over 500 lines, with a reason for each one over 600
(issue 25: a module grows past 600 lines only where one model belongs together, and says so)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _table() -> dict[str, tuple[int, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("Modules over 500 lines, and why")
    end = text.index("### Where to change what", start)
    rows = {}
    for line in text[start:end].splitlines():
        m = re.match(r"\| `([^`]+\.py)` \| (\d+) \| (.+) \|$", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), m.group(3).strip())
    return rows


def _sizes() -> dict[str, int]:
    pkg = ROOT / "specdash"
    return {str(p.relative_to(pkg)): sum(1 for _ in p.open(encoding="utf-8")) for p in pkg.rglob("*.py")}


def test_every_module_over_500_lines_is_named_and_over_600_says_why():
    rows, sizes = _table(), _sizes()
    missing = sorted(m for m, n in sizes.items() if n > 500 and m not in rows)
    assert not missing, f"modules over 500 lines not in the README's layout table: {missing}"
    for m, n in sizes.items():
        if n > 600:
            assert len(rows[m][1].split()) >= 6, f"{m} ({n} lines) needs a reason in the README's layout table"
    stale = sorted(f"{m}: README says {rows[m][0]}, it has {n}" for m, n in sizes.items()
                   if m in rows and abs(rows[m][0] - n) > 20)
    assert not stale, f"the README's layout table has stale line counts (more than 20 off): {stale}"
    gone = sorted(m for m in rows if m not in sizes)
    assert not gone, f"the README's layout table names modules that no longer exist: {gone}"
