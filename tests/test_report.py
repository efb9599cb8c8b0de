"""``specdash report`` (one self-contained HTML page) and ``specdash compare`` (two run directories).

The directories come from real simulator runs through the command line (max_tokens 32, time scale 8):
a single run, a concurrency sweep with its baseline directory, and an A/B compare directory.  The page
is checked for the numbers of ``summary.json`` / ``comparison.json`` as formatted, for being well formed
(html.parser) with every inline SVG parsing as XML, for carrying no script or external resource, and
for escaping what it shows.  A headless browser, where one is installed, opens it and takes a screenshot.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specdash.bench.html import bar_chart, line_chart, nice_ticks
from specdash.cli import main
from tests.test_bench import sim_profile

SUITE = """[suite]
name = "report-t"
max_tokens = 32
repeats = 2
warmup = 1
concurrency = 1

[[prompts]]
text = "Write a Python function that implements merge sort with detailed comments."
category = "coding"

[[prompts]]
text = "Describe the process of photosynthesis step by step."
category = "prose"
"""

VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}


def _cli(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict:
    """Run the simulator once per module: a single run, a sweep (profile + baseline) and an A/B."""
    tmp = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(tmp / "config"))
        mp.setenv("SPECDASH_STATE_DIR", str(tmp / "state"))
        suite = tmp / "suite.toml"
        suite.write_text(SUITE)
        spec = sim_profile(tmp, "rep-chain", spec=(3, 1, 4))
        other = sim_profile(tmp, "rep-short", spec=(1, 1, 2))
        common = ["--suite", str(suite), "--max-tokens", "32"]
        rc, out = _cli(["--bench", "--profile", str(spec), *common, "--out", str(tmp / "single"), "--json"])
        assert rc == 0
        single = json.loads(out)
        rc, out = _cli(["--bench", "--profile", str(spec), *common, "--sweep", "concurrency=1,2",
                        "--out", str(tmp / "sweep"), "--json"])
        assert rc == 0
        sweep = json.loads(out)
        rc, out = _cli(["--bench", "--profile", str(spec), "--vs", str(other), *common, "--out", str(tmp / "ab"),
                        "--json"])
        assert rc == 0
        ab = json.loads(out)
    spec_dir = next(d for d in sweep["run_dirs"] if not d.endswith("-baseline"))
    base_dir = next(d for d in sweep["run_dirs"] if d.endswith("-baseline"))
    return {"tmp": tmp, "single": Path(single["runs"][0]["run_dir"]), "single_summary": single,
            "sweep": sweep, "sweep_dir": Path(spec_dir), "base_dir": Path(base_dir),
            "ab": ab, "compare_dir": Path(ab["compare_dir"]), "ab_runs": [Path(p) for p in ab["runs"]]}


class _Checker(HTMLParser):
    """Tag balance (void elements aside) and every attribute that could load something."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.loads: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.loads += [f"{tag} {k}={v}" for k, v in attrs if k in ("src", "href", "xlink:href")]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)
        self.loads += [f"{tag} {k}={v}" for k, v in attrs if k in ("src", "href", "xlink:href")]

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()


def check_page(page: str) -> list[ET.Element]:
    """Assert ``page`` is well formed and self-contained; returns its SVGs, each parsed as XML."""
    assert page.startswith("<!DOCTYPE html>")
    c = _Checker()
    c.feed(page)
    c.close()
    assert not c.errors, c.errors[:5]
    assert not c.stack, c.stack
    assert "script" not in c.tags and not c.loads, (c.tags, c.loads)
    assert "<script" not in page.lower()
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    return [ET.fromstring(s) for s in svgs]


