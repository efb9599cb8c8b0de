"""The dashboard's adaptive-tier view and its live-tune action, driven with the pilot against the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from specdash.sglang import adaptive as A
from specdash.tui.app import create_app
from specdash.tui.session import ServerState
from tests.test_bench import sim_profile
from tests.test_tui import SIZE, children, config, screen_text, wait_for


def versioned(tmp_path: Path, name: str, version: str = "0.5.14", **kw) -> Path:
    p = sim_profile(tmp_path, name, **kw)
    p.write_text(p.read_text().replace("[sim]\n", f'[sim]\nsglang_version = "{version}"\n'))
    return p


def suite_file(tmp_path: Path, n: int = 4, max_tokens: int = 128) -> Path:
    lines = ["[suite]", 'name = "tier-test"', f"max_tokens = {max_tokens}", "concurrency = 1", "warmup = 0",
             "repeats = 1"]
    for i in range(n):
        lines += ["[[prompts]]", f'text = "prompt {i}: explain topic {i * 7} in depth"']
    p = tmp_path / "tier-test.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


async def test_live_panel_shows_the_adaptive_tier_and_its_history(tmp_path: Path) -> None:
    """An interleave config (steps 1 <-> 3 every few verify batches): the Live panel names the tier
    running now, from the switch lines, with the run's figures per tier; the status line says it."""
    cfg = tmp_path / "interleave.json"
    cfg.write_text(json.dumps(A.interleave_config(1, 3, "0.5.14", update_interval=6)))
    prof = versioned(tmp_path, "adaptive", spec=(3, 1, 4), time_scale=4.0)
    text = prof.read_text().replace(
        "[speculative]", "[speculative]\nextra_args = [\"--speculative-adaptive\", \"--speculative-adaptive-config\", "
                         f"\"{cfg}\"]", 1)
    prof.write_text(text.replace("[server]", '[server]\nextra_args = ["--decode-log-interval", "1"]', 1))
    before = {p.pid for p in children()}
    app = create_app(config(tmp_path, profile=str(prof), suite=str(suite_file(tmp_path)), autostart=True,
                            autoload=True, max_tokens=256, concurrency=1))
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="server ready")
        await wait_for(pilot, lambda: (t := s.collector.snapshot().tier) is not None and t.switches >= 4,
                       timeout=40, what="switches")
        app.action_show_tab("live")
        await wait_for(pilot, lambda: len(s.collector.snapshot().tier.per_tier) == 2, timeout=30, what="two tiers")
        tier = s.collector.snapshot().tier
        assert tier.adaptive and tier.source == "switch line" and tier.launch_steps == 3
        assert tier.steps in (1, 3) and len(tier.history) >= tier.switches
        by = {t.speculative_num_steps: t for t in tier.per_tier}
        assert by[1].accept_rate is not None and by[3].accept_rate is not None
        assert by[3].accept_length > by[1].accept_length  # the healthy draft accepts more with more steps
        # the panel redraws on its own clock: wait for a frame drawn after both tiers were measured
        await wait_for(pilot, lambda: "This run per tier" in screen_text(app, "#live-tier"), what="tier line")
        shown = screen_text(app, "#live-tier")
        assert shown.startswith("Adaptive tier now: steps ") and "(from the switch line" in shown
        assert "steps 1: τ" in shown and "steps 3: τ" in shown
        assert "adaptive: now steps" in screen_text(app, "#status")
        await app._stop_everything()
    assert [p for p in children() if p.pid not in before] == []


def _analytic(settings: dict) -> float:
    """The healthy scenario's analytic output tok/s for ``settings`` (a tune report's ``best`` / ``start``) at the
    test's load: concurrency 1, 192 tokens a request (:func:`specdash.sim.expected.expected`, model time)."""
    from specdash.sim.expected import expected

    return expected({**settings, "speculative_algorithm": "EAGLE3"}, "healthy", 1, max_new_tokens=192,
                    time_scale=1.0)["output_tok_s_total"]


