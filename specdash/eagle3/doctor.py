"""Preflight doctor: EAGLE/EAGLE3 checks on a profile before anything is launched.

``run_doctor(profile)`` reads the profile, the draft directory (``config.json`` + safetensors
headers, plus the small ``d2t``/``t2d`` tensors), the target's ``config.json`` + headers, and
judges them against one SGLang release: ``--sglang-version``, then ``[server] sglang_version``,
then ``/server_info.version``, then the installed package, else the newest known
(:data:`specdash.sglang.versions.DEFAULT_VERSION`, "assumed").  Every version-dependent fact
comes from :mod:`specdash.sglang.versions`, SGLang's start-up normalisation of the speculative
flags from :mod:`specdash.sglang.speculative`, its capture facts from :mod:`specdash.sglang.capture`.

This module opens the models (unreadable ones become DRAFT_PATH / CHECKPOINT findings),
resolves the flags and runs the rules of :mod:`specdash.eagle3.rules` in :data:`RULES` order;
each problem becomes a :class:`~specdash.eagle3.findings.Finding` with a stable ``code``, a
``severity``, a ``message`` with the numbers found, ``why`` (the mechanism and its source: the
SGLang file, a public issue or PR) and an exact ``fix``.

Nothing here raises for a bad checkpoint: unreadable inputs become findings, and a rule that
fails on an odd input becomes a CHECKPOINT warning.  Only an unreadable profile raises
:class:`specdash.profile.ProfileError` (the CLI exits 2).
"""

from __future__ import annotations

from pathlib import Path

from specdash.checkpoint.hub import cached_snapshot, is_hub_id
from specdash.checkpoint.reader import CheckpointError, ModelDir, interpret_draft, read_model_dir
from specdash.eagle3.findings import SEVERITIES, DoctorReport
from specdash.eagle3.rules.adaptive import rule_adaptive
from specdash.eagle3.rules.argcheck import rule_argcheck
from specdash.eagle3.rules.aux_layers import rule_aux
from specdash.eagle3.rules.context import RuleContext
from specdash.eagle3.rules.draft import rule_algo, rule_draft_path
from specdash.eagle3.rules.flags import rule_flags
from specdash.eagle3.rules.nodes import rule_gpus, rule_nodes
from specdash.eagle3.rules.quant import rule_quant
from specdash.eagle3.rules.serving import rule_context, rule_dtype, rule_exposed, rule_memory, rule_spec_args
from specdash.eagle3.rules.simulated import rule_simulated
from specdash.eagle3.rules.vocab import rule_vocab
from specdash.eagle3.rules.weights import rule_weight_keys
from specdash.profile import server_flags
from specdash.sglang.adaptive import early_launch
from specdash.sglang.simulate import dummy_weights
from specdash.sglang.speculative import resolve_flags

#: The rules in the order they run (findings are sorted by severity afterwards).
RULES = (rule_flags, rule_gpus, rule_nodes, rule_draft_path, rule_algo, rule_weight_keys, rule_vocab, rule_aux,
         rule_spec_args, rule_adaptive, rule_context, rule_dtype, rule_quant, rule_memory, rule_simulated,
         rule_exposed)


def _open_model(ctx: RuleContext, path: str | None, role: str) -> ModelDir | None:
    """Read a model dir; turn every failure into a DRAFT_PATH / CHECKPOINT finding."""
    if not path:
        return None
    code = "DRAFT_PATH" if role == "draft" else "CHECKPOINT"
    from_hub = False
    if not path.startswith("sim:") and not Path(path).expanduser().exists():
        if is_hub_id(path):
            flag = "--speculative-draft-model-revision" if role == "draft" else "--revision"
            rev = ctx.flags.get(flag)
            hub = cached_snapshot(path, rev if isinstance(rev, str) else None)
            if hub.path is None:
                fetch = f"hf download {path}{f' --revision {hub.revision}' if rev else ''}"
                ctx.add(code, "warning", f"{role} {path!r} is a Hugging Face repo id, and {hub.why}: checks that "
                        f"need its config and tensors were NOT run",
                        "SGLang downloads hub ids at start-up; specdash checks only files on disk, so nothing "
                        "about this checkpoint (architecture, keys, shapes, d2t, aux layers) was checked.",
                        (f"pip install huggingface_hub, then {fetch}" if hub.missing_library else fetch)
                        + " (then run the doctor again: it checks the cached snapshot SGLang will load)",
                        path=path, role=role)
                return None
            from_hub = True
            ctx.add(code, "info", f"{role} {path!r} (a Hugging Face repo id): checked its cached snapshot "
                    f"{hub.path} (revision {hub.revision})",
                    "SGLang loads the same snapshot from the local cache when it is complete.",
                    "nothing to do", path=path, snapshot=str(hub.path), role=role)
            path = str(hub.path)
        else:
            ctx.add(code, "error", f"{role} path {path} does not exist",
                    "SGLang fails at start-up when the model path is neither a directory nor a hub id.",
                    f"fix the {'[speculative] draft_model_path' if role == 'draft' else '[server] model_path'} "
                    f"in the profile", path=path)
            return None
    try:
        md = read_model_dir(path)
    except CheckpointError as exc:
        ctx.add("CHECKPOINT", "error", f"{role} directory cannot be read: {exc}",
                "Without a readable config.json SGLang cannot build the model (and specdash cannot check it).",
                "point the profile at a Hugging Face-style directory (config.json + *.safetensors)",
                path=path, role=role)
        return None
    for note in md.notes:
        ctx.add("CHECKPOINT", "warning", f"{role} {path}: {note}",
                "specdash reads safetensors headers only; tensors it cannot see are not checked.",
                "convert the weights to safetensors (safetensors.torch.save_file)", path=path, role=role)
    if not md.tensors and not md.virtual and _dummy_weights(ctx, role):
        flag = "--load-format" if role == "target" else "--speculative-draft-load-format"
        ctx.add("CHECKPOINT", "info",
                f"{role} {path} has no weight files, as expected: the profile loads it with dummy weights",
                "SGLang's dummy load format fills every parameter with random values (timing runs only: "
                "the output text is meaningless); checks on tensor names, shapes and d2t were skipped. "
                "The draft follows --load-format unless --speculative-draft-load-format is given "
                "(python/sglang/srt/server_args.py).",
                f"drop the dummy {flag} and add the weights to serve real output", path=path, role=role)
    elif not md.tensors and not md.virtual and from_hub:
        ctx.add(code, "warning", f"{role} snapshot {path} in the Hugging Face cache has no weight files yet (an "
                "interrupted download?): checks on tensor names, shapes and d2t were NOT run",
                "SGLang downloads what is missing at start-up; specdash checks only what is on disk.",
                "finish the download (hf download with the same repo id), then run the doctor again",
                path=path, role=role)
    elif not md.tensors and not md.virtual:
        pickles = any("pickle" in n for n in md.notes)
        ctx.add("CHECKPOINT", "warning" if pickles else "error",
                f"{role} {path} has no safetensors tensors" + (" (only pickle checkpoints)" if pickles else ""),
                "Checks on tensor names, shapes and d2t were skipped." if pickles else
                "With no weight files every parameter stays uninitialised (or loading fails).",
                "add model.safetensors (or a sharded set with model.safetensors.index.json)", path=path, role=role)
    return md


