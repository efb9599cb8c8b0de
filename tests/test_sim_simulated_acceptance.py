"""The simulator's SGLANG_SIMULATE_ACC_LEN: every verify round accepts min(L, steps + 1) tokens, L the floor
or ceiling of the value matching its mean (SGLang's ``srt/speculative/spec_utils.py``), whatever the draft —
the figures the 8B-shaped testbed gave on real SGLang 0.5.14 (accept length 2.994 at steps 3 with L 3.0,
2.000 at steps 1)."""

from __future__ import annotations

import httpx
import pytest

from specdash.sim.testing import SimProcess

BASE = ["--model-path", "sim:llama-3.1-8b", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
        "sim:llama-3.1-8b-eagle3", "--speculative-eagle-topk", "1", "--sim-scenario", "healthy", "--time-scale", "8"]


def accept_length(steps: int, acc_len: str | None) -> float:
    env = {"SGLANG_SIMULATE_ACC_LEN": acc_len} if acc_len is not None else {}
    args = [*BASE, "--speculative-num-steps", str(steps), "--speculative-num-draft-tokens", str(steps + 1)]
    with SimProcess(args, env=env) as sim:
        body = {"text": "Tell a long story.", "sampling_params": {"temperature": 0, "max_new_tokens": 2000,
                                                                   "ignore_eos": True}}
        meta = httpx.post(sim.url + "/generate", json=body, timeout=60).json()["meta_info"]
        return meta["completion_tokens"] / meta["spec_verify_ct"]


@pytest.mark.parametrize(("steps", "acc_len", "want"), [(3, "3.0", 3.0), (1, "3.0", 2.0), (7, "2.5", 2.5)])
def test_simulated_acceptance_is_min_of_l_and_steps_plus_one(steps, acc_len, want):
    assert accept_length(steps, acc_len) == pytest.approx(want, abs=0.05 if acc_len == "2.5" else 0.02)


def test_without_the_variable_the_draft_decides():
    assert accept_length(7, None) != pytest.approx(2.5, abs=0.05)