async def test_live_tune_action_tunes_applies_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """``a``: confirm, the dashboard's server stops, tune --live runs (a baseline, one adaptive launch of two
    chain tiers), its report and summary appear in the Suggestions panel, and the best settings are
    offered and applied to the profile."""
    prof = versioned(tmp_path, "tunable", spec=(8, 1, 9), time_scale=8.0)  # far too deep: the tune must move
    before = {p.pid for p in children()}
    app = create_app(config(tmp_path, profile=str(prof), suite=str(suite_file(tmp_path, n=6, max_tokens=192)),
                            autostart=True, autoload=False, max_tokens=192, concurrency=1))
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="server ready")
        first = s.server.pid
        app.live_tune.budget, app.live_tune.chain_launches = 2, 1
        await pilot.press("a")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="tune question")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.live_tune.status.running, what="tune started")
        await wait_for(pilot, lambda: not psutil.pid_exists(first) or psutil.Process(first).status()
                       == psutil.STATUS_ZOMBIE, what="dashboard server stopped")
        assert app.check_action("launch", ()) is None  # no launch of its own while the tune runs
        await wait_for(pilot, lambda: not app.live_tune.status.running, timeout=120, what="tune finished")
        st = app.live_tune.status
        assert st.error is None, st.lines
        rep = st.report
        assert rep["mode"] == "live" and rep["live"]["used"]
        roles = [e["role"] for e in rep["launch_log"]]
        assert roles[0] == "baseline" and roles.count("live") == 1
        assert Path(st.tune_dir, "tune.json").is_file()
        assert json.loads(Path(st.tune_dir, "tune.json").read_text())["best"] == rep["best"]
        best = rep["best"]
        # it moved off the far too deep chain: to a shallower one, or (a tune steered by wall-clock measurements
        # on a loaded machine may go wide instead) to a setting the simulator's own model rates above the start
        assert best != rep["start"]
        assert best["speculative_num_steps"] < 8 or _analytic(best) > _analytic(rep["start"]), (best, rep["start"])
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="apply question")
        await pilot.press("y")
        await wait_for(pilot, lambda: s.profile.speculative.num_steps == best["speculative_num_steps"],
                       what="best applied")
        assert s.profile.speculative.num_draft_tokens == best["speculative_num_draft_tokens"]
        assert s.profile.speculative.eagle_topk == best["speculative_eagle_topk"]
        assert best in [r["settings"] for r in rep["measured"]]  # measured, not extrapolated
        await wait_for(pilot, lambda: "Live tune of tunable" in screen_text(app, "#advice-tune"), what="tune text")
        shown = screen_text(app, "#advice-tune")
        assert "finished" in shown and "live launch 1: steps" in shown and "paired windows" in shown
        await app._stop_everything()
    assert [p for p in children() if p.pid not in before] == []


async def test_suggestions_show_the_profiles_newest_sweep(tmp_path: Path) -> None:
    """A `--bench --sweep` of the profile leaves sweep.json beside its RUNs; the Suggestions panel shows
    its speedups per concurrency and the note."""
    from specdash.bench.sweep import find_sweep

    prof = versioned(tmp_path, "swept", spec=(3, 1, 4), time_scale=8.0)
    import asyncio
    import subprocess
    import sys

    # a child process: the bench installs signal handlers, which only the main thread may do
    done = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "specdash", "--bench", "--profile", str(prof), "--sweep", "concurrency=1,2",
        "--max-tokens", "32", "--out", str(tmp_path / "runs"), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(done.stdout)
    found = find_sweep(tmp_path / "runs", "swept")
    assert found["sweep"] == res["sweep"] and found["path"].endswith("sweep.json")
    assert find_sweep(tmp_path / "runs", "other") is None
    app = create_app(config(tmp_path, profile=str(prof), autostart=False, autoload=False))
    async with app.run_test(size=SIZE) as pilot:
        app.action_show_tab("advice")
        await wait_for(pilot, lambda: "Concurrency sweep" in screen_text(app, "#advice-sweep"), what="sweep text")
        shown = screen_text(app, "#advice-sweep")
        sp = res["sweep"][0]["speedup"]
        assert f"c1: ×{sp:.2f}" in shown and "c2: ×" in shown and res["note"] in shown


def test_the_live_tune_panel_shows_one_table_per_concurrency():
    """The dashboard's live-tune section (tune_text) lists the tune's concurrency first and the adaptive
    schedule's high concurrency in a table of its own: a concurrency-16 tier is never read beside the
    concurrency-1 settings (issue 26: "best by measurement: 2/1/3 13,379 tok/s" against ~1,860)."""
    from specdash.tui.livetune import TuneStatus, tune_text

    def row(s, src, launch, tok, c, **kw):
        st = {"speculative_num_steps": s[0], "speculative_eagle_topk": s[1], "speculative_num_draft_tokens": s[2]}
        return {"settings": st, "source": src, "launch": launch, "output_tok_s": tok, "interval": None,
                "accept_length": 2.5, "concurrency": c, **kw}

    report = {"launches": 3, "exploration_launches": 2, "budget": 8, "launch_log": [{"role": "baseline"},
              {"role": "live"}, {"role": "explore"}], "live": {"used": True, "pairs": []},
              "fast_explore": {"concurrency": 1},
              "measured": [{"settings": None, "source": "launch", "launch": 0, "output_tok_s": 800.0,
                            "interval": None, "accept_length": None, "concurrency": 1},
                           row((3, 1, 4), "tier", 1, 850.0, 1), row((7, 1, 8), "tier", 1, 870.0, 1),
                           row((3, 1, 4), "tier", 1, 13379.0, 16, **{"for": "adaptive schedule"}),
                           row((7, 2, 15), "launch", 2, 890.0, 1)],
              "best": {"speculative_num_steps": 7, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 15},
              "stop_reason": "budget", "recommendation": {"text": "7/2/15"}, "time": {}}
    status = TuneStatus(running=False, profile="p", suite="s", concurrency=1, report=report, started=0.0,
                        finished=1.0)
    text = tune_text(status)
    c1, c16 = text.index("concurrency 1 (the tune's concurrency)"), text.index("concurrency 16 (for the adaptive")
    assert c1 < c16
    assert "13379.0" in text[c16:] and "13379.0" not in text[c1:c16]
    assert "890.0" in text[c1:c16] and "890.0" not in text[c16:]