def _dummy_weights(ctx: RuleContext, role: str) -> bool:
    """True when SGLang will initialise ``role``'s weights randomly (``--load-format dummy``; the
    draft's own ``--speculative-draft-load-format`` wins, else it inherits ``--load-format``)."""
    return dummy_weights(ctx.flags, role)


def run_doctor(profile, *, sglang_version: str | None = None, server_version: str | None = None,
               gpus: list[dict] | None = None, concurrency: int | None = None, argcheck: bool = False) -> DoctorReport:
    """Run every preflight rule on ``profile`` (a :class:`~specdash.profile.Profile`, a name or a path).

    Args:
        sglang_version: ``--sglang-version`` from the command line (wins over the profile).
        server_version: ``/server_info.version`` of an attached server.
        gpus: ``[{"name": …, "memory_total_mib": …}, …]`` when known (MEMORY rule); None = unknown.
        concurrency: planned concurrent requests (SPEC_ARGS: tree drafting and the CUDA-graph cap under
            concurrency); None = use ``max_running_requests``.
        argcheck: also run SGLang's own argument checks of the exact argv where SGLang is importable
            (ARGCHECK, :mod:`specdash.eagle3.rules.argcheck`; a subprocess of a few seconds).
            :func:`specdash.launch.run_preflight` — the entry of ``specdash doctor`` and of every launch —
            turns it on.

    Returns:
        :class:`~specdash.eagle3.findings.DoctorReport` with the findings sorted by severity.

    Raises:
        specdash.profile.ProfileError: the profile cannot be found, parsed or expanded.
    """
    from specdash.profile import Profile, load_profile

    if not isinstance(profile, Profile):
        profile = load_profile(str(profile))
    profile = profile.expanded()
    version, source = profile.judged_version(cli=sglang_version, server=server_version)
    flags = server_flags(profile)
    raw_words = list(profile.server.extra_args) + (list(profile.speculative.extra_args) if profile.speculative else [])
    env = dict(profile.env)
    ctx = RuleContext(profile, version, source, flags, raw_words, env, None, None, None,  # type: ignore[arg-type]
                      flags.get("--speculative-draft-model-path"), gpus, concurrency)
    ctx.target = _open_model(ctx, str(flags.get("--model-path") or ""), "target")
    spec_on = bool(flags.get("--speculative-algorithm"))
    if spec_on and ctx.draft_path:
        md = _open_model(ctx, str(ctx.draft_path), "draft")
        ctx.draft = interpret_draft(md) if md is not None else None
    # 0.5.14+: --speculative-adaptive fixes top-k / steps / draft tokens before the EAGLE checks
    launch, ctx.adaptive = early_launch(flags, version, env=env)
    ctx.res = resolve_flags(
        launch, version=version, env=env, target_architectures=ctx.target_archs or None,
        draft_vocab_size=ctx.draft.draft_vocab_size if ctx.draft else None,
        target_vocab_size=ctx.target_vocab,
        draft_architectures=ctx.draft.model.config.get("architectures") if ctx.draft else None,
    )
    for rule in RULES + ((rule_argcheck,) if argcheck else ()):
        try:
            rule(ctx)
        except (CheckpointError, OSError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                ArithmeticError) as exc:  # an odd config never becomes a traceback
            ctx.add("CHECKPOINT", "warning", f"check {rule.__name__} could not run: {exc}",
                    "An input had an unexpected form; the remaining checks still ran.",
                    "report this with the draft's config.json", rule=rule.__name__)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    ctx.findings.sort(key=lambda f: order[f.severity])
    return DoctorReport(version, source, ctx.findings, profile.name)


__all__ = ["RULES", "run_doctor"]
