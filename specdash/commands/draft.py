"""``specdash draft fix|selftest``: correct a draft's files, or run its head alone on a sample.

Exit codes (:mod:`specdash.commands.errors`): ``draft fix`` 0 = written, 2 = refused (existing
``--out``, unreadable source, bad ``--hot-token-ids``).  ``draft selftest`` 0 = the head scores
well wired right, 1 = it scores poorly (a training/export problem), 2 = it could not run (no
torch, unreadable draft or sample).  ``--json`` prints only JSON on stdout; messages go to stderr.
"""

from __future__ import annotations

import argparse
import json

from specdash.commands.errors import ExitCode, Parser, run


def draft_command(argv: list[str]) -> int:
    """Entry of ``specdash draft fix|selftest`` (``argv`` after ``draft``); returns the exit code."""
    p = Parser(prog="specdash draft", description="Inspect, fix and self-test draft heads.")
    sub = p.add_subparsers(dest="draft_cmd", required=True)
    add_draft_arguments(sub)
    args = p.parse_args(argv)
    return draft_fix_main(args) if args.draft_cmd == "fix" else draft_selftest_main(args)


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


def draft_fix_main(args: argparse.Namespace) -> int:
    """``specdash draft fix SRC --out DST`` on parsed ``args``; returns the exit code (0/2)."""
    return run("specdash draft fix", lambda: _fix(args), json_output=bool(getattr(args, "json", False)))


def _fix(args: argparse.Namespace) -> int:
    from specdash.eagle3.convert import fix_draft

    res = fix_draft(args.src, args.out, sglang_version=args.sglang_version,
                    d2t_absolute=True if getattr(args, "d2t_absolute", False) else None,
                    hot_token_ids=getattr(args, "hot_token_ids", None),
                    target_vocab_size=getattr(args, "target_vocab_size", None))
    if getattr(args, "json", False):
        print(json.dumps({"src": res.src, "dst": res.dst, "sglang_version": res.version,
                          "changes": [{"kind": c.kind, "detail": c.detail} for c in res.changes]}, indent=2))
    else:
        print(res.render())
    return ExitCode.OK


def draft_selftest_main(args: argparse.Namespace) -> int:
    """``specdash draft selftest DRAFT --sample FILE [--target DIR]`` on parsed ``args``;
    returns the exit code (0 scores well, 1 scores poorly, 2 could not run)."""
    return run("specdash draft selftest", lambda: _selftest(args), json_output=bool(getattr(args, "json", False)))


def _selftest(args: argparse.Namespace) -> int:
    from specdash.eagle3.selftest import run_selftest

    rep = run_selftest(args.draft, args.sample, getattr(args, "target", None),
                       max_positions=getattr(args, "max_positions", 4096))
    if getattr(args, "json", False):
        print(json.dumps(rep.to_json(), indent=2, ensure_ascii=False))
    else:
        print(rep.render())
    return ExitCode.OK if rep.works else ExitCode.FAILED


__all__ = ["add_draft_arguments", "draft_command", "draft_fix_main", "draft_selftest_main"]
