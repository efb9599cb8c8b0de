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
    # SGLang refuses prompt + max_tokens ≥ context (TokenizerManager._validate_one_request): 974 + 8 at 982
    assert context_problems(suite, prof, 982, 64).too_long == [(1, 974, 8)]
    assert context_problems(suite, prof, 983, 64).too_long == []
    # with speculation the draft slots count too: 974 + 8 + 4 reaches 986
    chk = context_problems(suite, prof, 986, 64, reserve=4)
    assert chk.too_long == [(1, 974, 8)] and "974 tokens + max_tokens 8 + 4 draft slots = 986" in chk.message("c")
    assert context_problems(suite, prof, 987, 64, reserve=4).too_long == []


def test_a_run_with_a_prompt_past_the_context_is_refused_before_sending(tmp_path, capsys):
    prof = sim_profile(tmp_path, "ctx-small", time_scale=8.0)
    prof.write_text(prof.read_text().replace('port = 0', 'port = 0\ncontext_length = 512'))
    rc = main(["--bench", "--profile", str(prof), "--suite", str(_suite(tmp_path)), "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "do not fit the server's context length of 512 tokens" in err and "no request was sent" in err
    assert "prompt 1 (974 tokens + max_tokens 64 + 4 draft slots = 1,042)" in err
    run_dir = next((tmp_path / "runs").glob("*-ctx-small"))
    man = json.loads((run_dir / "manifest.json").read_text())
    assert man["context_check"] == {"context_length": 512, "source": "/server_info context_length",
                                    "reserved_draft_slots": 4, "exact": True, "too_long": [[1, 974, 64]]}
    recs = run_dir / "requests.jsonl"
    assert not recs.exists() or recs.read_text().strip() == ""


# --- issue #23: a default server (no --context-length) is checked against the model's own limit -------------
def test_sglang_derivation_of_the_context_length():
    """``get_context_length`` of SGLang's ``srt/utils/hf_transformers_utils.py``: key order, rope factor."""
    from specdash.checkpoint.reader import derived_context_length as d

    assert d({"max_position_embeddings": 4096}) == 4096
    assert d({"max_position_embeddings": 4096, "seq_length": 2048}) == 2048  # seq_length comes first
    assert d({"max_position_embeddings": 8192, "rope_scaling": {"type": "yarn", "factor": 4.0}}) == 32768
    assert d({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}) == 131072
    assert d({"max_position_embeddings": 32768, "rope_scaling": {"factor": 4.0,
                                                                 "original_max_position_embeddings": 8192}}) == 32768
    assert d({"text_config": {"max_position_embeddings": 8192}, "max_position_embeddings": 99}) == 8192
    assert d({"hidden_size": 64}) == 2048  # SGLang's default
    assert d(None) is None and d({"max_position_embeddings": "4k"}) is None


def test_the_golden_default_server_is_checked(golden):
    """Real SGLang 0.5.14 leaves ``/server_info`` context_length null without --context-length; its
    ``max_req_input_len`` (4090 = 4096 − 1 − 5) gives the 4,096 its log line reports (``context_len=4096``),
    and an EAGLE3 server reserves its draft tokens."""
    from specdash.bench.context import SCHEDULER_SOURCE, context_limit, draft_reserve

    base = json.loads((golden / "runs" / "baseline_nospec" / "server_info.json").read_text())
    eagle = json.loads((golden / "runs" / "eagle3_aligned_warm" / "server_info.json").read_text())
    assert base["context_length"] is None
    assert context_limit(base) == (4096, SCHEDULER_SOURCE)
    assert "context_len=4096" in (golden / "runs" / "baseline_nospec" / "server.log").read_text()
    assert draft_reserve(base) == 0 and draft_reserve(eagle) == eagle["speculative_num_draft_tokens"] == 4


def test_a_default_server_is_checked_against_the_models_config(tmp_path, capsys):
    """A simulator launched on a target directory whose config says 1,000 positions and no --context-length
    (``/server_info`` context_length null, as real SGLang): the 974-token prompt with max_tokens 64 is refused
    before any request, the limit read from the model's config.json."""
    from specdash.checkpoint.tiny import tiny_target

    target = tmp_path / "target"
    tiny_target(target, max_pos=1000)
    prof = sim_profile(tmp_path, "ctx-default", spec=None, model=str(target))
    rc = main(["--bench", "--profile", str(prof), "--suite", str(_suite(tmp_path)), "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "do not fit the server's context length of 1,000 tokens (the model's config.json" in err
    assert "prompt 1 (974 tokens + max_tokens 64 = 1,038)" in err and "no request was sent" in err
    run_dir = next((tmp_path / "runs").glob("*-ctx-default"))
    man = json.loads((run_dir / "manifest.json").read_text())
    assert man["context_check"]["context_length"] == 1000 and man["context_check"]["reserved_draft_slots"] == 0
    recs = run_dir / "requests.jsonl"
    assert not recs.exists() or recs.read_text().strip() == ""
