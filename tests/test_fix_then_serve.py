"""Issue #3 "Done when": a ``layers.0.*`` draft collapses on an SGLang that drops those keys;
``specdash draft fix`` writes a copy that passes the doctor, and the simulator then serves it
with normal acceptance."""

from __future__ import annotations

import httpx

from specdash.checkpoint.tiny import tiny_draft, tiny_target
from specdash.eagle3.convert import fix_draft
from specdash.sim.testing import SimProcess


def _accept_length(url: str, n: int = 4) -> float:
    tokens = verify = 0
    with httpx.Client(timeout=60) as c:
        for i in range(n):
            r = c.post(url + "/generate", json={"text": f"prompt {i} about sorting lists",
                                                "sampling_params": {"max_new_tokens": 200, "temperature": 0,
                                                                    "ignore_eos": True}}).json()
            meta = r["meta_info"]
            tokens += meta["completion_tokens"]
            verify += meta["spec_verify_ct"]
    return tokens / verify


def _serve(target, draft) -> float:
    args = ["--model-path", str(target), "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
            str(draft), "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4", "--sim-scenario", "healthy", "--time-scale", "20",
            "--sim-sglang-version", "0.5.10"]
    with SimProcess(args) as sim:
        return _accept_length(sim.url)


def test_fixed_copy_serves_with_normal_acceptance(tmp_path):
    target = tiny_target(tmp_path / "target")
    src = tiny_draft(tmp_path / "src", layer_prefix="layers.0")
    broken = _serve(target, src)
    assert broken < 1.1                       # the trained layer was dropped: nothing is accepted
    fix_draft(src, tmp_path / "fixed", sglang_version="0.5.10")
    fixed = _serve(target, tmp_path / "fixed")
    assert fixed > 2.0                        # healthy scenario: τ ≈ 2.8 for a (3, 1, 4) chain
