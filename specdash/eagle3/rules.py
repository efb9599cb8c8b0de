"""Preflight doctor: EAGLE/EAGLE3 checks on a profile before anything is launched.

``run_doctor(profile)`` reads the profile, the draft directory (``config.json`` + safetensors
headers, plus the small ``d2t``/``t2d`` tensors), the target's ``config.json`` + headers, and
judges them against one SGLang release (CONTRACTS.md "Reference versions": ``--sglang-version``,
then ``[server] sglang_version``, then ``/server_info.version``, then the installed package, else
0.5.23 "assumed").  Every version-dependent fact comes from :mod:`specdash.sglang.versions`;
SGLang's start-up normalisation of the speculative flags from :mod:`specdash.sglang.speculative`.

Each problem becomes a :class:`Finding` with a stable ``code``, a ``severity`` (``error`` =
SGLang will refuse to start or the head cannot work; ``warning`` = it runs, probably worse than
intended; ``info`` = context), a ``message`` with the numbers found, ``why`` (the mechanism,
with its source: ``../shared/sglang/FACTS.md`` §, SGLang file, public case id, PR) and an exact
``fix``.  Codes:

==============  ===========================================================================
ALGO_MISMATCH   head type vs ``--speculative-algorithm`` (EAGLE3 head served with EAGLE: C01)
WEIGHT_KEYS     tensor names the judged release's loader drops silently (``layers.0.*`` before
                0.5.12, unknown prefixes, ``input_norm`` before 0.5.17)
MISSING_WEIGHT  parameters no tensor provides (fc, lm_head when ``draft_vocab_size`` is set: C05,
                layer parts, norms) → uninitialised at serve time
WEIGHT_SHAPE    a tensor whose shape differs from what the config builds → start-up fails
VOCAB_MAP       d2t/t2d/lm_head vs draft and target vocabularies (C06, C08)
AUX_LAYERS      which target layers SGLang will capture vs what the head expects (C03, FACTS §7)
SPEC_ARGS       rejections and silent adjustments of the speculative flags (C12, C17, C22)
CONTEXT_LEN     draft ``max_position_embeddings`` vs serving context (C16, FACTS §6 step 12)
DTYPE           draft/target dtypes (``--dtype auto`` runs a float32 draft in float16)
DRAFT_PATH      missing draft path (C13) or a path that does not exist
CHECKPOINT      a directory that cannot be read, pickle-only weights, missing shards
FLAG            flags the judged release does not accept (argparse prefix rules: exit 2)
MEMORY          weights vs ``mem_fraction_static`` × GPU memory (C20)
==============  ===========================================================================

Nothing here raises for a bad checkpoint: unreadable inputs become findings.  Only an
unreadable profile raises :class:`specdash.profile.ProfileError` (the CLI exits 2).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specdash.checkpoint.layout import EAGLE3_ARCHS, EAGLE3_LAYER_PARTS
from specdash.checkpoint.reader import (
    CheckpointError,
    DraftInfo,
    ModelDir,
    interpret_draft,
    read_model_dir,
)
from specdash.profile import server_flags
from specdash.sglang.speculative import EAGLE_FAMILY, SpecResolution, resolve_flags
from specdash.sglang.versions import (
    DEFAULT_VERSION,
    eagle3_param_for_key,
    flag_replacements,
    flag_versions,
    flags_version_for,
    has_feature,
    known_flags,
    next_flags_version,
    parse_version,
)

SEVERITIES = ("error", "warning", "info")

#: Draft architectures SGLang has an EAGLE3 model class for (``EntryClass`` of
#: ``srt/models/llama_eagle3.py`` and, from 0.5.14, ``kimi_k25_eagle3.py``).
SGLANG_EAGLE3_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")
#: EAGLE-2 heads (fc over concat(embeds, hidden) = 2 × hidden): ``llama_eagle.py`` & co.
EAGLE2_ARCHS = ("LlamaForCausalLMEagle", "Qwen2ForCausalLMEagle", "MistralForCausalLMEagle",
                "MistralLarge3ForCausalLMEagle", "EagleSpeculator")
#: Targets whose checkpoint bundles MTP/draft weights: without a draft path SGLang uses the
#: target path as the draft (FACTS.md §6 step 7).
BUNDLED_MTP_PREFIXES = ("DeepseekV3", "DeepseekV32", "DeepseekV4", "Glm4Moe", "GlmMoeDsa", "BailingMoe",
                        "MistralLarge3", "Pixtral", "HYV3", "HYV4", "Qwen4Exp")
#: Target families implementing ``set_eagle3_layers_to_capture`` in 0.5.23 (FACTS.md §7).
CAPTURE_PREFIXES = ("Llama", "Qwen2", "Qwen3", "Deepseek", "KimiK25", "Glm4Moe", "Glm5", "GptOss", "Gemma3",
                    "Gemma4", "MiniMaxM2", "MiniMaxM3", "BailingMoe", "Exaone", "Apertus", "LongcatFlash",
                    "Mllama4", "Llama4", "MindSpore")
#: Tensor-name prefixes other exporters put in front of SGLang's names.
_FOREIGN_PREFIXES = ("module.", "draft_model.", "draft.", "eagle.", "eagle3.", "speculator.", "model.",
                     "transformer.", "decoder.")
_NORM_PARTS = ("input_layernorm.weight", "post_attention_layernorm.weight", "hidden_norm.weight")
_CTX_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


@dataclass
class Finding:
    """One diagnosis (CONTRACTS.md "JSON shapes").

    ``code``: stable identifier (module docstring); ``severity``: ``error`` | ``warning`` |
    ``info``; ``message``: what was found, with numbers; ``why``: the mechanism and its source;
    ``fix``: the exact change; ``evidence``: machine-readable numbers, names, shapes.
    """

    code: str
    severity: str
    message: str
    why: str = ""
    fix: str = ""
    evidence: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

    def to_json(self) -> dict:
        """The finding as CONTRACTS.md's JSON object (evidence made JSON-safe)."""
        return {"code": self.code, "severity": self.severity, "message": self.message, "why": self.why,
                "fix": self.fix, "evidence": _jsonable(self.evidence)}


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def render_findings(findings: list[Finding], header: str = "") -> str:
    """Plain text: findings grouped by severity, each with its why and fix."""
    lines = [header] if header else []
    titles = {"error": "ERRORS", "warning": "WARNINGS", "info": "INFO"}
    for sev in SEVERITIES:
        group = [f for f in findings if f.severity == sev]
        if not group:
            continue
        lines.append("")
        lines.append(f"{titles[sev]} ({len(group)})")
        for f in group:
            lines.append(f"  [{f.code}] {f.message}")
            if f.why:
                lines.append(f"      why: {f.why}")
            if f.fix:
                lines.append(f"      fix: {f.fix}")
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    lines.append("")
    lines.append(f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info")
    return "\n".join(lines)


@dataclass
class DoctorReport:
    """The doctor's result: the release judged against, where that choice came from, findings."""

    sglang_version: str
    version_source: str
    findings: list[Finding] = field(default_factory=list)
    profile_name: str | None = None

    @property
    def has_errors(self) -> bool:
        """True when any finding is an error (``specdash doctor`` exits 1)."""
        return any(f.severity == "error" for f in self.findings)

    def codes(self, severity: str | None = None) -> list[str]:
        """Codes of the findings (optionally only one severity), in order."""
        return [f.code for f in self.findings if severity is None or f.severity == severity]

    def to_json(self) -> dict:
        """CONTRACTS.md's doctor JSON."""
        return {"sglang_version": self.sglang_version, "version_source": self.version_source,
                "findings": [f.to_json() for f in self.findings]}

    def render(self) -> str:
        """Plain-text report grouped by severity."""
        src = {"cli": "--sglang-version", "profile": "[server] sglang_version", "server": "/server_info.version",
               "installed": "installed sglang package", "assumed": "assumed: newest known"}
        name = f"profile {self.profile_name} — " if self.profile_name else ""
        head = f"specdash doctor — {name}judged against SGLang {self.sglang_version} " \
               f"({src.get(self.version_source, self.version_source)})"
        if not self.findings:
            return head + "\n\nno findings."
        return render_findings(self.findings, head)


# --- context --------------------------------------------------------------------------------------


@dataclass
class _Ctx:
    profile: Any
    version: str
    source: str
    flags: dict
    raw_words: list[str]
    env: dict
    res: SpecResolution
    target: ModelDir | None
    draft: DraftInfo | None
    draft_path: str | None
    gpus: list[dict] | None
    concurrency: int | None
    findings: list[Finding] = field(default_factory=list)

    def add(self, code: str, severity: str, message: str, why: str = "", fix: str = "", **evidence) -> Finding:
        f = Finding(code, severity, message, why, fix, evidence)
        self.findings.append(f)
        return f

    @property
    def judged(self) -> str:
        names = {"cli": "--sglang-version", "profile": "the profile's sglang_version",
                 "server": "the server's /server_info", "installed": "the installed sglang",
                 "assumed": "assumed, newest known"}
        return f"SGLang {self.version} ({names.get(self.source, self.source)})"

    @property
    def algo(self) -> str | None:
        return self.res.algorithm

    @property
    def target_archs(self) -> list[str]:
        return self.target.architectures if self.target else []


def _is_hub_id(path: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", path)) and not path.startswith((".", "/", "~"))


def _open_model(ctx: _Ctx, path: str | None, role: str) -> ModelDir | None:
    """Read a model dir; turn every failure into a DRAFT_PATH / CHECKPOINT finding."""
    if not path:
        return None
    code = "DRAFT_PATH" if role == "draft" else "CHECKPOINT"
    if not path.startswith("sim:") and not Path(path).expanduser().exists():
        if _is_hub_id(path):
            ctx.add(code, "info", f"{role} {path!r} is not a local directory (a Hugging Face repo id?); "
                    f"checks that need its config and tensors were skipped",
                    "SGLang downloads hub ids at start-up; specdash only inspects local directories.",
                    f"download it (huggingface-cli download {path} --local-dir DIR) and point the profile at DIR "
                    f"to have it checked", path=path)
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
    if not md.tensors and not md.virtual:
        pickles = any("pickle" in n for n in md.notes)
        ctx.add("CHECKPOINT", "warning" if pickles else "error",
                f"{role} {path} has no safetensors tensors" + (" (only pickle checkpoints)" if pickles else ""),
                "Checks on tensor names, shapes and d2t were skipped." if pickles else
                "With no weight files every parameter stays uninitialised (or loading fails).",
                "add model.safetensors (or a sharded set with model.safetensors.index.json)", path=path, role=role)
    return md


# --- entry point ----------------------------------------------------------------------------------


def run_doctor(profile, *, sglang_version: str | None = None, server_version: str | None = None,
               gpus: list[dict] | None = None, concurrency: int | None = None) -> DoctorReport:
    """Run every preflight rule on ``profile`` (a :class:`~specdash.profile.Profile`, a name or a path).

    Args:
        sglang_version: ``--sglang-version`` from the command line (wins over the profile).
        server_version: ``/server_info.version`` of an attached server.
        gpus: ``[{"name": …, "memory_total_mib": …}, …]`` when known (MEMORY rule); None = unknown.
        concurrency: planned concurrent requests (C17 checks); None = use ``max_running_requests``.

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
    ctx = _Ctx(profile, version, source, flags, raw_words, env, None, None, None,  # type: ignore[arg-type]
               flags.get("--speculative-draft-model-path"), gpus, concurrency)
    ctx.target = _open_model(ctx, str(flags.get("--model-path") or ""), "target")
    spec_on = bool(flags.get("--speculative-algorithm"))
    if spec_on and ctx.draft_path:
        md = _open_model(ctx, str(ctx.draft_path), "draft")
        ctx.draft = interpret_draft(md) if md is not None else None
    ctx.res = resolve_flags(
        flags, version=version, env=env, target_architectures=ctx.target_archs or None,
        draft_vocab_size=ctx.draft.draft_vocab_size if ctx.draft else None,
        target_vocab_size=_target_vocab(ctx),
    )
    for rule in (_rule_flags, _rule_draft_path, _rule_algo, _rule_weight_keys, _rule_vocab, _rule_aux,
                 _rule_spec_args, _rule_context, _rule_dtype, _rule_memory):
        try:
            rule(ctx)
        except (CheckpointError, OSError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                ArithmeticError) as exc:  # an odd config never becomes a traceback
            ctx.add("CHECKPOINT", "warning", f"check {rule.__name__.lstrip('_')} could not run: {exc}",
                    "An input had an unexpected form; the remaining checks still ran.",
                    "report this with the draft's config.json", rule=rule.__name__)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    ctx.findings.sort(key=lambda f: order[f.severity])
    return DoctorReport(version, source, ctx.findings, profile.name)


def _target_vocab(ctx: _Ctx) -> int | None:
    if ctx.target is not None and ctx.target.vocab_size:
        return int(ctx.target.vocab_size)
    if ctx.draft is not None and ctx.draft.model.vocab_size:
        return int(ctx.draft.model.vocab_size)
    return None


def _eagle_algo(ctx: _Ctx) -> bool:
    return ctx.algo in EAGLE_FAMILY


# --- FLAG -----------------------------------------------------------------------------------------


def _typed_flags(ctx: _Ctx) -> list[str]:
    """Flag names as the server will receive them: extra_args as typed (argparse sees the raw
    spelling, e.g. ``--tp``), then the flags specdash derives from profile fields."""
    from specdash.sglang.cmdline import canonical_flag

    typed = [w.split("=", 1)[0] for w in ctx.raw_words if w.startswith("--")]
    from_extra = {canonical_flag(w) for w in typed}
    out: list[str] = []
    for n in typed + [n for n in ctx.flags if n.startswith("--") and n not in from_extra]:
        if n not in out:
            out.append(n)
    return out


def _rule_flags(ctx: _Ctx) -> None:
    known = known_flags(ctx.version)
    if known is None:
        oldest = flag_versions()[0] if flag_versions() else "?"
        ctx.add("FLAG", "info", f"no flag list is stored for SGLang {ctx.version} (oldest stored: {oldest}); "
                f"launch flags were not checked", "Flag lists are extracted from the released wheels "
                "(specdash/sglang/flags/).", "", version=ctx.version)
        return
    basis = flags_version_for(ctx.version)
    exact = basis == str(parse_version(ctx.version))
    later = next_flags_version(ctx.version)
    later_known = known_flags(later) if later and not exact else None
    repl = flag_replacements()
    from specdash.sglang.versions import deprecated_flags

    deprecated = deprecated_flags(ctx.version)
    argparse_why = ("SGLang parses its flags with a plain argparse.ArgumentParser (allow_abbrev on; "
                    "server_args.py prepare_server_args): an exact name wins, a unique prefix is expanded, a "
                    "prefix of several flags or an unknown flag ends the process with exit code 2 before "
                    "anything loads.")
    basis_txt = f"SGLang {basis}'s flag list" + ("" if exact else f" (nearest stored release ≤ {ctx.version})")
    for name in _typed_flags(ctx):
        if name in known:
            if name in deprecated:
                new = deprecated[name]
                gone = _first_release_without(name, ctx.version)
                ctx.add("FLAG", "warning", f"{name} is a deprecated alias in SGLang {ctx.version}"
                        + (f" of {new}" if new else "") + (f"; it is gone from {gone}" if gone else ""),
                        "SGLang prints a deprecation warning for it; once removed, argparse's prefix matching "
                        "turns it into an 'ambiguous option' or 'unrecognized arguments' error (exit 2). "
                        f"Source: {basis_txt}.",
                        f"use {new} instead" if new else f"drop {name}", flag=name, replacement=new,
                        removed_in=gone)
            continue
        matches = sorted(f for f in known if f.startswith(name))
        suggestion = repl.get(name) or (matches[0] if len(matches) == 1 else None)
        if not suggestion:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
            suggestion = close[0] if close else None
        if len(matches) == 1:
            ctx.add("FLAG", "warning", f"{name} is not a flag of SGLang {ctx.version}; argparse expands the "
                    f"abbreviation to {matches[0]}", argparse_why + " An abbreviation breaks as soon as a release "
                    "adds another flag with the same prefix (that is how --cuda-graph-max-bs became an error in "
                    f"0.5.20). Source: {basis_txt}.", f"spell it out: {matches[0]}", flag=name,
                    expands_to=matches[0])
            continue
        if later_known is not None and (name in later_known):
            ctx.add("FLAG", "warning", f"{name} is not in {basis_txt} but exists in SGLang {later}; "
                    f"whether {ctx.version} has it is unknown", argparse_why,
                    f"check `python -m sglang.launch_server --help` of {ctx.version}", flag=name)
            continue
        if matches:
            msg = f"ambiguous option: {name} could match {', '.join(matches)}"
        else:
            msg = f"unrecognized arguments: {name}"
        ctx.add("FLAG", "error", f"SGLang {ctx.version} exits at start-up with code 2: '{msg}'",
                argparse_why + f" Source: {basis_txt}.",
                f"replace {name} with {suggestion}" if suggestion else f"remove {name}",
                flag=name, matches=matches, replacement=suggestion, exit_code=2)


def _first_release_without(name: str, version: str) -> str | None:
    v = parse_version(version)
    for known in flag_versions():
        if v < known and name not in (known_flags(known) or set()):
            return str(known)
    return None


# --- DRAFT_PATH -----------------------------------------------------------------------------------


def _rule_draft_path(ctx: _Ctx) -> None:
    if ctx.algo not in EAGLE_FAMILY or ctx.draft_path:
        return
    archs = ctx.target_archs
    bundled = any(a.startswith(BUNDLED_MTP_PREFIXES) for a in archs)
    arch_txt = ", ".join(archs) or "unknown (target config unreadable)"
    if bundled and ctx.algo == "EAGLE":
        ctx.add("DRAFT_PATH", "info", f"no draft path: SGLang uses the target's bundled MTP weights ({arch_txt})",
                "For DeepSeek-V3/GLM-4 MoE/Bailing/… targets a missing draft path defaults to model_path "
                "(FACTS.md §6 step 7).", "", target_architectures=archs)
        return
    if bundled:
        ctx.add("DRAFT_PATH", "warning", f"--speculative-algorithm {ctx.algo} without a draft path: SGLang falls "
                f"back to the target's bundled MTP weights ({arch_txt}), which are not an EAGLE3 head",
                "Bundled MTP layers are NEXTN/EAGLE-style heads (FACTS.md §6 step 7).",
                "pass [speculative] draft_model_path = an EAGLE3 head for this target, or use algorithm EAGLE "
                "(NEXTN) for the bundled MTP", target_architectures=archs)
        return
    ctx.add("DRAFT_PATH", "error", f"--speculative-algorithm {ctx.algo} is given without "
            f"--speculative-draft-model-path, and the target ({arch_txt}) bundles no draft weights",
            "Without a draft path SGLang uses the target checkpoint as the draft, loads it twice and crashes at "
            "start-up with an architecture-specific AttributeError (public case C13, sglang#36528; PR #36593 "
            "turns it into a validation error).",
            "set [speculative] draft_model_path to an EAGLE3 head trained for this target "
            "(--speculative-draft-model-path DIR)", target_architectures=archs, case="C13")


# --- ALGO_MISMATCH --------------------------------------------------------------------------------


def _head_kind(d: DraftInfo) -> str:
    """'eagle3' | 'eagle2' | 'lm' (a full model) | 'unknown'."""
    archs = d.model.architectures
    if d.is_eagle3:
        return "eagle3"
    if any(a in EAGLE2_ARCHS for a in archs) or (d.fc_multiple is not None and abs(d.fc_multiple - 2) < 1e-6):
        return "eagle2"
    if any(a.endswith(("ForCausalLM", "ForConditionalGeneration")) for a in archs):
        return "lm"
    return "unknown"


def _fc_desc(d: DraftInfo) -> str:
    fc = d.model.tensors.get("fc.weight")
    if fc is None:
        return "no fc.weight"
    mult = d.fc_multiple
    return f"fc.weight {list(fc.shape)}: in_features {fc.shape[-1]}" + (
        f" = {mult:g} × hidden {d.hidden_in}" if mult else "")


def _rule_algo(ctx: _Ctx) -> None:
    d = ctx.draft
    if d is None or not _eagle_algo(ctx):
        return
    kind = _head_kind(d)
    arch = ", ".join(d.model.architectures) or "no architectures"
    ev = {"draft_architectures": d.model.architectures, "fc_in_features": d.fc_in_features,
          "hidden_size": d.hidden_in, "algorithm": ctx.algo}
    if ctx.algo == "EAGLE" and kind == "eagle3":
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft is an EAGLE3 head ({arch}; {_fc_desc(d)}) but it is served with "
                f"--speculative-algorithm EAGLE",
                "With EAGLE the target captures no auxiliary hidden states and sends its final hidden state "
                "(1 × hidden); the draft's fc runs only when the input width differs from hidden_size, so it is "
                "skipped silently, and the draft's lm_head/d2t are replaced by the target's. SGLang starts, "
                "warns nothing, and every draft token is rejected: accept length 1.00 (FACTS.md §7 "
                "'Shape-check bypass'; public case C01, sglang PR #21272; golden run eagle_wrongalgo: "
                "accept len 1.00 where EAGLE3 gets 2.0).",
                "set [speculative] algorithm = \"EAGLE3\" (--speculative-algorithm EAGLE3) with the same draft",
                case="C01", **ev)
    elif ctx.algo == "EAGLE3" and kind == "eagle2":
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft is an EAGLE-2 head ({arch}; {_fc_desc(d)}) but it is served with "
                f"--speculative-algorithm EAGLE3",
                "EAGLE3 makes the target send K = 3 concatenated aux states (3 × hidden); an EAGLE-2 fc expects "
                "concat(embedding, hidden) = 2 × hidden, so the first draft forward fails with a shape error "
                "(FACTS.md §7, reverse case).",
                "set [speculative] algorithm = \"EAGLE\" for this head, or use an EAGLE3 head", **ev)
    elif ctx.algo == "EAGLE3" and kind != "eagle3":
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft ({arch}; {_fc_desc(d)}) is not an EAGLE3 head, but it is served with "
                f"--speculative-algorithm EAGLE3",
                "SGLang builds the draft from config.json's architectures; an EAGLE3 draft is "
                "LlamaForCausalLMEagle3 (llama_eagle3.py) with fc.weight [hidden, 3 × hidden] (FACTS.md §8).",
                "point draft_model_path at an EAGLE3 head; a full small LM is served with algorithm STANDALONE",
                **ev)
    elif ctx.algo == "STANDALONE" and kind in ("eagle3", "eagle2"):
        ctx.add("ALGO_MISMATCH", "error",
                f"the draft is an EAGLE head ({arch}) but it is served with --speculative-algorithm STANDALONE",
                "STANDALONE runs a complete small language model as the draft; an EAGLE head has no embedding "
                "stack of its own and needs the target's hidden states (FACTS.md §6).",
                f"set [speculative] algorithm = \"{'EAGLE3' if kind == 'eagle3' else 'EAGLE'}\"", **ev)
    elif ctx.algo == "EAGLE" and kind == "lm":
        ctx.add("ALGO_MISMATCH", "warning",
                f"the draft ({arch}) looks like a full language model, served with --speculative-algorithm EAGLE",
                "EAGLE expects an EAGLE head fed by the target's hidden state; a separate small LM is what "
                "STANDALONE serves (FACTS.md §6).", "set [speculative] algorithm = \"STANDALONE\"", **ev)
    if ctx.algo in ("EAGLE", "EAGLE3") and kind == "eagle3" and d.model.architectures and not any(
            a in SGLANG_EAGLE3_ARCHS for a in d.model.architectures):
        ctx.add("ALGO_MISMATCH", "error",
                f"SGLang has no model class for the draft architecture {arch}",
                "SGLang loads EAGLE3 heads only as LlamaForCausalLMEagle3 (or Eagle3DeepseekV2ForCausalLM for "
                "MLA drafts); a speculators-format export (Eagle3Speculator) fails with 'Model architectures "
                "… are not supported' (SGLang srt/models/*eagle3*.py EntryClass).",
                "re-export the head in SGLang's layout: architectures [\"LlamaForCausalLMEagle3\"], Llama config "
                "keys at the top level of config.json, tensors midlayer.*/fc/norm/lm_head/d2t", **ev)


# --- WEIGHT_KEYS / MISSING_WEIGHT / WEIGHT_SHAPE ---------------------------------------------------


def _cfg_flag(d: DraftInfo, key: str) -> bool:
    ec = d.eagle_config or {}
    if key in ec:
        return bool(ec[key])
    return bool(d.model.cfg(key, False))


def _guess_param(name: str) -> str | None:
    """The parameter a dropped tensor name was probably meant for (newest naming)."""
    cand = name
    for _ in range(3):
        p = eagle3_param_for_key(cand, DEFAULT_VERSION)
        if p is not None:
            return p
        for pre in _FOREIGN_PREFIXES:
            if cand.startswith(pre):
                cand = cand[len(pre):]
                break
        else:
            break
    m = re.match(r"^(?:.*\.)?(?:layers\.0|midlayer|decoder_layer|layer)\.(.+)$", name)
    if m and m.group(1) in EAGLE3_LAYER_PARTS:
        return f"midlayer.{m.group(1)}"
    return None


def _map_keys(ctx: _Ctx, d: DraftInfo) -> tuple[dict[str, str], list[tuple[str, str | None, str]]]:
    """Canonical parameter → tensor name, and dropped (name, guess, reason)."""
    v = ctx.version
    provided: dict[str, str] = {}
    dropped: list[tuple[str, str | None, str]] = []
    nlayers = int(d.model.num_hidden_layers or 1)
    multi = has_feature("draft_fc_norm", v)
    for name in sorted(d.model.tensors):
        p = eagle3_param_for_key(name, v)
        reason = "no parameter of that name"
        base = name.removeprefix("model.")
        m = re.match(r"^layers\.(\d+)\.(.+)$", base)
        if p is None and m and multi and 0 < int(m.group(1)) < nlayers and m.group(2) in EAGLE3_LAYER_PARTS:
            p = base  # 0.5.12+ builds num_hidden_layers decoder layers
        if p is None and m and m.group(1) == "0" and not has_feature("draft_layers0_keys", v):
            reason = f"SGLang {v} names the layer midlayer; layers.0.* is mapped from 0.5.12 (PR #24663)"
        if p == "input_norm.weight" and not (has_feature("draft_norm_before_fc", v) and _cfg_flag(d, "norm_before_fc")):
            reason = (f"SGLang {v} has no input_norm (norm_before_fc support came in 0.5.17, PR #32334)"
                      if not has_feature("draft_norm_before_fc", v) else
                      "config.json does not set norm_before_fc: true, so SGLang builds no input_norm")
            p = None
        if p is not None and p.startswith("fc_norm.") and not (
                has_feature("draft_fc_norm", v) and (_cfg_flag(d, "fc_norm") or _cfg_flag(d, "use_aux_norm"))):
            reason = (f"SGLang {v} has no fc_norm (added in 0.5.12)" if not has_feature("draft_fc_norm", v)
                      else "config.json sets neither fc_norm nor use_aux_norm, so SGLang builds no fc_norm")
            p = None
        if p == "lm_head.weight" and d.model.cfg("tie_word_embeddings", False):
            why_tie = ("tie_word_embeddings is true, so lm_head is the (target's) embedding and a trained "
                       "lm_head.weight is not loaded")
            dropped.append((name, None, why_tie))
            continue
        if p is None:
            dropped.append((name, _guess_param(name), reason))
        else:
            provided.setdefault(p, name)
    return provided, dropped


def _fix_cmd(d: DraftInfo, version: str, suffix: str = "-fixed") -> str:
    if d.path.startswith("sim:"):
        return "re-export the checkpoint (this is a virtual simulator model; `specdash draft fix` works on real directories)"
    return f"specdash draft fix {d.path} --out {d.path.rstrip('/')}{suffix} --sglang-version {version}"


def _rule_weight_keys(ctx: _Ctx) -> None:
    d = ctx.draft
    if d is None or not _eagle_algo(ctx) or _head_kind(d) != "eagle3" or not d.model.tensors:
        return
    nl = d.model.num_hidden_layers
    if isinstance(nl, int) and nl > 1 and not has_feature("draft_fc_norm", ctx.version):
        ctx.add("CHECKPOINT", "error", f"the draft has num_hidden_layers {nl}; {ctx.judged} supports 1 draft layer",
                "llama_eagle3.py raises ValueError('EAGLE3 currently only supports 1 layer') before 0.5.12 (wheel "
                "sglang-0.5.11 L212; multi-layer drafts load from 0.5.12).", "run SGLang ≥ 0.5.12",
                num_hidden_layers=nl)
    provided, dropped = _map_keys(ctx, d)
    ctx_provided = set(provided)
    layers0 = [(n, g, r) for n, g, r in dropped if re.match(r"^(model\.)?layers\.0\.", n) and g and g not in provided]
    if layers0:
        ctx.add("WEIGHT_KEYS", "error",
                f"{len(layers0)} tensors named layers.0.* are silently dropped by the loader of {ctx.judged}: "
                + "; ".join(f"{n} → {g}" for n, g, _ in layers0),
                f"{ctx.judged} loads the draft's decoder layer only from midlayer.* (llama_eagle3.py "
                "load_weights); a name that matches no parameter is skipped without a warning, so the layer keeps "
                "uninitialised weights and acceptance collapses to ≈1 (FACTS.md §8; the seeds' Kimi-K2.5 head; "
                "layers.0.* is mapped from 0.5.12, SGLang PR #24663).",
                f"{_fix_cmd(d, ctx.version, '-midlayer')} (renames layers.0.* → midlayer.*, which every release "
                "loads), or run SGLang ≥ 0.5.12",
                judged_version=ctx.version, version_source=ctx.source,
                renames={n: g for n, g, _ in layers0})
    for n, g, r in dropped:
        if (n, g, r) in layers0:
            continue
        base = n.removeprefix("model.")
        in_norm = base == "input_norm.weight"
        fc_norm = base.startswith(("fc_norm.", "aux_norm_"))
        ev = {"tensor": n, "maps_to": g, "judged_version": ctx.version, "version_source": ctx.source}
        if in_norm or fc_norm:
            cfg_on = _cfg_flag(d, "norm_before_fc") if in_norm else (_cfg_flag(d, "fc_norm") or _cfg_flag(d, "use_aux_norm"))
            supported = has_feature("draft_norm_before_fc" if in_norm else "draft_fc_norm", ctx.version)
            key, since = ("norm_before_fc", "0.5.17") if in_norm else ("fc_norm", "0.5.12")
            ctx.add("WEIGHT_KEYS", "error" if cfg_on and not supported else "warning",
                    f"tensor {n} is dropped silently by {ctx.judged}: {r}",
                    "The loader skips it without a warning (FACTS.md §8), so the normalisation the head was trained "
                    "with is never applied and acceptance stays low (public case C03: norm_before_fc and input_norm "
                    "ignored, accept length ≈ 1.1; SGLang PR #32334).",
                    (f"run SGLang ≥ {since}" if cfg_on and not supported else
                     f"set \"{key}\": true in config.json if the head was trained with it (SGLang ≥ {since}), "
                     f"else remove {n}"), case="C03", **ev)
            continue
        if g and g not in ctx_provided:
            sev, tail = "error", f"so {g} stays uninitialised"
        elif g:
            sev, tail = "warning", f"{g} is provided by {provided.get(g)}, so this copy is ignored"
        else:
            sev, tail = "warning", "it is ignored"
        ctx.add("WEIGHT_KEYS", sev,
                f"tensor {n} is dropped silently by {ctx.judged}: {r}" + (f"; it should map to {g}" if g else ""),
                f"SGLang's EAGLE3 loader skips names it cannot map without a warning (FACTS.md §8); {tail}.",
                (f"{_fix_cmd(d, ctx.version)} (renames {n} → {g})"
                 if g and sev == "error" else f"remove {n} or rename it to the parameter it holds"), **ev)
    _missing(ctx, d, provided, dropped)
    _shapes(ctx, d, provided)


def _missing(ctx: _Ctx, d: DraftInfo, provided: dict[str, str], dropped: list) -> None:
    guessed = {g for _, g, _ in dropped if g}
    cfg = d.model
    absent = [p for p in ("fc.weight",) + tuple(f"midlayer.{x}" for x in EAGLE3_LAYER_PARTS)
              if p not in provided and p not in guessed]
    linear = [p for p in absent if not p.endswith(_NORM_PARTS)]
    norms = [p for p in absent if p.endswith(_NORM_PARTS)]
    if "norm.weight" not in provided and "norm.weight" not in guessed:
        norms.append("norm.weight")
    if linear:
        ctx.add("MISSING_WEIGHT", "error",
                f"no tensor provides {', '.join(linear)}",
                "SGLang allocates these parameters with torch.empty (fc: torch.nn.Linear's random init) and the "
                "loader never reports missing names, so the head runs on uninitialised weights: accept length ≈ 1 "
                "(FACTS.md §8 'Silent skips').",
                "re-export the draft with these tensors (midlayer.* names, fc.weight)", missing=linear)
    if norms:
        ctx.add("MISSING_WEIGHT", "warning", f"no tensor provides {', '.join(norms)}",
                "RMSNorm weights start at 1.0 in SGLang (layernorm.py), not at the trained scale: the head runs, "
                "but not as trained.", "re-export the draft with its norm weights", missing=norms)
    tie = bool(cfg.cfg("tie_word_embeddings", False))
    dvs_set = any(k == "draft_vocab_size" for k in _all_keys(cfg.config))
    if not tie and d.draft_vocab_size is not None and "lm_head.weight" not in provided \
            and "lm_head.weight" not in guessed:
        ctx.add("MISSING_WEIGHT", "error",
                f"config.json sets draft_vocab_size = {d.draft_vocab_size} with tie_word_embeddings false, but the "
                f"checkpoint has no lm_head.weight",
                "With draft_vocab_size set SGLang allocates the draft's own lm_head (ParallelLMHead, torch.empty) "
                "instead of borrowing the target's, and the loader never reports the missing tensor: the head is "
                "uninitialised and no draft token is accepted (public case C05, sglang#27829; PR #27908 borrows the "
                "target head only for MLA drafts with a full vocabulary).",
                "ship the lm_head.weight the head was trained with, or — if it was trained with the target's head — "
                "set \"draft_vocab_size\": null so SGLang borrows the target's lm_head",
                draft_vocab_size=d.draft_vocab_size, case="C05")
    if not tie and not dvs_set:
        lm = cfg.tensors.get("lm_head.weight")
        ctx.add("MISSING_WEIGHT", "warning",
                "config.json has no draft_vocab_size key" + (f" (lm_head.weight has {lm.shape[0]} rows)" if lm else ""),
                "SGLang reads config.draft_vocab_size as a plain attribute when tie_word_embeddings is false "
                "(llama_eagle3.py); a missing key can raise AttributeError at start-up [inferred, FACTS.md §8]; "
                "null means 'borrow the target's lm_head'.",
                f"specdash draft fix {d.path} --out DST (adds draft_vocab_size from lm_head rows or len(d2t))",
                lm_head_rows=lm.shape[0] if lm else None)
    if d.target_hidden_size and d.model.hidden_size and d.target_hidden_size != d.model.hidden_size \
            and "embed_tokens.weight" not in provided:
        ctx.add("MISSING_WEIGHT", "error",
                f"target_hidden_size {d.target_hidden_size} ≠ hidden_size {d.model.hidden_size} but the checkpoint "
                f"has no embed_tokens.weight",
                "SGLang shares the target's embedding only when the widths match; otherwise the draft keeps its own "
                "(eagle_worker_v2.py init_lm_head, llama.py set_embed; FACTS.md §8), which is then uninitialised.",
                "ship embed_tokens.weight [vocab_size, hidden_size] with the draft")
    if has_feature("draft_norm_before_fc", ctx.version) and _cfg_flag(d, "norm_before_fc") \
            and "input_norm.weight" not in provided:
        ctx.add("MISSING_WEIGHT", "warning", "norm_before_fc is true but the checkpoint has no input_norm.weight",
                "SGLang ≥ 0.5.17 applies an RMSNorm over the concatenated aux states; without the tensor its weight "
                "stays 1.0 (llama_eagle3.py).", "ship input_norm.weight or set norm_before_fc false")


def _all_keys(obj: Any) -> list[str]:
    out: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(k)
            out.extend(_all_keys(v))
    return out


def _shapes(ctx: _Ctx, d: DraftInfo, provided: dict[str, str]) -> None:
    m = d.model
    h = m.hidden_size
    heads = m.cfg("num_attention_heads")
    if not h or not heads:
        return
    kv = m.cfg("num_key_value_heads") or heads
    hd = m.cfg("head_dim") or h // heads
    inter = m.cfg("intermediate_size")
    expect = {
        "midlayer.self_attn.q_proj.weight": (heads * hd, 2 * h),
        "midlayer.self_attn.k_proj.weight": (kv * hd, 2 * h),
        "midlayer.self_attn.v_proj.weight": (kv * hd, 2 * h),
        "midlayer.self_attn.o_proj.weight": (h, heads * hd),
        "midlayer.input_layernorm.weight": (h,),
        "midlayer.post_attention_layernorm.weight": (h,),
        "midlayer.hidden_norm.weight": (h,),
        "norm.weight": (h,),
    }
    if inter:
        expect.update({"midlayer.mlp.gate_proj.weight": (inter, h), "midlayer.mlp.up_proj.weight": (inter, h),
                       "midlayer.mlp.down_proj.weight": (h, inter)})
    bad = []
    for p, shape in expect.items():
        name = provided.get(p)
        if name is None:
            continue
        got = tuple(m.tensors[name].shape)
        if got != shape:
            bad.append((name, list(got), list(shape)))
    if bad:
        ctx.add("WEIGHT_SHAPE", "error",
                "tensor shapes differ from what config.json builds: "
                + "; ".join(f"{n} is {g}, expected {e}" for n, g, e in bad),
                "SGLang builds the draft from config.json (hidden_size, heads, head_dim, intermediate_size; layer 0 "
                "attention reads 2 × hidden — FACTS.md §8) and its weight loaders assert the shapes: start-up fails.",
                "make config.json match the checkpoint (or re-export the checkpoint)",
                mismatches=[{"tensor": n, "shape": g, "expected": e} for n, g, e in bad])


# --- VOCAB_MAP ------------------------------------------------------------------------------------


def _rule_vocab(ctx: _Ctx) -> None:
    d = ctx.draft
    if d is None or not _eagle_algo(ctx) or _head_kind(d) != "eagle3":
        return
    m = d.model
    V = _target_vocab(ctx)
    dvs = d.draft_vocab_size
    tie = bool(m.cfg("tie_word_embeddings", False))
    lm = m.tensors.get("lm_head.weight")
    has_d2t = "d2t" in m.tensors
    tv_txt = f"target vocab {V}" if V else "target vocab unknown"
    if ctx.target is not None and ctx.target.vocab_size and m.vocab_size and ctx.target.vocab_size != m.vocab_size:
        ctx.add("VOCAB_MAP", "error", f"draft vocab_size {m.vocab_size} ≠ target vocab_size {ctx.target.vocab_size}",
                "The draft's vocab_size must be the target's: SGLang substitutes the target's embedding "
                "(FACTS.md §8) and maps draft ids into the target vocabulary.",
                f"set \"vocab_size\": {ctx.target.vocab_size} in the draft's config.json (if the head was trained "
                f"for this target)", draft_vocab=m.vocab_size, target_vocab=ctx.target.vocab_size)
    if not tie and lm is not None:
        rows = lm.shape[0]
        if dvs is not None and rows != dvs:
            ctx.add("VOCAB_MAP", "error", f"lm_head.weight has {rows} rows but draft_vocab_size is {dvs}",
                    "SGLang allocates lm_head with draft_vocab_size rows and the weight loader asserts the shape: "
                    "start-up fails (llama_eagle3.py, ParallelLMHead).",
                    f"set \"draft_vocab_size\": {rows} in config.json (if the head has {rows} outputs)",
                    lm_head_rows=rows, draft_vocab_size=dvs)
        elif dvs is None and V and rows == V:
            ctx.add("VOCAB_MAP", "warning",
                    f"draft_vocab_size is null/absent, so SGLang replaces the draft's own lm_head.weight ({rows} rows) "
                    f"with the target's lm_head",
                    "load_lm_head_from_target is set when draft_vocab_size is null (llama_eagle3.py; "
                    "eagle_worker_v2.py set_embed_and_head): a trained draft head is discarded.",
                    f"if the head was trained, set \"draft_vocab_size\": {rows}", lm_head_rows=rows)
        elif dvs is None and V and rows != V:
            ctx.add("VOCAB_MAP", "error",
                    f"lm_head.weight has {rows} rows but draft_vocab_size is not set ({tv_txt})",
                    "Without draft_vocab_size SGLang sizes the draft head with vocab_size rows and the loader asserts "
                    "the shape (or the missing attribute raises): start-up fails.",
                    f"specdash draft fix {d.path} --out DST (sets draft_vocab_size = {rows})", lm_head_rows=rows)
    eff_dvs = dvs if dvs is not None else (lm.shape[0] if lm is not None and not tie else None)
    if eff_dvs and V and eff_dvs < V and not has_d2t:
        ctx.add("VOCAB_MAP", "error",
                f"draft_vocab_size {eff_dvs} < {tv_txt} but the checkpoint has no d2t (and no t2d)",
                "SGLang builds the draft→target token map only from a d2t tensor in the checkpoint "
                "(hot_token_id = d2t + arange; llama_eagle3.py load_weights); without it draft id i is used as "
                "target id i for the first N ids and almost every draft token is wrong. --speculative-token-map is "
                "ignored for EAGLE3 (FACTS.md §6). Public case C08 (NVIDIA-NeMo/Automodel PR #2447).",
                "re-export the draft with d2t (offsets: target_id − draft_id) and t2d inside model.safetensors, e.g. "
                f"specdash draft fix {d.path} --out DST --hot-token-ids IDS.json (the sorted target ids of the draft "
                "vocabulary)", draft_vocab_size=eff_dvs, target_vocab=V, case="C08")
        return
    if not has_d2t:
        return
    try:
        d2t = np.asarray(m.load_tensor("d2t")).astype(np.int64).reshape(-1)
    except (CheckpointError, KeyError, ValueError, TypeError) as exc:
        ctx.add("CHECKPOINT", "warning", f"d2t could not be read: {exc}", "The mapping checks were skipped.", "")
        return
    n = len(d2t)
    if eff_dvs and n != eff_dvs:
        ctx.add("VOCAB_MAP", "error", f"len(d2t) = {n} but the draft vocabulary has {eff_dvs} ids",
                "SGLang indexes hot_token_id (d2t + arange) with the draft's top-k ids (FACTS.md §8): every draft id "
                "needs exactly one entry.", "re-export d2t with one offset per draft id", d2t_len=n,
                draft_vocab_size=eff_dvs)
    idx = np.arange(n, dtype=np.int64)
    off = d2t + idx
    t2d = None
    if "t2d" in m.tensors:
        try:
            t2d = np.asarray(m.load_tensor("t2d")).astype(bool).reshape(-1)
        except (CheckpointError, KeyError, ValueError, TypeError):
            t2d = None
    hi = V if V else None

    def valid(t: np.ndarray) -> bool:
        return bool(t.min(initial=0) >= 0 and (hi is None or t.max(initial=0) < hi) and len(np.unique(t)) == len(t))

    valid_off, valid_abs = valid(off), valid(d2t)
    cons_off = cons_abs = None
    if t2d is not None:
        marked = np.flatnonzero(t2d)
        cons_off = len(marked) == n and bool(np.array_equal(np.sort(off), marked))
        cons_abs = len(marked) == n and bool(np.array_equal(np.sort(d2t), marked))
    absolute = (not valid_off and valid_abs) or (valid_off and valid_abs and cons_abs and not cons_off)
    ev = {"d2t_len": n, "d2t_head": d2t[:5].tolist(), "targets_as_offsets_head": off[:5].tolist(), "target_vocab": V}
    if absolute:
        ctx.add("VOCAB_MAP", "error",
                f"d2t holds absolute target ids (d2t[:5] = {d2t[:5].tolist()}), not offsets",
                "SGLang reads d2t as offsets: target_id = draft_id + d2t[draft_id] (llama_eagle3.py load_weights, "
                "FACTS.md §8). Absolute ids are shifted by the draft id"
                + (f" ({int((off >= V).sum())} of {n} land outside the target vocabulary)" if V else "")
                + " and every proposed token is wrong (the seeds' standalone test read them the other way).",
                f"specdash draft fix {d.path} --out DST (rewrites d2t[i] := d2t[i] − i)", **ev)
    elif not valid_off:
        out_of_range = int(((off < 0) | ((off >= V) if V else False)).sum())
        dups = int(len(off) - len(np.unique(off)))
        ctx.add("VOCAB_MAP", "error",
                f"d2t maps draft ids outside the target vocabulary or onto the same target id "
                f"({out_of_range} out of range, {dups} duplicates; {tv_txt})",
                "target_id = draft_id + d2t[draft_id] must be a distinct id < target vocab_size (FACTS.md §8).",
                "re-export d2t from the sorted list of target ids of the draft vocabulary: d2t[i] = ids[i] − i",
                out_of_range=out_of_range, duplicates=dups, **ev)
    elif t2d is not None and not cons_off:
        ctx.add("VOCAB_MAP", "warning",
                f"t2d marks {int(t2d.sum())} target ids, not exactly the {n} targets of d2t",
                "SGLang skips t2d, but t2d is written from the same list as d2t: disagreement means one of them "
                "was exported wrong (FACTS.md §8).", "re-export d2t and t2d from the same id list",
                t2d_marked=int(t2d.sum()), **ev)
    elif t2d is None and valid_abs and n > 1 and bool(np.all(np.diff(d2t) > 0)):
        ctx.add("VOCAB_MAP", "warning",
                f"d2t is strictly increasing (d2t[:5] = {d2t[:5].tolist()}): it may hold absolute ids",
                "Offsets of a sorted hot vocabulary repeat whenever two hot ids are adjacent; strictly increasing "
                "values look like the ids themselves. SGLang adds the draft id (FACTS.md §8).",
                "check the exporter; if they are ids, specdash draft fix … --d2t-absolute", **ev)
    if t2d is not None and V and len(t2d) != V:
        ctx.add("VOCAB_MAP", "warning", f"t2d has {len(t2d)} entries, target vocab {V}",
                "t2d is a mask over the target vocabulary (SGLang skips it; other engines use it).",
                "re-export t2d with one entry per target id", t2d_len=len(t2d))
    if eff_dvs and V and eff_dvs < V and valid_off and not absolute:
        ctx.add("VOCAB_MAP", "info",
                f"reduced draft vocabulary: {eff_dvs} of {V} target ids, mapped by d2t (offsets)",
                "SGLang maps draft ids through hot_token_id = d2t + arange (llama_eagle3.py load_weights). The "
                "mapping lives only in the checkpoint: an engine build that drops it still runs, with acceptance "
                "≈ 1.1 (public case C06, vllm PR #18909). If acceptance collapses after launch, suspect the mapping.",
                "", draft_vocab_size=eff_dvs, target_vocab=V, case="C06")


# --- AUX_LAYERS -----------------------------------------------------------------------------------


def _family(archs: list[str]) -> str:
    if any(a.startswith("GptOss") for a in archs):
        return "gpt_oss"
    if any(a.startswith(("Deepseek", "KimiK25", "Kimi")) for a in archs):
        return "deepseek"
    return "default"


def capture_plan(target_architectures: list[str], num_layers: int, ids: list[int] | None,
                 version: str) -> tuple[list[int], list[int]]:
    """What SGLang's target captures for EAGLE3: ``(capture indices, valid indices)``.

    A capture index i means "the residual stream at the input of decoder layer i" = the
    output of layer i − 1 (index 0 = the embeddings).  Defaults (ids None) are
    ``[2, L//2, L−3]``; explicit ids become ``id + 1`` (``models/llama.py`` L929), except on
    gpt-oss ≥ 0.5.17 when ``max(ids) == L`` (kept: boundary convention) and on DeepSeek-family
    targets ≥ 0.5.13 unless the first id is 1 (kept) — FACTS.md §7, the wheels (versions.py).
    Valid indices are ``0 … L−1`` (and ``L`` on gpt-oss ≥ 0.5.17, captured after the last
    layer); invalid ones are silently never captured.
    """
    L = int(num_layers)
    fam = _family(target_architectures)
    if ids is None:
        cap = [2, L // 2, L - 3]
    elif (fam == "gpt_oss" and has_feature("gpt_oss_boundary_ids", version) and ids and max(ids) == L) or (
            fam == "deepseek" and has_feature("deepseek_aux_ids_unshifted", version) and ids and ids[0] != 1):
        cap = list(ids)
    else:
        cap = [i + 1 for i in ids]
    top = L if (fam == "gpt_oss" and has_feature("gpt_oss_boundary_ids", version)) else L - 1
    valid = sorted({c for c in cap if 0 <= c <= top})
    return cap, valid


def _rule_aux(ctx: _Ctx) -> None:
    d, t = ctx.draft, ctx.target
    if d is None or ctx.algo != "EAGLE3" or _head_kind(d) != "eagle3":
        return
    ids_by = d.aux_layer_ids
    ec_ids = ids_by.get("eagle_config")
    top_ids = ids_by.get("top_level")
    others = {k: v for k, v in ids_by.items() if k not in ("eagle_config", "top_level")}
    ec = d.eagle_config or {}
    v = ctx.version
    if ec.get("use_aux_hidden_state") is False:
        ctx.add("AUX_LAYERS", "error", "eagle_config.use_aux_hidden_state is false",
                "The target then captures no aux states and sends 1 × hidden: the EAGLE3 fc is skipped as with "
                "--speculative-algorithm EAGLE (spec_aux_hidden_state.py; FACTS.md §7).",
                "set \"use_aux_hidden_state\": true in eagle_config")
    # fc width SGLang builds vs the checkpoint's fc.
    sg_aux = d.num_aux if has_feature("draft_fc_norm", v) else 3
    hidden_in = d.hidden_in
    fc_in = d.fc_in_features
    if hidden_in and fc_in and fc_in != sg_aux * hidden_in and abs((d.fc_multiple or 0) - 2) > 1e-6:
        src = ("num_aux_hidden_states" if d.num_aux_declared else "len(eagle_config ids)" if ec_ids else "default 3") \
            if has_feature("draft_fc_norm", v) else f"fixed 3 in SGLang {v}"
        ctx.add("AUX_LAYERS", "error",
                f"fc.weight takes {fc_in} inputs = {fc_in / hidden_in:g} × {hidden_in}, but SGLang {v} builds fc for "
                f"{sg_aux} aux states ({src}) = {sg_aux * hidden_in}",
                "fc is Linear(hidden_in × num_aux, hidden); num_aux = num_aux_hidden_states, else "
                "len(eagle_config.eagle_aux_hidden_state_layer_ids), else 3 (0.5.12+; before, always 3) — FACTS.md "
                "§7. The weight loader asserts the shape: start-up fails.",
                "make eagle_config.eagle_aux_hidden_state_layer_ids list exactly the layers the head was trained on "
                f"({int(fc_in // hidden_in)} ids)", fc_in_features=fc_in, built_for=sg_aux * hidden_in)
    if t is None or not t.num_hidden_layers:
        if ec_ids is None and top_ids:
            _top_level_finding(ctx, d, top_ids, None, None)
        return
    L = int(t.num_hidden_layers)
    archs = t.architectures
    th = t.hidden_size
    if th and hidden_in and th != hidden_in:
        ctx.add("AUX_LAYERS", "error",
                f"the head was built for target hidden size {hidden_in}, the target has {th}",
                "The target sends K × its hidden size; fc expects K × (target_hidden_size or hidden_size) "
                "(FACTS.md §7).", "use a head trained for this target (or set target_hidden_size correctly)",
                draft_hidden_in=hidden_in, target_hidden=th)
    if not any(a.startswith(CAPTURE_PREFIXES) for a in archs):
        ctx.add("AUX_LAYERS", "warning",
                f"target architecture {', '.join(archs) or '?'} may not implement set_eagle3_layers_to_capture",
                "SGLang raises ValueError('… does not implement set_eagle3_layers_to_capture …') at start-up for "
                "targets without it (attention_backend_setup.py; FACTS.md §7 lists the 29 that have it in 0.5.23).",
                "check srt/models/<target>.py of your SGLang for set_eagle3_layers_to_capture")
    cap, valid = capture_plan(archs, L, ec_ids, v)
    default_cfg = [1, L // 2 - 1, L - 4]
    where = "eagle_config" if ec_ids is not None else "defaults (no eagle_config ids)"
    k_sent = len(valid)
    k_need = int(fc_in // hidden_in) if fc_in and hidden_in else sg_aux
    plan_ev = {"num_hidden_layers": L, "ids": ec_ids, "capture_indices": cap, "captured": valid,
               "outputs_of_layers": [c - 1 for c in valid], "states_sent": k_sent, "states_expected": k_need,
               "family": _family(archs)}
    if len(valid) != len(cap):
        missing = [c for c in cap if c not in valid]
        dup = len(cap) != len(set(cap))
        boundary = ec_ids is not None and max(ec_ids) == L
        why = (f"SGLang captures the residual stream at the input of the listed decoder layers and skips indices that "
               f"do not exist, so only {k_sent} × {th or hidden_in} = {k_sent * (th or hidden_in or 0)} values reach "
               f"an fc expecting {k_need} × {hidden_in} = {k_need * (hidden_in or 0)}: a size-mismatch RuntimeError "
               "at the warm-up request (public case C03, sglang#32226: '8640 vs 5760').")
        if boundary:
            why += (f" An id equal to num_hidden_layers ({L}) is the boundary convention (boundary {L} = output of the "
                    "last block); "
                    + ("gpt-oss targets read it so from 0.5.17 (PR #32334)." if _family(archs) == "gpt_oss" else
                       "this target family shifts every id by +1 and has no final-boundary capture."))
        fix = ("run SGLang ≥ 0.5.17 (PR #32334: boundary ids, final-boundary capture, norm_before_fc); do not hand-shift "
               "the ids" if boundary and _family(archs) == "gpt_oss" else
               f"list ids in 0 … {L - 2} (\"output of layer id\"; SGLang captures id + 1) matching the layers the "
               "head was trained on")
        ctx.add("AUX_LAYERS", "error",
                f"aux ids {ec_ids} on a {L}-layer target become capture indices {cap}: "
                f"{missing if missing else 'duplicates'} {'are' if len(missing) != 1 else 'is'} never captured"
                + (" (duplicate ids are captured once)" if dup else ""),
                why, fix, case="C03", **plan_ev)
    if ec_ids is not None and ec_ids != sorted(ec_ids):
        ctx.add("AUX_LAYERS", "warning", f"aux ids {ec_ids} are not in ascending order",
                "The target appends captured states in layer order while running the layers, so the fc receives "
                f"them ordered {sorted(cap)}, not in the listed order (models/llama.py forward).",
                "list the ids in ascending order and make sure the head was trained in that order", **plan_ev)
    if ec_ids is not None and ec_ids == [2, L // 2, L - 3]:
        ctx.add("AUX_LAYERS", "warning",
                f"aux ids {ec_ids} equal SGLang's default capture indices, but explicit ids are shifted by +1: SGLang "
                f"captures {cap} (outputs of layers {[c - 1 for c in cap]})",
                "Defaults are capture indices [2, L//2, L−3] = config ids [1, L//2−1, L−4]; explicit ids mean 'output "
                "of layer id' and become id + 1 (models/llama.py L929, FACTS.md §7). One of the two conventions is off "
                "by one.", f"if the head was trained on SGLang's defaults, write {default_cfg} (or omit the ids)",
                **plan_ev)
    if _family(archs) == "deepseek" and ec_ids and has_feature("deepseek_aux_ids_unshifted", v) and ec_ids[0] != 1:
        ctx.add("AUX_LAYERS", "warning",
                f"on DeepSeek-family targets SGLang {v} uses ids {ec_ids} unchanged as capture indices "
                f"(= outputs of layers {[c - 1 for c in cap]}), because the first id is not 1",
                "deepseek_v2.py set_eagle3_layers_to_capture shifts by +1 only when layer_ids[0] == 1 (0.5.13+); "
                "Llama-family targets always shift. The same config means different layers on the two families.",
                "check which convention the training used; ids starting with 1 are shifted like on Llama", **plan_ev)
    if ec_ids is None and top_ids:
        _top_level_finding(ctx, d, top_ids, L, archs)
    elif ec_ids is not None and top_ids and top_ids != ec_ids:
        ctx.add("AUX_LAYERS", "warning",
                f"config.json lists aux ids twice: eagle_config {ec_ids}, top level {top_ids}",
                "The target captures from eagle_config; eagle_utils.py (buffer sizing) falls back to the top level — "
                "FACTS.md §7. Two lists invite the wrong one being edited.",
                "keep one list, inside eagle_config", eagle_config=ec_ids, top_level=top_ids)
    for loc, ids in others.items():
        used = ec_ids if ec_ids is not None else None
        cap_o, _ = capture_plan(archs, L, ids, v)
        if cap_o != cap:
            ctx.add("AUX_LAYERS", "error",
                    f"the training recorded aux ids {ids} ({loc}) but SGLang will capture {cap} "
                    f"(from {where}{': ' + str(used) if used is not None else ''})",
                    "The head only works on the layers it was trained on; SGLang reads only "
                    "eagle_config.eagle_aux_hidden_state_layer_ids on the target side (FACTS.md §7).",
                    f"set eagle_config.eagle_aux_hidden_state_layer_ids = {ids} (specdash draft fix moves them)",
                    recorded_at=loc, recorded=ids, **plan_ev)
    boundary_ok = ec_ids is not None and max(ec_ids) == L and L in valid
    ctx.add("AUX_LAYERS", "info",
            f"SGLang {v} will capture target layers {cap} (residual stream at their input = outputs of layers "
            f"{[c - 1 for c in cap]}) of {L}, from {where}: {k_sent} × {th} → fc expects {k_need} × {hidden_in}"
            + (f"; ids {ec_ids} use the boundary convention (max id = num_hidden_layers), which this target reads "
               "as such" if boundary_ok else ""),
            "FACTS.md §7 (models/llama.py L929; gpt_oss.py / deepseek_v2.py variants, versions.py).", "", **plan_ev)


def _top_level_finding(ctx: _Ctx, d: DraftInfo, top_ids: list[int], L: int | None, archs: list[str] | None) -> None:
    if L is None:
        ctx.add("AUX_LAYERS", "error",
                f"aux ids {top_ids} are at the top level of config.json, not inside eagle_config",
                "The target reads only eagle_config.eagle_aux_hidden_state_layer_ids and otherwise captures its "
                "defaults (spec_aux_hidden_state.py; FACTS.md §7).",
                f"specdash draft fix {d.path} --out DST (moves them into eagle_config)", top_level=top_ids)
        return
    cap_default, _ = capture_plan(archs or [], L, None, ctx.version)
    cap_meant, _ = capture_plan(archs or [], L, top_ids, ctx.version)
    same = cap_default == cap_meant
    ctx.add("AUX_LAYERS", "warning" if same else "error",
            f"aux ids {top_ids} are at the top level of config.json: the target does not read them and captures its "
            f"defaults {cap_default} instead of {cap_meant}" + (" (the same layers here)" if same else ""),
            "Only eagle_config.eagle_aux_hidden_state_layer_ids is read on the target side "
            "(spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state); eagle_utils.py's buffer sizing does read "
            "the top level, so the two can disagree (FACTS.md §7).",
            f"specdash draft fix {d.path} --out DST (moves them into eagle_config)",
            top_level=top_ids, default_capture=cap_default, intended_capture=cap_meant)


# --- SPEC_ARGS ------------------------------------------------------------------------------------


def _cuda_graph_max_bs(flags: dict) -> tuple[int | None, str | None]:
    for name in ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"):
        v = flags.get(name)
        if v not in (None, True):
            try:
                return int(v), name
            except (TypeError, ValueError):
                pass
    cfg = flags.get("--cuda-graph-config")
    if isinstance(cfg, str):
        try:
            val = json.loads(cfg).get("decode", {}).get("max_bs")
            if val is not None:
                return int(val), "--cuda-graph-config"
        except (ValueError, AttributeError, TypeError):
            pass
    return None, None


def _rule_spec_args(ctx: _Ctx) -> None:
    res = ctx.res
    for r in res.rejections:
        ctx.add("SPEC_ARGS", "error", r.message,
                f"SGLang {ctx.version} refuses this at start-up ({r.exception}) — arg_groups/speculative_hook.py "
                "(server_args.py before 0.5.13), FACTS.md §6.", r.fix or "", exception=r.exception)
    auto = [a for a in res.adjustments if a.reason.startswith("auto-chosen")]
    if auto:
        vals = {a.field: a.effective for a in auto}
        ctx.add("SPEC_ARGS", "info",
                f"steps/topk/draft tokens not given: SGLang picks ({vals.get('speculative_num_steps')}, "
                f"{vals.get('speculative_eagle_topk')}, {vals.get('speculative_num_draft_tokens')}) for "
                f"{', '.join(ctx.target_archs) or 'this target'}",
                "_auto_choose_speculative_params: LlamaForCausalLM → (5, 4, 8), most others → (3, 1, 4) "
                "(FACTS.md §6 step 7).", "pin all three in [speculative] to compare runs reproducibly",
                effective=vals)
    for a in res.adjustments:
        if a in auto:
            continue
        if a.field == "max_running_requests":
            ctx.add("SPEC_ARGS", "info", f"max_running_requests not set: SGLang uses {a.effective} with speculation",
                    "FACTS.md §6 step 7; log line: " + (a.log_line or ""), "pass --max-running-requests to change it",
                    field=a.field, asked=a.asked, effective=a.effective, log_line=a.log_line)
            continue
        ctx.add("SPEC_ARGS", "warning",
                f"{a.field}: asked {a.asked}, SGLang runs {a.effective} ({a.reason})",
                "A silent start-up adjustment (FACTS.md §6" + (f"; SGLang logs: '{a.log_line}'" if a.log_line else "")
                + "); the seeds' steps 1 / draft tokens 16 ran as 2 draft tokens (golden eagle3_steps1_draft16).",
                f"ask for what will run: {a.field.replace('speculative_', '').replace('_', ' ')} = {a.effective}"
                + (" (or raise steps: draft tokens = steps + 1 with topk 1)" if "draft_tokens" in a.field else ""),
                field=a.field, asked=a.asked, effective=a.effective, log_line=a.log_line, case="C22")
    if not res.enabled:
        return
    steps, topk, draft = res.num_steps, res.eagle_topk, res.num_draft_tokens
    env_v2 = ctx.env.get("SGLANG_ENABLE_SPEC_V2") or os.environ.get("SGLANG_ENABLE_SPEC_V2")
    if env_v2 is not None and not has_feature("spec_v2_env", ctx.version) and \
            not has_feature("spec_v2_default_topk_fallback", ctx.version):
        ctx.add("SPEC_ARGS", "info", f"SGLANG_ENABLE_SPEC_V2={env_v2} has no effect on SGLang {ctx.version}",
                "From 0.5.14 spec v2 (overlap) is the only implementation and the variable is gone (FACTS.md §9; "
                "environ.py of the wheels).", "remove it from [env]")
    if has_feature("spec_v2_default_topk_fallback", ctx.version) and topk and topk > 1 and ctx.algo in EAGLE_FAMILY:
        ctx.add("SPEC_ARGS", "info",
                f"topk {topk} on SGLang {ctx.version}: spec v2 supports only topk 1, so SGLang falls back to spec v1 "
                "with the overlap scheduler disabled",
                "server_args.py (0.5.11–0.5.13): 'Spec v1 is used for eagle/eagle3/standalone speculative decoding "
                "because spec v2 currently only supports topk = 1' (public case C12).",
                "compare against topk 1 (chain) runs, which keep overlap scheduling")
    if ctx.flags.get("--speculative-token-map") and ctx.algo == "EAGLE3":
        ctx.add("SPEC_ARGS", "warning", "--speculative-token-map is ignored for EAGLE3",
                "EAGLE3 heads carry their vocabulary map as d2t in the checkpoint; SGLang warns and ignores the "
                "flag (FACTS.md §6).", "put d2t into the draft checkpoint (specdash draft fix --hot-token-ids)")
    planned = ctx.concurrency or res.max_running_requests
    if topk and topk > 1 and draft and draft > 8:
        ctx.add("SPEC_ARGS", "warning",
                f"topk {topk} / {draft} draft tokens is a batch-1 tree: every request verifies {draft} tokens per step"
                + (f" at up to {planned} concurrent requests" if planned else ""),
                "Tree verification cost grows with batch size; the EAGLE authors advise against trees for batch > 1 "
                "(public case C17, SafeAILab/EAGLE#298, #269: per-step latency rose > 3× with concurrency).",
                "for concurrency > 1 start from topk 1, steps 3, draft tokens 4 and sweep per concurrency level "
                "(specdash tune)", topk=topk, num_draft_tokens=draft, planned_concurrency=planned, case="C17")
    cg, cg_flag = _cuda_graph_max_bs(ctx.flags)
    if cg is not None and planned and cg < planned:
        # A known plan (or an explicit cap) is a real conflict; the default cap of 48 is only a ceiling, so
        # then only a batch-1-sized capture (≤ 4, C17's 2) is worth a warning.
        known = ctx.concurrency is not None or res.asked.get("max_running_requests") is not None
        ctx.add("SPEC_ARGS", "warning" if known or cg <= 4 else "info",
                f"{cg_flag} {cg} but up to {planned} requests run at once: decode batches larger than {cg} run without "
                "CUDA graphs", "Batches above the largest captured size fall back to eager execution (SGLang docs; "
                "public case C17).", f"raise the decode CUDA-graph max batch size to ≥ {planned} "
                f"({'--cuda-graph-max-bs-decode' if has_feature('cuda_graph_max_bs_decode_flag', ctx.version) else '--cuda-graph-max-bs'} "
                f"{planned}) or cap --max-running-requests at {cg}", cuda_graph_max_bs=cg,
                planned_concurrency=planned, case="C17")
    if topk and topk > 1 and steps and draft and draft != steps + 1:
        ceiling = steps / (draft - 1) if draft > 1 else None
        ctx.add("SPEC_ARGS", "info",
                f"tree drafting (steps {steps}, topk {topk}, draft tokens {draft}): SGLang's accept rate divides by "
                f"verify rounds × {draft - 1} tree nodes, but at most {steps} can be accepted per round"
                + (f" (ceiling {ceiling:.2f})" if ceiling is not None else ""),
                "accept rate = correct drafts / (rounds × (draft tokens − 1)), bonus excluded; accept length = "
                "tokens per verify round, bonus included (FACTS.md §11). Some releases computed the tree rate wrongly "
                "(public case C22, sglang PR #13212). specdash reports accept length from completion_tokens / "
                "spec_verify_ct and states each definition.", "compare tree configs by accept length and tok/s, not "
                "by accept rate", ceiling=ceiling, case="C22")


# --- CONTEXT_LEN ----------------------------------------------------------------------------------


def _parse_ctx(v) -> int | None:
    if v is None or v is True:
        return None
    s = str(v).strip().lower()
    try:
        if s.endswith("k"):
            return int(float(s[:-1]) * 1024)
        if s.endswith("m"):
            return int(float(s[:-1]) * 1024 * 1024)
        return int(float(s))
    except ValueError:
        return None


def _derived_len(md: ModelDir) -> int | None:
    for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions", "max_seq_len"):
        v = md.cfg(key)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _truthy(v: str | None) -> bool:
    return str(v or "").strip().lower() in ("1", "true", "yes", "on")


def _rule_context(ctx: _Ctx) -> None:
    d = ctx.draft
    asked = _parse_ctx(ctx.flags.get("--context-length"))
    t_len = _derived_len(ctx.target) if ctx.target is not None else None
    serving = asked or t_len
    env_val = ctx.env.get(_CTX_ENV)
    env_src = "[env]" if env_val is not None else None
    if env_val is None and os.environ.get(_CTX_ENV) is not None:
        env_val, env_src = os.environ.get(_CTX_ENV), "the calling environment"
    allowed = _truthy(env_val)
    msg_tpl = ("Warning: Target model's context_length ({x}) is greater than the derived context_length ({y}). "
               "… set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    if asked and t_len and asked > t_len and not allowed:
        ctx.add("CONTEXT_LEN", "error",
                f"--context-length {asked} exceeds the target's derived length {t_len} "
                f"and {_CTX_ENV} is not set",
                "ModelConfig._derive_context_length raises ValueError at start-up: '"
                + msg_tpl.format(x=asked, y=t_len) + "' (FACTS.md §6 step 12).",
                f"lower --context-length to ≤ {t_len}, or set {_CTX_ENV}=1 in [env]", asked=asked, target=t_len)
    if d is None or not _eagle_algo(ctx) or not serving:
        return
    d_len = _derived_len(d.model)
    if not d_len or d_len >= serving:
        return
    ev = {"draft_max_position_embeddings": d_len, "serving_context": serving, "env": env_val, "env_from": env_src}
    if allowed:
        ctx.add("CONTEXT_LEN", "warning",
                f"the draft was built for {d_len} positions (max_position_embeddings) but serves contexts up to "
                f"{serving}; {_CTX_ENV}={env_val} ({env_src}) lets it start",
                "The head was trained up to its max_position_embeddings; past it acceptance falls and the draft/verify "
                "overhead can make long prompts slower than no speculation (public case C16, sglang#6783; "
                "SafeAILab/EAGLE#311).", "bucket benchmark results by input length; serve long-context traffic "
                "without speculation or use a draft trained on longer sequences", case="C16", **ev)
    else:
        ctx.add("CONTEXT_LEN", "error",
                f"the draft's max_position_embeddings {d_len} < serving context {serving} and {_CTX_ENV} is not set",
                "The draft is built with the target's context length; ModelConfig._derive_context_length raises "
                "ValueError('" + msg_tpl.format(x=serving, y=d_len) + "') at start-up (eagle_worker_v2.py, FACTS.md "
                "§6 step 12).", f"add {_CTX_ENV} = \"1\" to [env] (expect lower acceptance beyond {d_len} tokens), or "
                f"set [server] context_length = {d_len}", case="C16", **ev)


# --- DTYPE ----------------------------------------------------------------------------------------


def _norm_dtype(v) -> str | None:
    if not v:
        return None
    s = str(v).replace("torch.", "").lower()
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}.get(s, s)


def _rule_dtype(ctx: _Ctx) -> None:
    d, t = ctx.draft, ctx.target
    if d is None or not _eagle_algo(ctx):
        return
    server_dtype = _norm_dtype(ctx.flags.get("--dtype"))
    if server_dtype and server_dtype != "auto":
        return
    dd = _norm_dtype(d.model.torch_dtype)
    td = _norm_dtype(t.torch_dtype) if t is not None else None
    archs = d.model.architectures
    runs = dd if dd and dd != "float32" else ("bfloat16" if any("Gemma" in a for a in archs) else "float16")
    ev = {"draft_dtype": dd, "target_dtype": td, "draft_runs_as": runs}
    if dd in (None, "float32"):
        ctx.add("DTYPE", "warning",
                f"the draft's config.json says torch_dtype {dd or '(none)'}: under --dtype auto SGLang runs it in "
                f"{runs}" + (f" while the target runs in {td}" if td else ""),
                "_get_and_verify_dtype downcasts a float32 (or missing) config dtype to float16 "
                "(configs/model_config.py); bfloat16 hidden states above 65504 overflow in float16.",
                f"set \"torch_dtype\": \"{td or 'bfloat16'}\" in the draft's config.json (or pass --dtype {td or 'bfloat16'})",
                **ev)
    elif td and dd != td and td in ("bfloat16", "float16"):
        ctx.add("DTYPE", "warning", f"draft dtype {dd} ≠ target dtype {td}",
                "The target's hidden states are cast to the draft's dtype; float16 cannot hold bfloat16's range.",
                f"set \"torch_dtype\": \"{td}\" in the draft's config.json", **ev)
    counts: dict[str, int] = {}
    for ti in d.model.tensors.values():
        if ti.dtype in ("BF16", "F16", "F32"):
            counts[ti.dtype] = counts.get(ti.dtype, 0) + 1
    if counts:
        main = max(counts, key=counts.get)
        main_name = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[main]
        if dd and main_name != dd:
            ctx.add("DTYPE", "info", f"draft tensors are stored as {main_name} but config.json says {dd}",
                    "SGLang casts at load time; the file is larger (float32) or less precise than declared.", "",
                    stored=counts, **ev)


# --- MEMORY ---------------------------------------------------------------------------------------


def _gib(b: float) -> str:
    """Bytes as GiB (MiB/KiB below 1 GiB)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{int(b)} B"


def _kv_bytes_per_token(md: ModelDir, kv_dtype_bytes: int) -> int | None:
    L = md.num_hidden_layers
    if not L:
        return None
    if md.cfg("kv_lora_rank"):
        return int(L) * (int(md.cfg("kv_lora_rank")) + int(md.cfg("qk_rope_head_dim") or 64)) * kv_dtype_bytes
    heads = md.cfg("num_attention_heads")
    h = md.hidden_size
    if not heads or not h:
        return None
    kv = md.cfg("num_key_value_heads") or heads
    hd = md.cfg("head_dim") or h // heads
    return 2 * int(L) * int(kv) * int(hd) * kv_dtype_bytes


def _rule_memory(ctx: _Ctx) -> None:
    t = ctx.target
    if t is None:
        return
    tw = t.weight_bytes() or 0
    dw = 0
    if ctx.draft is not None and _eagle_algo(ctx):
        dm = ctx.draft.model
        dw = dm.weight_bytes() or 0
        emb = dm.tensors.get("embed_tokens.weight")
        shares = not (ctx.draft.target_hidden_size and ctx.draft.target_hidden_size != dm.hidden_size)
        if emb is not None and shares and ctx.algo == "EAGLE3":
            dw -= int(np.prod(emb.shape)) * (4 if emb.dtype == "F32" else 2)  # replaced by the target's embedding
    if not tw:
        return
    tp = int(ctx.profile.server.tp_size or 1)
    per_gpu = (tw + max(dw, 0)) / tp
    frac = ctx.profile.server.mem_fraction_static
    ev = {"target_weight_bytes": tw, "draft_weight_bytes": max(dw, 0), "tp_size": tp, "per_gpu_bytes": per_gpu,
          "mem_fraction_static": frac}
    sizes = f"target {_gib(tw)} + draft {_gib(max(dw, 0))} of weights = {_gib(per_gpu)} per GPU at tp {tp}"
    c20 = ("Weights, the KV pool and CUDA-graph buffers must fit in mem_fraction_static × GPU memory; with a draft, "
           "older releases applied the fraction twice and mis-estimated draft memory (public case C20, sglang#6875; "
           "PR #28855 counts draft weights against --mem-fraction-static).")
    if not ctx.gpus:
        ctx.add("MEMORY", "info", f"{sizes} (from safetensors headers); GPU memory unknown",
                c20, "run on the GPU host, or pass GPU memory (specdash doctor --gpu-memory-mib N), to have it checked",
                **ev)
        return
    gpus = ctx.gpus
    if len(gpus) < tp:
        ctx.add("MEMORY", "error", f"tp_size {tp} but only {len(gpus)} GPU(s) are visible",
                "SGLang starts one worker per tensor-parallel rank, each on its own GPU.",
                f"set [server] tp_size ≤ {len(gpus)} or make {tp} GPUs visible", gpus=len(gpus), tp_size=tp)
        return
    mem = min(float(g.get("memory_total_mib") or 0) for g in gpus[:tp]) * 2**20
    if not mem:
        return
    f_eff = frac if frac is not None else 0.85
    budget = f_eff * mem
    ev.update(gpu_memory_bytes=mem, budget_bytes=budget, gpu=gpus[0].get("name"))
    frac_txt = f"mem_fraction_static {frac}" if frac is not None else "mem_fraction_static auto (≈0.85 assumed)"
    if per_gpu > mem:
        ctx.add("MEMORY", "error", f"{sizes}, more than the {_gib(mem)} of a {gpus[0].get('name', 'GPU')}",
                c20, "raise tp_size, quantise the target, or use a smaller draft", **ev)
        return
    if per_gpu > budget:
        need = per_gpu / mem
        ctx.add("MEMORY", "error", f"{sizes} exceed {frac_txt} × {_gib(mem)} = {_gib(budget)}",
                c20 + " SGLang stops with 'Not enough memory. Please try to increase --mem-fraction-static.' or CUDA "
                "out of memory.", f"--mem-fraction-static ≥ {min(0.95, need + 0.1):.2f} (weights alone need {need:.2f}"
                "), or raise tp_size / shrink the draft", **ev)
        return
    kv_bytes = 1 if "fp8" in str(ctx.flags.get("--kv-cache-dtype") or "") else 2
    kvt = _kv_bytes_per_token(t, kv_bytes)
    free = budget - per_gpu
    if kvt:
        tokens = int(free / (kvt / tp))
        ev["kv_tokens_estimate"] = tokens
        ctx_len = _parse_ctx(ctx.flags.get("--context-length")) or _derived_len(t) or 0
        if ctx_len and tokens < ctx_len:
            ctx.add("MEMORY", "warning",
                    f"{sizes} leave {_gib(free)} of {frac_txt} × {_gib(mem)} for the KV pool: ≈{tokens} tokens, less "
                    f"than one {ctx_len}-token context", c20,
                    "raise --mem-fraction-static or tp_size, or lower --context-length", **ev)
            return
    if frac is not None and frac > 0.95:
        ctx.add("MEMORY", "warning", f"mem_fraction_static {frac} leaves under 5 % for activations and CUDA graphs",
                c20, "use ≤ 0.9", **ev)
        return
    ctx.add("MEMORY", "info", f"{sizes} fit in {frac_txt} × {_gib(mem)} = {_gib(budget)}"
            + (f"; ≈{ev['kv_tokens_estimate']} KV tokens left" if "kv_tokens_estimate" in ev else ""),
            c20, "", **ev)


__all__ = [
    "EAGLE2_ARCHS",
    "EAGLE3_ARCHS",
    "SEVERITIES",
    "SGLANG_EAGLE3_ARCHS",
    "DoctorReport",
    "Finding",
    "capture_plan",
    "render_findings",
    "run_doctor",
]
