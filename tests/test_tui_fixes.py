"""Banner status colours, pending acceptance, baseline matching and the help sections."""

from __future__ import annotations

import json

from specdash.bench.rundir import find_baseline_run
from specdash.eagle3.findings import Finding
from specdash.eagle3.verify import VerifyReport
from specdash.tui.screens.help import help_table
from specdash.tui.verification import pending_acceptance
from specdash.tui.widgets.findings import banner_text

COLLAPSE = Finding("VERIFY_COLLAPSE", "error", "accept length 1.00", "why", "fix", {})
UNKNOWN = Finding("VERIFY_COLLAPSE", "warning", "acceptance UNKNOWN", "why", "fix", {})
ADJUSTED = Finding("VERIFY_ADJUSTED", "warning", "asked 16, the server runs 2", "why", "fix", {})


def test_acceptance_waits_for_enough_tokens():
    rep = pending_acceptance(VerifyReport("failed", [COLLAPSE, ADJUSTED], "collapsed", 1.0, 40), 40, 256)
    assert rep.status == "waiting" and rep.acceptance == "pending"
    assert [f.code for f in rep.findings] == ["VERIFY_ADJUSTED"]
    text = banner_text(rep, rep.findings).plain
    assert "waiting for 256 tokens" in text and "COLLAPSE" not in text and "WIRING" not in text
    assert not text.startswith("✖")


def test_banner_icon_follows_status():
    ok = banner_text(VerifyReport("ok", [ADJUSTED], "ok", 3.2, 300), [ADJUSTED]).plain
    assert ok.startswith("✔ post-launch verification OK") and "▲ WARNING VERIFY_ADJUSTED" in ok
    failed = banner_text(VerifyReport("failed", [COLLAPSE], "collapsed", 1.0, 300), [COLLAPSE]).plain
    assert failed.startswith("✖ post-launch verification FAILED") and "WIRING FAULT" in failed
    skipped = banner_text(VerifyReport("skipped", [UNKNOWN], "unknown", None, 300), [UNKNOWN]).plain
    assert skipped.startswith("● post-launch verification SKIPPED") and "WIRING FAULT" not in skipped


def test_baseline_must_match_suite_tokens_and_concurrency(tmp_path):
    def run(name, **kw):
        d = tmp_path / name
        d.mkdir()
        (d / "summary.json").write_text(json.dumps({"runs": [{"profile": "demo-baseline", **kw}]}))

    run("a", output_tok_s=508.0, suite="short", max_tokens=256, concurrency=4)
    run("b", output_tok_s=300.0, suite="seeds-five", max_tokens=1024, concurrency=8)
    assert find_baseline_run(tmp_path, "demo-baseline", suite="seeds-five", max_tokens=1024, concurrency=4) is None
    got = find_baseline_run(tmp_path, "demo-baseline", suite="seeds-five", max_tokens=1024, concurrency=8)
    assert got is not None and got["output_tok_s"] == 300.0


def test_help_has_one_section_per_group():
    sections = [c for c in help_table().columns[0]._cells if getattr(c, "style", "") == "bold underline"]
    names = [c.plain for c in sections]
    assert len(names) == len(set(names)) and names.count("Server") == 1
