"""The simulator's ``--speculative-adaptive`` against the real 0.5.14 recordings
(``../shared/sglang/golden/runs/adaptive_default_c1_c16_c32``, ``adaptive_interleave_1_3``)."""

from __future__ import annotations

import json
import re

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specdash.sglang import adaptive as A
from specdash.sim.testing import SimProcess

TINY = ["--model-path", "sim:tiny-llama", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
        "sim:tiny-llama-eagle3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--speculative-adaptive", "--mem-fraction-static", "0.5",
        "--sim-scenario", "tiny-h200", "--time-scale", "4"]
STAMP = r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] "
DECODE_TIMER = re.compile(STAMP + r"Decode batch, #running-req: (\d+), .*accept len: (\d+\.\d\d), accept rate: "
                          r"(\d+\.\d\d), cuda graph: True, gen throughput \(token/s\): \d+\.\d\d, #queue-req: \d+, "
                          r"fwd occupancy: \d+\.\d\d%$")


def generate(url: str, text, n: int):
    body = {"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": n, "ignore_eos": True}}
    r = httpx.post(url + "/generate", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def messages(lines: list[str]) -> list[str]:
    return [ln.split("] ", 1)[1] for ln in lines if ln.startswith("[") and "] " in ln]


def forward_seconds(text: str) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "sglang:forward_execution_seconds_total":
                out[s.labels["category"]] = s.value
    return out


def gauge(text: str, name: str) -> float | None:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                return s.value
    return None


def test_default_config_switches_the_slot_at_concurrency_32(golden):
    """0.5.14's default config at c1, c16, c32 (golden adaptive_default_c1_c16_c32)."""
    real = golden / "runs" / "adaptive_default_c1_c16_c32"
    env = {"SGLANG_ENABLE_METRICS_DEVICE_TIMER": "1"}
    with SimProcess([*TINY, "--cuda-graph-max-bs-decode", "32", "--enable-metrics", "--sim-sglang-version", "0.5.14"],
                    env=env) as sim:
        start = messages(sim.lines)
        ours = [m for m in start if m.startswith(("AdaptiveSpeculativeParams", "Built adaptive"))]
        assert ours[0] == "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 7]"
        assert [A.parse_adaptive_line(m).new_steps for m in ours[1:]] == [0, 1, 7]  # as the real server built
        first = httpx.get(sim.url + "/metrics").text
        assert gauge(first, "sglang:spec_num_steps") == 0.0  # before the first decode log, as in metrics_a0
        assert set(forward_seconds(first)) == {"extend", "eagle_draft", "target_verify", "eagle_draft_extend"}

        c1 = generate(sim.url, "Explain general relativity.", 96)
        assert c1["meta_info"]["spec_accept_rate"] == 1 / 3
        c16 = generate(sim.url, [f"prompt number {i}" for i in range(16)], 96)
        assert all(x["meta_info"]["spec_accept_length"] == 2.0 for x in c16)
        assert not [m for m in messages(sim.lines) if m.startswith("Switch adaptive")]  # slot "8" holds at 3
        c32 = generate(sim.url, [f"another prompt {i}" for i in range(32)], 96)
        # per-request accept rate keeps the launch draft tokens (1 of 3) even at steps 1 (golden a-c32.json)
        assert json.loads((real / "a-c32.json").read_text())["accept_rate_meta_mean"] == 1 / 3
        assert all(x["meta_info"]["spec_accept_rate"] == 1 / 3 for x in c32)

        msgs = messages(sim.lines)
        switches = [m for m in msgs if m.startswith("Switch adaptive")]
        real_switch = [m for m in messages((real / "adaptive_log_lines.txt").read_text().splitlines())
                       if m.startswith("Switch adaptive")]
        assert switches[0] == real_switch[0] == "Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2"
        assert not [m for m in msgs if m.startswith("Adaptive spec params updated")]  # routing, not the EMA
        decode = [DECODE_TIMER.match(ln) for ln in sim.lines if "Decode batch" in ln]
        assert decode and all(decode)
        assert {(d.group(1), d.group(3)) for d in decode if d.group(1) == "32"} == {("32", "1.00")}
        assert {d.group(3) for d in decode if d.group(1) in ("1", "16")} == {"0.33"}

        info = httpx.get(sim.url + "/server_info").json()
        st = info["internal_states"][0]
        assert info["speculative_num_steps"] == 3 and info["speculative_adaptive"] is True
        assert (st["speculative_num_steps"], st["speculative_num_draft_tokens"]) == (1, 2)
        assert st["max_speculative_num_draft_tokens"] == 8
        tier = A.read_internal_state(info)
        assert tier.switched and tier.current_steps == 1

        text = httpx.get(sim.url + "/metrics").text
        assert gauge(text, "sglang:spec_num_steps") == 1.0 and gauge(text, "sglang:spec_num_draft_tokens") == 2.0
        assert gauge(text, "sglang:spec_accept_rate") == 1.0
        secs = forward_seconds(text)
        assert secs["target_verify"] > secs["eagle_draft"] > 0 and secs["eagle_draft_extend"] > 0

        truth = httpx.get(sim.url + "/sim/truth?records=0").json()
        tiers = {t["speculative_num_steps"]: t for t in truth["tiers"]}
        assert set(tiers) == {1, 3}
        assert tiers[3]["accept_rate"] == 1 / 3 and tiers[1]["accept_rate"] == 1.0
        assert tiers[1]["accept_length"] == tiers[3]["accept_length"] == 2.0
        assert tiers[1]["verify_rounds"] == 32 * 48  # the c32 batch, 96 tokens at 2 per round
        assert tiers[3]["verify_rounds"] == 48 + 16 * 48
        assert abs(sum(t["share"] for t in tiers.values()) - 1.0) < 1e-9
        # decode speed per tier on the model clock (tokens / the rounds' planned seconds, which load cannot
        # stretch): steps 1 at batch 32 beats steps 3 at batch 1-16
        planned = {s: t["output_tokens"] / t["planned_s"] for s, t in tiers.items()}
        assert planned[1] > planned[3] > 0 and all(t["output_tok_s"] > 0 for t in tiers.values())
        assert truth["adaptive"]["enabled"] and truth["adaptive"]["switches"] == 1
        assert truth["adaptive"]["slots"]["32"]["current_steps"] == 1

        # /set_internal_state cannot change the steps, and 0.5.14 still answers [true]
        r = httpx.post(sim.url + "/set_internal_state", json={"server_args": {"speculative_num_steps": 5}})
        assert r.json() == json.loads((real / "set_internal_state_num_steps_response.json").read_text()) == [True]
        real_log = (real / "set_internal_state_log.txt").read_text().splitlines()
        assert messages(real_log)[0] in messages(sim.lines)
        assert httpx.get(sim.url + "/server_info").json()["internal_states"][0]["speculative_num_steps"] == 1


def test_interleave_config_alternates_two_tiers_in_one_launch(golden, tmp_path):
    """golden adaptive_interleave_1_3: steps 1 <-> 3 every 3 verify batches, one Decode line per iteration."""
    cfg = tmp_path / "interleave.json"
    cfg.write_text(json.dumps(A.interleave_config(1, 3, "0.5.14")))
    args = [*TINY, "--cuda-graph-max-bs-decode", "8", "--decode-log-interval", "1", "--speculative-adaptive-config",
            str(cfg), "--sim-sglang-version", "0.5.14"]
    with SimProcess(args) as sim:
        generate(sim.url, "Describe photosynthesis step by step.", 120)
        msgs = messages(sim.wait_for_lines(
            lambda ls: len([m for m in messages(ls) if m.startswith("Switch adaptive")]) >= 10))
        assert "Built adaptive runtime state steps=1" in next(m for m in msgs if m.startswith("Built"))
        assert len([m for m in msgs if m.startswith("Built")]) == 1
        ours = [m for m in msgs if m.startswith(("Adaptive spec params updated", "Switch adaptive"))]
        real = [m for m in messages((golden / "runs" / "adaptive_interleave_1_3" / "adaptive_log_lines.txt")
                                    .read_text().splitlines())
                if m.startswith(("Adaptive spec params updated", "Switch adaptive"))]
        assert len(ours) >= 30 and ours == real[:len(ours)]
        # three decode lines per tier, the accept rate telling which ran (0.33 at steps 3, 1.00 at steps 1)
        rates = []
        for m in msgs:
            if m.startswith("Decode batch"):
                rates.append(re.search(r"accept rate: (\d\.\d\d)", m).group(1))
            elif m.startswith("Switch adaptive"):
                rates.append("|")
        runs = "".join("3" if r == "0.33" else "1" if r == "1.00" else r for r in rates).split("|")
        assert all(set(x) == {"1"} and len(x) == 3 for x in runs[1:-1:2])
        assert all(set(x) == {"3"} and len(x) == 3 for x in runs[2:-1:2])
        truth = httpx.get(sim.url + "/sim/truth?records=0").json()
        tiers = {t["speculative_num_steps"]: t for t in truth["tiers"]}
        assert set(tiers) == {1, 3} and abs(tiers[1]["share"] - 0.5) < 0.1
        assert tiers[1]["accept_rate"] == 1.0 and tiers[3]["accept_rate"] == 1 / 3
        assert tiers[1]["busy_s"] > 0 and tiers[3]["busy_s"] > 0
        # the scenario's cost model: a steps-3 round costs more than a steps-1 round
        assert tiers[3]["planned_s"] / tiers[3]["batches"] > tiers[1]["planned_s"] / tiers[1]["batches"]  # the plan: load-free
        assert truth["adaptive"]["switches"] == len([m for m in ours if m.startswith("Switch")])


def test_release_differences_flat_keyed_and_set_internal_state(tmp_path):
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"candidate_steps": [1, 3]}))
    keyed = tmp_path / "keyed.json"
    keyed.write_text(json.dumps({"1": {"candidate_steps": [1, 3]}}))
    # 0.5.14: a flat file is a start-up ValueError
    sim = SimProcess([*TINY, "--speculative-adaptive-config", str(flat), "--sim-sglang-version", "0.5.14"],
                     wait_ready=False).start()
    assert sim.wait(30) == 1
    assert any("ValueError: speculative_adaptive_config must contain at least one integer-string BS key" in ln
               for ln in sim.lines)
    # 0.5.12: the keyed file is silently ignored (defaults [1, 3, 7]); no batch-size routing
    with SimProcess([*TINY, "--speculative-adaptive-config", str(keyed), "--sim-sglang-version", "0.5.12"]) as sim:
        assert "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 7]" in messages(sim.lines)
        truth = httpx.get(sim.url + "/sim/truth?records=0").json()["adaptive"]
        assert truth["enabled"] and truth["config"]["ignored"] and not truth["config"]["keyed"]
    # 0.5.23: slot "1" has four tiers, and /set_internal_state answers honestly
    with SimProcess([*TINY, "--sim-sglang-version", "0.5.23"]) as sim:
        assert "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]" in messages(sim.lines)
        r = httpx.post(sim.url + "/set_internal_state", json={"server_args": {"speculative_num_steps": 5}})
        assert r.json() == [False]
        ok = httpx.post(sim.url + "/set_internal_state",
                        json={"server_args": {"speculative_accept_threshold_single": 0.9}})
        assert ok.json() == [True]
        info = httpx.get(sim.url + "/server_info").json()
        assert info["internal_states"][0]["speculative_accept_threshold_single"] == 0.9
        assert info["speculative_accept_threshold_single"] == 1.0
    # topk > 1: adaptive is turned off with SGLang's warning and the launch runs as given
    args = [a if a != "1" else "2" for a in TINY]  # --speculative-eagle-topk 2
    with SimProcess([*args, "--sim-sglang-version", "0.5.14"]) as sim:
        assert ("speculative_adaptive disabled: speculative_eagle_topk=2 (only topk=1 is supported). Falling back to "
                "static speculative params.") in messages(sim.lines)
        info = httpx.get(sim.url + "/server_info").json()
        assert info["speculative_adaptive"] is False and info["speculative_eagle_topk"] == 2
        assert httpx.get(sim.url + "/sim/truth?records=0").json()["tiers"] is None