def _page(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_single_run_report_holds_the_summary_numbers(dirs):
    d = dirs["single"]
    before = {p.name for p in d.iterdir()}
    rc, out = _cli(["report", str(d)])
    assert rc == 0 and out.strip() == f"report: {d / 'report.html'}"
    assert {p.name for p in d.iterdir()} == before | {"report.html"}  # nothing else written
    page = _page(d / "report.html")
    svgs = check_page(page)
    assert len(svgs) >= 2  # the accept histogram and the per-category accept length
    run = json.loads((d / "summary.json").read_text())["runs"][0]
    manifest = json.loads((d / "manifest.json").read_text())
    assert run["simulated"] is True and "simulated" in page
    for text in (f"{run['output_tok_s']:.1f}", f"{run['ttft_ms']['p50']:.2f}", f"{run['ttft_ms']['p99']:.2f}",
                 f"{run['tpot_ms']['p90']:.2f}", f"{run['itl_ms']['p50']:.2f}", f"{run['accept_length']:.3f}",
                 f"{run['accept_rate']:.3f}", f"{run['duration_s']:.2f}", str(run["output_tokens"]),
                 " ".join(str(c) for c in run["accept_histogram"]), "EAGLE3: steps 3, topk 1, draft tokens 4",
                 f"{manifest['time_to_ready_s']:.1f} s", run["sglang_version"], "rep-chain",
                 "Acceptance per category", "coding", "prose", "post-launch verification"):
        assert text in page, text
    # the histogram chart's bars are the fractions of the run's histogram
    hist = run["accept_histogram"]
    charts = [[t.text for t in s.iter("{http://www.w3.org/2000/svg}title")] for s in svgs]
    titles = next(c for c in charts if c and c[0] == "accepted drafts per verify round")
    assert any(t and t.endswith(f"{hist[-1] / sum(hist):.3f}") for t in titles)
    # and the run's acceptance by draft position has a chart of its own
    assert run["accept_by_position"] and any(c and c[0] == "acceptance by draft position" for c in charts)


def test_sweep_pair_report_draws_the_curves_and_the_speedups(dirs):
    out_file = dirs["tmp"] / "pages" / "sweep.html"
    rc, _ = _cli(["report", str(dirs["sweep_dir"]), str(dirs["base_dir"]), "--out", str(out_file)])
    assert rc == 0 and out_file.is_file()
    page = _page(out_file)
    svgs = check_page(page)
    titles = [s.find("{http://www.w3.org/2000/svg}title").text for s in svgs]
    assert "output tok/s against concurrency" in titles
    assert any(t.startswith("speedup over rep-chain-baseline") for t in titles)
    assert "Speedup over rep-chain-baseline" in page
    for p in dirs["sweep"]["sweep"]:  # the page pairs the records exactly as the sweep did
        assert f"{p['speedup']:.3f}" in page
        assert f"[{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}]" in page
        assert f"{p['output_tok_s']:.1f}" in page and f"{p['baseline_tok_s']:.1f}" in page
    assert dirs["sweep"]["note"] in page.replace("&#x27;", "'")
    for run in json.loads((dirs["sweep_dir"] / "summary.json").read_text())["runs"]:
        assert f"c{run['concurrency']}" in page and f"{run['output_tok_s']:.1f}" in page


def test_compare_dir_report_holds_the_comparison(dirs):
    cdir = dirs["compare_dir"]
    rc, _ = _cli(["report", str(cdir)])
    assert rc == 0
    page = _page(cdir / "report.html")
    assert (cdir / "report.md").is_file()  # the Markdown report is left alone
    check_page(page)
    cmp = json.loads((cdir / "comparison.json").read_text())
    assert f"Verdict: {cmp['verdict']}" in page
    assert f"{cmp['speedup']:.3f}" in page and f"[{cmp['ci95'][0]:.3f}, {cmp['ci95'][1]:.3f}]" in page
    for row in cmp["per_prompt"]:
        assert f"{row['a_tok_s']:.1f}" in page and f"{row['b_tok_s']:.1f}" in page
    for cat in cmp["per_category"]:
        assert f"{cmp['per_category'][cat]['speedup']:.3f}" in page
    assert "output tok/s per prompt" in page


def test_report_replaces_its_own_page_but_no_other_file(dirs, tmp_path):
    out_file = tmp_path / "r.html"
    assert _cli(["report", str(dirs["single"]), "--out", str(out_file)])[0] == 0
    out_file.write_text(_page(out_file).replace("</body>", "<p>old</p></body>"))
    assert _cli(["report", str(dirs["single"]), "--out", str(out_file)])[0] == 0
    assert "<p>old</p>" not in _page(out_file)  # its own page: regenerated
    mine = tmp_path / "notes.html"
    mine.write_text("<p>mine</p>")
    assert _cli(["report", str(dirs["single"]), "--out", str(mine)])[0] == 2
    assert mine.read_text() == "<p>mine</p>"
    assert _cli(["report", str(dirs["single"]), "--out", str(mine), "--force"])[0] == 0
    assert "specdash report" in mine.read_text()


def test_report_escapes_what_it_shows(dirs, tmp_path):
    d = tmp_path / "evil"
    shutil.copytree(dirs["single"], d)
    (d / "report.html").unlink(missing_ok=True)
    s = json.loads((d / "summary.json").read_text())
    s["runs"][0]["profile"] = "<script>alert('x')</script>&"
    s["runs"][0]["verification"]["findings"] = [{"code": "VERIFY_LOG", "severity": "warning",
                                                  "message": "<img src=x onerror=alert(1)>", "fix": "a < b"}]
    (d / "summary.json").write_text(json.dumps(s))
    assert _cli(["report", str(d)])[0] == 0
    page = _page(d / "report.html")
    check_page(page)
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_report_shows_the_tiers_of_an_adaptive_run(dirs, tmp_path):
    d = tmp_path / "adaptive"
    shutil.copytree(dirs["single"], d)
    s = json.loads((d / "summary.json").read_text())
    s["runs"][0]["adaptive"] = {"enabled": True, "config": None, "switches": 7}
    s["runs"][0]["tiers"] = [
        {"speculative_num_steps": 1, "speculative_num_draft_tokens": 2, "verify_rounds": 120, "output_tokens": 230,
         "accept_length": 1.9166, "accept_rate": 0.9166, "output_tok_s": 477.04, "share": 0.25},
        {"speculative_num_steps": 3, "speculative_num_draft_tokens": 4, "verify_rounds": 360, "output_tokens": 900,
         "accept_length": 2.5, "accept_rate": 0.5, "output_tok_s": 455.01, "share": 0.75}]
    (d / "summary.json").write_text(json.dumps(s))
    assert _cli(["report", str(d), "--out", str(tmp_path / "a.html")])[0] == 0
    page = _page(tmp_path / "a.html")
    check_page(page)
    for text in ("adaptive", "7 switch(es)", "25.0 %", "75.0 %", "477.0", "455.0", "1.917", "0.917", "2.500"):
        assert text in page, text


def test_report_refuses_what_is_not_a_directory_it_knows(dirs, tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no summary.json, comparison.json or tune.json" in capsys.readouterr().err
    # a run that never got to its summary (a launch that failed): said as such, with where to look
    never = tmp_path / "never"
    never.mkdir()
    (never / "manifest.json").write_text(json.dumps({"profile": "demo-eagle3"}))
    (never / "server.log").write_text("RuntimeError: CUDA out of memory\n")
    assert main(["report", str(never)]) == 2
    err = capsys.readouterr().err
    assert "is a run directory of profile demo-eagle3" in err and "no request record" in err
    assert f"{never / 'server.log'} says how the server ended" in err and f"--resume {never}" in err


def test_report_of_a_tune_dir(tmp_path):
    tdir = tmp_path / "t-tune"
    tdir.mkdir()
    st = {"speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3}
    (tdir / "tune.json").write_text(json.dumps({
        "profile": "p", "suite": "s", "mode": "relaunch", "budget": 3, "launches": 4, "exploration_launches": 3,
        "stop_reason": "budget spent", "start": st, "best": st, "baseline_tok_s": 101.25,
        "measured": [{"settings": st, "output_tok_s": 222.44, "accept_length": 2.5, "concurrency": 1,
                      "source": "launch", "launch": 1}, {"settings": None, "output_tok_s": 101.25,
                                                          "accept_length": None, "concurrency": 1,
                                                          "source": "launch", "launch": 0}],
        "advice_text": "use steps 2 <because>", "comparison": None, "preset": None,
        "preset_not_saved": "the starting settings were best: nothing new to save"}))
    assert _cli(["report", str(tdir)])[0] == 0
    page = _page(tdir / "report.html")
    check_page(page)
    for text in ("Tune: p", "222.4", "101.2", "steps 2 / topk 1 / draft tokens 3", "no speculation",
                 "use steps 2 &lt;because&gt;", "nothing new to save"):
        assert text in page, text


COMPARISON_KEYS = ("a", "b", "metric", "speedup", "ci95", "verdict", "pairs", "per_prompt", "per_category",
                   "baseline", "overall", "confidence", "method", "excluded", "notes")


def test_compare_two_run_dirs_matches_the_ab(dirs):
    a_dir, b_dir = dirs["ab_runs"]
    rc, out = _cli(["compare", str(a_dir), str(b_dir), "--json"])
    assert rc == 0
    got = json.loads(out)
    assert all(k in got for k in COMPARISON_KEYS)
    assert list(got)[:10] == list(COMPARISON_KEYS[:10])
    ab = dirs["ab"]
    assert (got["a"], got["b"], got["metric"]) == (ab["a"], ab["b"], "output_tok_s")
    # the same records, the same pairing and bootstrap seed: the A/B's own figures
    assert got["speedup"] == pytest.approx(ab["speedup"], rel=1e-12)
    assert got["ci95"] == pytest.approx(ab["ci95"], rel=1e-12)
    assert got["pairs"] == ab["pairs"] == 4 and got["verdict"] == ab["verdict"]
    assert set(got["per_category"]) == {"coding", "prose"}
    assert got["runs"] == [str(a_dir), str(b_dir)]
    rc, text = _cli(["compare", str(a_dir), str(b_dir)])
    assert rc == 0
    assert f"A/B: {ab['b']} over {ab['a']}: speedup {ab['speedup']:.3f}×" in text


def test_compare_two_sweeps_per_concurrency(dirs):
    rc, out = _cli(["compare", str(dirs["base_dir"]), str(dirs["sweep_dir"]), "--json"])
    assert rc == 0
    got = json.loads(out)
    assert all(k in got for k in COMPARISON_KEYS)
    pts = {p["concurrency"]: p for p in got["per_concurrency"]}
    for p in dirs["sweep"]["sweep"]:
        assert pts[p["concurrency"]]["speedup"] == pytest.approx(p["speedup"], rel=1e-12)
        assert pts[p["concurrency"]]["ci95"] == pytest.approx(p["ci95"], rel=1e-12)
    assert got["pairs"] == sum(p["pairs"] for p in dirs["sweep"]["sweep"])
    assert got["break_even_concurrency"] == dirs["sweep"]["break_even_concurrency"]
    assert any("pooled over concurrencies 1, 2" in n for n in got["notes"])
    rc, out = _cli(["compare", str(dirs["base_dir"]), str(dirs["sweep_dir"]), "--concurrency", "2", "--json"])
    one = json.loads(out)
    assert rc == 0 and one["speedup"] == pytest.approx(pts[2]["speedup"], rel=1e-12) and "per_concurrency" not in one


def test_compare_says_what_is_wrong(dirs, tmp_path, capsys):
    good = str(dirs["single"])
    assert main(["compare", str(tmp_path / "missing"), good]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main(["compare", str(dirs["compare_dir"]), good]) == 2
    assert "compare directory" in capsys.readouterr().err
    empty = tmp_path / "norecs"
    empty.mkdir()
    shutil.copy(dirs["single"] / "summary.json", empty / "summary.json")
    assert main(["compare", str(empty), good]) == 2
    assert "no request records" in capsys.readouterr().err
    assert main(["compare", str(dirs["base_dir"]), str(dirs["sweep_dir"]), "--concurrency", "8"]) == 2
    assert "--concurrency 8" in capsys.readouterr().err


def _sim_args(spec):
    args = ["--model-path", "sim:llama-3.1-8b", "--sim-scenario", "healthy", "--time-scale", "8", "--sim-seed", "2"]
    if spec:
        args += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "sim:llama-3.1-8b-eagle3",
                 "--speculative-num-steps", str(spec[0]), "--speculative-eagle-topk", str(spec[1]),
                 "--speculative-num-draft-tokens", str(spec[2])]
    return args


def test_compare_two_attached_servers(tmp_path):
    from specdash.sim.testing import SimProcess

    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    with SimProcess(_sim_args(None)) as plain, SimProcess(_sim_args((3, 1, 4))) as spec:
        rc, out = _cli(["compare", "--url", plain.url, "--vs-url", spec.url, "--suite", str(suite),
                        "--max-tokens", "32", "--out", str(tmp_path / "runs"), "--json"])
    assert rc == 0
    got = json.loads(out)
    assert all(k in got for k in COMPARISON_KEYS)
    assert got["a"] == f"A ({plain.url})" and got["b"] == f"B ({spec.url})"
    assert got["pairs"] == 4 and got["speedup"] > 1.2 and got["verdict"] in ("faster", "no significant difference")
    assert got["overall"]["a"]["accept_length"] is None and got["overall"]["b"]["accept_length"] > 1.5
    cdir = Path(got["compare_dir"])
    assert json.loads((cdir / "comparison.json").read_text())["speedup"] == got["speedup"]
    assert (cdir / "report.md").is_file() and len(got["runs"]) == 2
    # the two run directories compare to the same figures
    rc, out = _cli(["compare", *got["runs"], "--json"])
    assert rc == 0 and json.loads(out)["speedup"] == pytest.approx(got["speedup"], rel=1e-12)


def test_compare_url_flags_are_checked(tmp_path, capsys):
    assert main(["compare", "--url", "http://127.0.0.1:1"]) == 2
    assert "--vs-url" in capsys.readouterr().err
    assert main(["compare", "--url", "127.0.0.1:1", "--vs-url", "http://127.0.0.1:2"]) == 2
    assert "not an http(s) URL" in capsys.readouterr().err
    assert main(["compare", str(tmp_path), str(tmp_path), "--max-tokens", "8"]) == 2
    assert "only with --url" in capsys.readouterr().err
    assert main(["compare"]) == 2
    assert "two run directories" in capsys.readouterr().err


def test_svg_writers_escape_and_parse():
    svg = line_chart([{"name": "a<&>\"", "points": [(1, 2.0), (4, 1.5), (16, None)], "band": [(1, 1.8, 2.2), (4, 1.2, 1.7)]},
                      {"name": "b", "points": [(1, 1.0), (4, 0.9)]}],
                     title="t <x>", x_label="c", y_label="y", log_x=True, ref_y=1.0)
    root = ET.fromstring(svg)
    assert root.find("{http://www.w3.org/2000/svg}title").text == "t <x>"
    assert "a&lt;&amp;&gt;&quot;" in svg
    assert len(root.findall("{http://www.w3.org/2000/svg}polygon")) == 1  # one band
    bars = ET.fromstring(bar_chart(["0", "1"], [("x", [0.25, None]), ("y", [0.5, 0.75])], title="h", x_label="k",
                                   y_label="f"))
    assert len(bars.findall("{http://www.w3.org/2000/svg}rect")) == 1 + 3 + 2  # background, bars, legend
    assert "no data" in line_chart([], title="e", x_label="x", y_label="y")
    ticks = nice_ticks(0, 2.3)
    assert ticks[0] == 0 and ticks[-1] >= 2.3 and len(ticks) <= 8


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "firefox")


def _chromium() -> str | None:
    return next((b for b in BROWSERS if shutil.which(b) and "firefox" not in b), None)


def test_report_in_a_headless_browser(dirs, tmp_path):
    """The sweep page as a real browser parses it: Chromium's serialised DOM (``--dump-dom``) holds every
    chart and table of the file, no console error is logged, and a screenshot is a real PNG."""
    found = next((b for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        pytest.skip(f"no headless browser installed ({', '.join(BROWSERS)} not on PATH); the page is checked with "
                    "html.parser and xml.etree instead")
    page = tmp_path / "sweep.html"
    assert _cli(["report", str(dirs["sweep_dir"]), str(dirs["base_dir"]), "--out", str(page)])[0] == 0
    text = page.read_text(encoding="utf-8")
    shot = tmp_path / "report.png"
    if "firefox" in found:
        cmd = [found, "--headless", "--screenshot", str(shot), page.resolve().as_uri()]
    else:
        cmd = [found, "--headless", "--disable-gpu", "--no-sandbox", f"--screenshot={shot}",
               "--window-size=1280,2400", page.resolve().as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert shot.is_file() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    chrome = _chromium()
    if chrome is None:
        return
    dump = subprocess.run([chrome, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
                           "--v=0", "--dump-dom", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    dom = dump.stdout
    for tag in ("<svg", "<table", "<polyline", "<h2"):
        assert dom.count(tag) == text.count(tag) > 0, (tag, dom.count(tag), text.count(tag))
    assert "break-even" in dom.lower() or "pays" in dom.lower()
    console = [ln for ln in dump.stderr.splitlines() if "CONSOLE" in ln and ("ERROR" in ln or "error" in ln)]
    assert console == []


def test_compare_says_when_the_two_runs_differ_in_shape(tmp_path, capsys):
    from specdash.cli import main
    from tests.test_bench import sim_profile

    prof = sim_profile(tmp_path, "shape", time_scale=8.0)
    dirs = []
    for n in (16, 32):
        out = tmp_path / f"runs{n}"
        assert main(["--bench", "--profile", str(prof), "--max-tokens", str(n), "--repeats", "2" if n == 16 else "1",
                     "--out", str(out), "--json"]) == 0
        dirs.append(str(next(out.glob("*-shape"))))
    capsys.readouterr()
    assert main(["compare", *dirs, "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    assert cmp["verdict"] == "not comparable" and cmp["comparable"] is False
    assert cmp["not_comparable"] == ["max_tokens 16 (A) vs 32 (B)"]
    assert any("5 of A's and 0 of B's records found no partner" in n for n in cmp["notes"])


# --- the story on its own ----------------------------------------------------------------------------------


SVG = "{http://www.w3.org/2000/svg}"


def _titles(page: str) -> list[str]:
    return [s.find(f"{SVG}title").text for s in check_page(page)]


def test_a_sweep_dir_alone_tells_the_story_first(dirs):
    """`specdash report SWEEP_DIR`: sweep.json names the baseline directory; the first screen has the verdict,
    the speedup curve with its intervals, TTFT / TPOT / E2E against load and the latency–throughput curve,
    then the per-point table with acceptance before timing — the sweep's own figures."""
    d = dirs["sweep_dir"]
    assert _cli(["report", str(d), "--out", str(d / "alone.html")])[0] == 0
    page = _page(d / "alone.html")
    titles = _titles(page)
    base = dirs["base_dir"].name.split("-", 1)[1]  # the baseline profile's name
    assert titles[:5] == [f"speedup over {base} against concurrency", "TPOT p50 against concurrency",
                          "TTFT p50 against concurrency", "E2E p50 against concurrency",
                          "latency–throughput: TPOT p50 against tok/s"]
    story = page[:page.index("<h2>Detail</h2>")]
    sweep = json.loads((d / "sweep.json").read_text())
    for p in sweep["sweep"]:
        assert f"{p['speedup']:.3f}" in story and f"[{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}]" in story
    assert '<p class="verdict' in story and "Speculation" in story
    if sweep["break_even_concurrency"] is not None:
        assert f"break-even ≈ {sweep['break_even_concurrency']:.3g}" in story
    # both sides' latency lines: the baseline directory was loaded from sweep.json's run_dirs
    spec_runs = {r["concurrency"]: r for r in json.loads((d / "summary.json").read_text())["runs"]}
    base_runs = {r["concurrency"]: r for r in json.loads((dirs["base_dir"] / "summary.json").read_text())["runs"]}
    for c, r in spec_runs.items():
        assert f"{r['tpot_ms']['p50']:.2f} / {base_runs[c]['tpot_ms']['p50']:.2f}" in story
    head = re.search(r"<table>\n<tr>(.*?)</tr>", story).group(1)
    cols = re.findall(r"<th[^>]*>(.*?)</th>", head)
    assert cols.index("accept length") < cols.index("TTFT p50 ms (spec / base)")
    # the speedup chart's band: one polygon, whiskers at each point
    svg0 = check_page(page)[0]
    assert len(svg0.findall(f"{SVG}polygon")) == 1


def test_run_table_puts_acceptance_before_timing_and_adds_e2e_and_rates(dirs):
    assert _cli(["report", str(dirs["single"]), "--out", str(dirs["tmp"] / "cols.html")])[0] == 0
    page = _page(dirs["tmp"] / "cols.html")
    block = page[page.index("<h3>Results</h3>"):]
    cols = re.findall(r"<th[^>]*>(.*?)</th>", re.search(r"<tr>(.*?)</tr>", block).group(1))
    assert cols.index("accept length") < cols.index("tok/s") < cols.index("TTFT p50 ms")
    assert cols.index("server τ") < cols.index("TTFT p50 ms") and "E2E p99 ms" in cols and "requests/s" in cols
    run = json.loads((dirs["single"] / "summary.json").read_text())["runs"][0]
    assert f"{run['e2e_ms']['p50']:.2f}" in block and f"{run['request_throughput']:.2f}" in block


def test_per_position_acceptance_is_shown_when_the_run_has_it(dirs, tmp_path):
    d = tmp_path / "positions"
    shutil.copytree(dirs["single"], d)
    (d / "report.html").unlink(missing_ok=True)
    s = json.loads((d / "summary.json").read_text())
    pos = [{"position": 1, "reached": 200, "accepted": 170, "rate": 0.85},
           {"position": 2, "reached": 170, "accepted": 119, "rate": 0.7},
           {"position": 3, "reached": 119, "accepted": 60, "rate": 60 / 119}]
    s["runs"][0].update(accept_by_position=pos, accept_by_position_source="histogram")
    (d / "summary.json").write_text(json.dumps(s))
    assert _cli(["report", str(d)])[0] == 0
    page = _page(d / "report.html")
    assert "Acceptance by draft position" in page
    for p in pos:
        assert f"<td>{p['position']}</td><td>{p['reached']}</td><td>{p['accepted']}</td><td>{p['rate']:.3f}</td>" \
            in page
    svg = next(s for s in check_page(page) if s.find(f"{SVG}title").text == "acceptance by draft position")
    circles = [c.find(f"{SVG}title").text for c in svg.iter(f"{SVG}circle")]
    assert [c.rsplit("→ ", 1)[1] for c in circles] == ["0.85", "0.7", f"{60 / 119:.4g}"]
    # without the field (a run directory written before it existed): no such section
    plain = tmp_path / "plain"
    shutil.copytree(dirs["single"], plain)
    (plain / "report.html").unlink(missing_ok=True)
    s["runs"][0].pop("accept_by_position")
    s["runs"][0].pop("accept_by_position_source")
    (plain / "summary.json").write_text(json.dumps(s))
    assert _cli(["report", str(plain), "--out", str(tmp_path / "plain.html")])[0] == 0
    assert "Acceptance by draft position" not in _page(tmp_path / "plain.html")


def test_distributions_and_gpu_plots_of_a_sweep(dirs):
    d = dirs["sweep_dir"]
    assert (d / "gpu.jsonl").is_file()  # the simulator's /sim/gpus, read while requests were in flight
    samples = [json.loads(line) for line in (d / "gpu.jsonl").read_text().splitlines()]
    assert samples and {s["concurrency"] for s in samples} <= {1, 2} and all(s["simulated"] for s in samples)
    assert _cli(["report", str(d), "--out", str(d / "dist.html")])[0] == 0
    page = _page(d / "dist.html")
    titles = _titles(page)
    for t in ("TTFT distribution (CDF)", "TPOT distribution (CDF)", "E2E distribution (CDF)", "GPU memory used (MiB)"):
        assert t in titles, t
    assert "GPUs during the run (simulated)" in page and f"{len(samples)} readings" in page
    svg = next(s for s in check_page(page) if s.find(f"{SVG}title").text == "TTFT distribution (CDF)")
    assert svg.findall(f"{SVG}polyline")  # one line per sweep point


def test_report_exports_each_chart_as_svg_and_png(dirs, tmp_path):
    from specdash.bench.svg import browser, page_charts

    d = dirs["sweep_dir"]
    rc, out = _cli(["report", str(d), "--out", str(tmp_path / "p.html"), "--svg", str(tmp_path / "svg")])
    assert rc == 0
    page = _page(tmp_path / "p.html")
    charts = page_charts(page)
    files = sorted((tmp_path / "svg").iterdir())
    assert [f.name for f in files] == [f"{stem}.svg" for stem, _ in charts] and len(files) == len(check_page(page))
    assert f"charts: {len(files)} SVG file(s)" in out
    assert files[0].name == "01-speedup-over-" + dirs["base_dir"].name.split("-", 1)[1].lower() + "-against-concurrency.svg"
    for f, (_, svg) in zip(files, charts):
        assert ET.parse(f).getroot().tag == f"{SVG}svg" and svg in f.read_text()
    (tmp_path / "afile").write_text("x")
    assert _cli(["report", str(d), "--out", str(tmp_path / "q.html"), "--png", str(tmp_path / "afile")])[0] == 2
    if browser() is None:
        try:
            import cairosvg  # noqa: F401
        except (ImportError, OSError):
            pytest.skip("no PNG renderer (CairoSVG or headless Chromium) installed")
    rc, out = _cli(["report", str(d), "--out", str(tmp_path / "q.html"), "--png", str(tmp_path / "png")])
    assert rc == 0
    pngs = sorted((tmp_path / "png").iterdir())
    assert len(pngs) == len(files) and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
