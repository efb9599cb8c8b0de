"""Profiles, suites and an interleave config for checking SGLang's adaptive speculation on the lent H200.

Writes into ``WORKDIR`` (absolute paths inside, since a profile's ``extra_args`` are passed as they
are): ``interleave-1-3.json`` (from :func:`specdash.sglang.adaptive.interleave_config`: slot "1"
alternates steps 1 and 3 every few verify batches), ``tiny-interleave.toml`` and
``tiny-adaptive-default.toml`` (copies of ``profiles/h200-tiny-eagle3.toml`` with
``--speculative-adaptive``, ``--enable-metrics`` and SGLang's device timer
``SGLANG_ENABLE_METRICS_DEVICE_TIMER=1``; the first with the interleave config and
``--decode-log-interval 1``, the second with SGLang 0.5.14's default config and CUDA graphs up to
batch 32), and the suites ``suite-c1.toml`` (5 × 1024 tokens, one stream) and ``suite-c32.toml``
(64 × 256 tokens at concurrency 32, where 0.5.14's default config routes batches to slot "32" =
steps [0, 1]).

Usage: ``python benchmarks/h200/adaptive_setup.py WORKDIR [--version 0.5.14]``; prints the paths.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

import tomlkit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specdash.profile import load_profile, load_suite  # noqa: E402  (after the sys.path line)
from specdash.sglang.adaptive import interleave_config  # noqa: E402


def _without(args: list[str], flag: str) -> list[str]:
    """``args`` without ``flag`` and its value."""
    out, skip = [], False
    for w in args:
        if skip:
            skip = False
            continue
        if w == flag:
            skip = True
            continue
        out.append(w)
    return out


def _profile(base: dict, name: str, extra: list[str], description: str) -> dict:
    data = json.loads(json.dumps(base))
    data["name"], data["description"] = name, description
    data["server"]["enable_metrics"] = True
    data["server"]["extra_args"] = _without(data["server"]["extra_args"], "--cuda-graph-max-bs-decode") + extra
    data["env"]["SGLANG_ENABLE_METRICS_DEVICE_TIMER"] = "1"
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--version", default="0.5.14")
    a = ap.parse_args(argv)
    w = a.workdir.resolve()
    w.mkdir(parents=True, exist_ok=True)
    cfg = w / "interleave-1-3.json"
    cfg.write_text(json.dumps(interleave_config(1, 3, a.version)))
    base = tomllib.loads((ROOT / "profiles" / "h200-tiny-eagle3.toml").read_text())
    profiles = {
        "tiny-interleave": _profile(
            base, "tiny-interleave",
            ["--cuda-graph-max-bs-decode", "8", "--speculative-adaptive", "--speculative-adaptive-config", str(cfg),
             "--decode-log-interval", "1"],
            "H200 tiny models: adaptive tiers steps 1 and 3 interleaved at the same load (one launch)"),
        "tiny-adaptive-default": _profile(
            base, "tiny-adaptive-default",
            ["--cuda-graph-max-bs-decode", "32", "--speculative-adaptive"],
            "H200 tiny models: SGLang's default adaptive config (slot 32 runs steps 0 or 1)"),
    }
    for name, data in profiles.items():
        path = w / f"{name}.toml"
        path.write_text("# Written by benchmarks/h200/adaptive_setup.py from profiles/h200-tiny-eagle3.toml\n"
                        + tomlkit.dumps(data))
        load_profile(str(path))  # validates
        print(path)
    suite = tomllib.loads((ROOT / "profiles" / "suites" / "h200-tiny.toml").read_text())
    c1 = json.loads(json.dumps(suite))
    c1["suite"].update(name="adaptive-c1", repeats=1, warmup=1, concurrency=1)
    c32 = json.loads(json.dumps(suite))
    prompts = suite["prompts"]
    c32["suite"].update(name="adaptive-c32", repeats=1, warmup=1, concurrency=32, max_tokens=256)
    c32["prompts"] = [dict(prompts[i % len(prompts)], text=f"{prompts[i % len(prompts)]['text']} ({i})")
                      for i in range(64)]
    for name, data in (("suite-c1", c1), ("suite-c32", c32)):
        path = w / f"{name}.toml"
        path.write_text(tomlkit.dumps(data))
        load_suite(str(path))
        print(path)
    print(cfg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
