"""Prompts that cannot fit the server's context are found before any request is sent (issue #13)."""

from __future__ import annotations

import json

from specdash.bench.context import context_problems
from specdash.cli import main
from specdash.profile import load_profile, parse_suite
from specdash.profile.datasets import sim_count
from tests.test_bench import sim_profile

LONG = "word " * 700   # 3,500 characters: 1 + ceil(3500 / 3.6) = 974 tokens on the simulator


def _suite(tmp_path, max_tokens=64):
    p = tmp_path / "s.toml"
    p.write_text(f'[suite]\nname = "ctx"\nmax_tokens = {max_tokens}\nwarmup = 0\n'
                 f'[[prompts]]\ntext = "short prompt"\n[[prompts]]\ntext = "{LONG}"\n')
    return p


def test_the_check_counts_with_the_targets_rule(tmp_path):
    prof = load_profile(str(sim_profile(tmp_path, "c", time_scale=8.0)))
    suite = parse_suite({"suite": {"name": "ctx", "max_tokens": 64},
                         "prompts": [{"text": "short prompt"}, {"text": LONG, "max_tokens": 8}]})
    assert sim_count(LONG) == 974
    chk = context_problems(suite, prof, 1000, 64)
    assert chk.exact and chk.method == "simulator" and chk.too_long == []   # 974 + 8 fits 1,000
    chk = context_problems(suite, prof, 980, 64)
    assert chk.too_long == [(1, 974, 8)]
    assert "prompt 1 (974 tokens + max_tokens 8 = 982)" in chk.message("ctx")
    assert context_problems(suite, prof, None, 64) is None


def test_a_run_with_a_prompt_past_the_context_is_refused_before_sending(tmp_path, capsys):
    prof = sim_profile(tmp_path, "ctx-small", time_scale=8.0)
    prof.write_text(prof.read_text().replace('port = 0', 'port = 0\ncontext_length = 512'))
    rc = main(["--bench", "--profile", str(prof), "--suite", str(_suite(tmp_path)), "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "do not fit the server's context length of 512 tokens" in err and "no request was sent" in err
    assert "prompt 1 (974 tokens + max_tokens 64 = 1,038)" in err
    run_dir = next((tmp_path / "runs").glob("*-ctx-small"))
    man = json.loads((run_dir / "manifest.json").read_text())
    assert man["context_check"] == {"context_length": 512, "exact": True, "too_long": [[1, 974, 64]]}
    recs = run_dir / "requests.jsonl"
    assert not recs.exists() or recs.read_text().strip() == ""
