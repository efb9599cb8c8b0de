"""CLI bodies for ``specdash doctor`` and ``specdash draft fix|selftest`` (wired by ``specdash/cli.py``).

Exit codes (CONTRACTS.md "Command line"): ``doctor`` 0 = no error, 1 = an error finding, 2 = the
profile cannot be read.  ``draft fix`` 0 = written, 2 = refused (existing ``--out``, unreadable
source, bad ``--hot-token-ids``).  ``draft selftest`` 0 = the head scores well wired right,
1 = it scores poorly (a training/export problem), 2 = it could not run (no torch, unreadable
draft or sample).  ``--json`` prints only JSON on stdout; messages go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``specdash doctor``."""
    parser.add_argument("--profile", required=True, help="profile name or path")
    parser.add_argument("--json", action="store_true", help="print only the JSON report on stdout")
    parser.add_argument("--sglang-version", metavar="V", default=None,
                        help="judge against this SGLang release (default: profile, installed sglang, else newest known)")
    parser.add_argument("--gpu-memory-mib", type=float, metavar="MIB", default=None,
                        help="memory per GPU for the MEMORY check (default: read through NVML when available)")
    parser.add_argument("--gpus", type=int, metavar="N", default=None,
                        help="number of GPUs with --gpu-memory-mib (default: the profile's tp_size)")
    parser.add_argument("--concurrency", type=int, metavar="N", default=None,
                        help="planned concurrent requests (CUDA-graph / tree checks; default max_running_requests)")


def _detect_gpus(args) -> list[dict] | None:
    if args.gpu_memory_mib:
        return None  # filled in by the caller once tp_size is known
    try:
        from specdash.collect.gpu import read_gpus

        found = read_gpus(processes=False)
    except Exception:
        return None
    return [{"name": g.name, "memory_total_mib": g.memory_total_mib} for g in found] or None


def doctor_main(args) -> int:
    """``specdash doctor``: print the report; exit 0/1/2."""
    from specdash.eagle3.doctor import run_doctor
    from specdash.profile import ProfileError, load_profile

    try:
        profile = load_profile(args.profile)
        profile.expanded()
    except ProfileError as exc:
        print(f"specdash doctor: {exc}", file=sys.stderr)
        return 2
    gpus = _detect_gpus(args)
    if getattr(args, "gpu_memory_mib", None):
        n = args.gpus or profile.server.tp_size
        gpus = [{"name": "GPU", "memory_total_mib": args.gpu_memory_mib}] * max(1, int(n))
    try:
        report = run_doctor(profile, sglang_version=args.sglang_version, gpus=gpus,
                            concurrency=getattr(args, "concurrency", None))
    except ProfileError as exc:
        print(f"specdash doctor: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # e.g. an unparsable --sglang-version
        print(f"specdash doctor: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(report.render())
    return 1 if report.has_errors else 0


def add_draft_arguments(subparsers) -> None:
    """``fix`` and ``selftest`` under ``specdash draft`` (``subparsers`` from ``add_subparsers``)."""
    from specdash.eagle3.selftest import SAMPLE_FORMAT_HELP

    fix = subparsers.add_parser(
        "fix", help="write a corrected copy of a draft directory",
        description="Write a corrected COPY of an EAGLE3 draft (the source is never modified): layers.0.* → "
                    "midlayer.*, aux ids into eagle_config, absolute d2t → offsets, missing draft_vocab_size, "
                    "missing d2t/t2d from --hot-token-ids; other files copied.")
    fix.add_argument("src", metavar="SRC", help="draft directory")
    fix.add_argument("--out", required=True, metavar="DST", help="new directory (must not exist)")
    fix.add_argument("--sglang-version", metavar="V", default=None, help="release whose loader the names must suit")
    fix.add_argument("--d2t-absolute", action="store_true",
                     help="treat d2t as absolute ids and rewrite it to offsets even if detection is unsure")
    fix.add_argument("--hot-token-ids", metavar="FILE", default=None,
                     help="JSON list or .npy of the draft vocabulary's target ids, to add a missing d2t/t2d")
    fix.add_argument("--target-vocab-size", type=int, metavar="N", default=None,
                     help="target vocabulary size (default: the draft config's vocab_size)")
    fix.add_argument("--json", action="store_true", help="print only JSON on stdout")
    st = subparsers.add_parser(
        "selftest", help="run the draft head alone on a recorded training sample",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the draft head alone in torch (SGLang's LlamaForCausalLMEagle3 step 0) on a recorded "
                    "training sample and report top-1 accuracy wired right vs the ways servers wire it wrong. "
                    "Needs torch (pip install 'specdash[drafter]').",
        epilog=SAMPLE_FORMAT_HELP + "\nverdict: a head that scores well here but collapses when served points at "
                                    "wiring; a bad score here points at training.")
    st.add_argument("draft", metavar="DRAFT", help="draft directory")
    st.add_argument("--sample", required=True, metavar="FILE", help="sample safetensors file (format below)")
    st.add_argument("--target", metavar="DIR", default=None, help="target model directory (for embed_tokens)")
    st.add_argument("--max-positions", type=int, default=4096, metavar="N", help="score at most N positions")
    st.add_argument("--json", action="store_true", help="print only JSON on stdout")


def draft_fix_main(args) -> int:
    """``specdash draft fix SRC --out DST``."""
    from specdash.eagle3.convert import ConvertError, fix_draft

    try:
        res = fix_draft(args.src, args.out, sglang_version=args.sglang_version,
                        d2t_absolute=True if getattr(args, "d2t_absolute", False) else None,
                        hot_token_ids=getattr(args, "hot_token_ids", None),
                        target_vocab_size=getattr(args, "target_vocab_size", None))
    except ConvertError as exc:
        print(f"specdash draft fix: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps({"src": res.src, "dst": res.dst, "sglang_version": res.version,
                          "changes": [{"kind": c.kind, "detail": c.detail} for c in res.changes]}, indent=2))
    else:
        print(res.render())
    return 0


def draft_selftest_main(args) -> int:
    """``specdash draft selftest DRAFT --sample FILE [--target DIR]``."""
    from specdash.eagle3.selftest import SelftestError, run_selftest

    try:
        rep = run_selftest(args.draft, args.sample, getattr(args, "target", None),
                           max_positions=getattr(args, "max_positions", 4096))
    except SelftestError as exc:
        print(f"specdash draft selftest: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(rep.to_json(), indent=2, ensure_ascii=False))
    else:
        print(rep.render())
    return 0 if rep.works else 1


__all__ = ["add_doctor_arguments", "add_draft_arguments", "doctor_main", "draft_fix_main", "draft_selftest_main"]
