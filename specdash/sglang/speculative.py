"""SGLang's start-up normalisation of the speculative arguments: what the server will *really* run.

This is the single place that knows it: the launcher shows asked vs effective values from
here, the preflight doctor's SPEC_ARGS rule reports from here, the advisor only proposes
settings that survive it, and the simulator applies it to its own flags.

The rules follow SGLang 0.5.23's ``python/sglang/srt/arg_groups/speculative_hook.py``
(``_handle_eagle_family``, ``_auto_choose_speculative_params``, the NGRAM and DFLASH
branches; 0.5.10 had them in ``server_args.py::_handle_speculative_decoding``), with the
differences between releases from :mod:`specdash.sglang.versions`.  They were checked
against a real 0.5.14 server: steps 1 / topk 1 / draft tokens 16 start with draft
tokens 2 and one WARNING line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from specdash.sglang.adaptive import flag_int
from specdash.sglang.versions import DEFAULT_VERSION, has_feature

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")


def _release_facts(version: str):
    from specdash.sglang.facts import facts_for, facts_newest

    try:
        return facts_for(version) or facts_newest()
    except ValueError:
        return facts_newest()

#: SGLang log lines for the silent adjustments (quoted from ``arg_groups/speculative_hook.py``).
LOG_TOPK1_ADJUST = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
)
LOG_MAX_RUNNING_48 = (
    "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
    "setting --max-running-requests."
)

# Architectures whose auto-chosen (steps, topk, draft tokens) is (5, 4, 8)
# (``_auto_choose_speculative_params`` in ``arg_groups/speculative_hook.py``).
_AUTO_5_4_8 = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1ModelForCausalLM", "Grok1AForCausalLM")


@dataclass(frozen=True)
class Adjustment:
    """A value SGLang changes silently (or with one log line) at start-up.

    ``field`` is the ServerArgs name (e.g. ``speculative_num_draft_tokens``); ``asked``
    is what the command line said (None = not given), ``effective`` what the server runs;
    ``log_line`` the line SGLang prints (empty when it prints nothing).
    """

    field: str
    asked: Any
    effective: Any
    reason: str
    log_line: str = ""


@dataclass(frozen=True)
class Rejection:
    """A combination SGLang refuses at start-up: ``exception`` is what it raises."""

    message: str
    exception: str = "ValueError"
    fix: str = ""


@dataclass
class SpecResolution:
    """What the server will run for the speculative flags (all ``None`` without speculation).

    ``asked`` holds the flags as given; ``adjustments`` the silent changes; ``rejections``
    the reasons the server would refuse to start; ``auto_chosen`` is True when SGLang
    picked steps/topk/draft tokens itself.
    """

    algorithm: str | None
    num_steps: int | None
    eagle_topk: int | None
    num_draft_tokens: int | None
    max_running_requests: int | None
    asked: dict[str, Any] = field(default_factory=dict)
    adjustments: list[Adjustment] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    auto_chosen: bool = False
    version: str = DEFAULT_VERSION

    @property
    def enabled(self) -> bool:
        """True when a speculative algorithm is on."""
        return self.algorithm is not None

    def effective(self) -> dict[str, Any]:
        """The four resolved speculative values by ServerArgs name (a run manifest's
        ``effective`` block; what ``/server_info`` reports for them)."""
        return {
            "speculative_algorithm": self.algorithm,
            "speculative_num_steps": self.num_steps,
            "speculative_eagle_topk": self.eagle_topk,
            "speculative_num_draft_tokens": self.num_draft_tokens,
        }


def tree_capacity(steps: int, topk: int) -> int:
    """Most tokens an EAGLE tree of ``steps`` × ``topk`` can verify: 1 + topk + (steps − 1)·topk².

    SGLang scores topk candidates at the first draft step and topk² at each later one, then
    keeps the best ``num_draft_tokens − 1`` of them (``torch.topk`` fails when asked for
    more); SGLang's ``scripts/playground/bench_speculative.py`` filters settings by the same bound.
    """
    return 1 + topk + (steps - 1) * topk * topk


def auto_spec_params(algorithm: str, target_architectures: list[str] | None) -> tuple[int, int, int]:
    """SGLang's ``_auto_choose_speculative_params`` (``arg_groups/speculative_hook.py``):
    (steps, topk, draft tokens) for an EAGLE-family algorithm given without them."""
    if algorithm == "STANDALONE":
        return (3, 1, 4)
    archs = target_architectures or []
    if any(a in _AUTO_5_4_8 or a.startswith("Grok1") for a in archs):
        return (5, 4, 8)
    return (3, 1, 4)


def normalize_speculative(
    algorithm: str | None,
    num_steps: int | None,
    eagle_topk: int | None,
    num_draft_tokens: int | None,
    *,
    version: str = DEFAULT_VERSION,
    target_architectures: list[str] | None = None,
    max_running_requests: int | None = None,
    page_size: int | None = None,
    attention_backend: str | None = None,
    use_rejection_sampling: bool = False,
    draft_vocab_size: int | None = None,
    target_vocab_size: int | None = None,
    env: dict[str, str] | None = None,
    draft_architectures: list[str] | None = None,
    flags: dict[str, Any] | None = None,
) -> SpecResolution:
    """Apply SGLang's start-up normalisation to the speculative flags.

    Args:
        algorithm: ``--speculative-algorithm`` as typed (case-insensitive), or None.
        num_steps, eagle_topk, num_draft_tokens: the three flags, None when not given.
        version: the SGLang release judged against (``versions.py``).
        target_architectures: the target ``config.json`` ``architectures`` (for auto-params).
        max_running_requests, page_size, attention_backend: the matching server flags.
        use_rejection_sampling: ``--speculative-use-rejection-sampling``.
        draft_vocab_size, target_vocab_size: for the rejection-sampling vocab rule.
        env: the server's environment (``SGLANG_ENABLE_SPEC_V2`` on older releases).
        draft_architectures: the draft ``config.json`` ``architectures`` (algorithm promotions such as a
            Gemma-4 assistant draft → ``FROZEN_KV_MTP``, and the algorithms refused for it).
        flags: every other server flag (canonical name → value): the argument checks the release's
            facts name (LoRA with speculative decoding, DFLASH's block size) read them.

    Returns:
        A :class:`SpecResolution`; never raises for bad combinations — those become
        ``rejections`` so callers can show all of them at once.
    """
    env = env or {}
    asked = {
        "speculative_algorithm": algorithm,
        "speculative_num_steps": num_steps,
        "speculative_eagle_topk": eagle_topk,
        "speculative_num_draft_tokens": num_draft_tokens,
        "max_running_requests": max_running_requests,
    }
    res = SpecResolution(None, None, None, None, max_running_requests, asked=asked, version=str(version))
    if not algorithm or str(algorithm).upper() in ("NONE", ""):
        return res
    algo = str(algorithm).upper()
    facts = _release_facts(version)
    known = facts.algorithms
    if algo not in known:
        res.rejections.append(
            Rejection(
                f"Unknown speculative algorithm name: {algorithm}",
                "ValueError",
                f"use one of {', '.join(a for a in known if not facts.alias(a) and a != 'FROZEN_KV_MTP')} "
                f"(SGLang {facts.release} {facts.data.get('algorithms', {}).get('src', 'spec_info.py')})",
            )
        )
        return res
    typed = algo
    refused = facts.refusal_for_draft(draft_architectures or [], algo)
    if refused:
        res.rejections.append(Rejection(refused["message"], "ValueError",
                                        f"serve this draft with --speculative-algorithm NEXTN (SGLang {facts.release} "
                                        f"{refused['src']})"))
        return res
    alias = facts.alias(algo)
    promo = facts.promotion(draft_architectures or [], typed)
    if alias and not promo:
        res.adjustments.append(Adjustment("speculative_algorithm", algorithm, alias[0],
                                          f"{algo} is an alias of {alias[0]} (SGLang {facts.release} {alias[1]})"))
        algo = alias[0]
    if promo:
        res.adjustments.append(Adjustment(
            "speculative_algorithm", algorithm, promo["algorithm"],
            f"a {promo['arch']} draft promotes {typed} to {promo['algorithm']} (SGLang {facts.release} {promo['src']})"))
        algo = promo["algorithm"]
    res.algorithm = algo
    _lora_check(res, facts, algo, flags or {})

    if algo not in EAGLE_FAMILY:
        return _normalize_other(res, algo, num_steps, eagle_topk, num_draft_tokens, facts, flags or {})

    # EAGLE / EAGLE3 / STANDALONE (`_handle_eagle_family`).
    if max_running_requests is None:
        res.max_running_requests = 48
        res.adjustments.append(
            Adjustment("max_running_requests", None, 48, "speculative default", LOG_MAX_RUNNING_48)
        )
    steps, topk, draft = num_steps, eagle_topk, num_draft_tokens
    if steps is None:
        if topk is not None or draft is not None:
            res.rejections.append(
                Rejection(
                    "--speculative-eagle-topk / --speculative-num-draft-tokens given without "
                    "--speculative-num-steps: SGLang asserts all three are unset before auto-choosing "
                    "(bare AssertionError at start-up)",
                    "AssertionError",
                    "pass all three of --speculative-num-steps, --speculative-eagle-topk and "
                    "--speculative-num-draft-tokens, or none of them",
                )
            )
            return res
        steps, topk, draft = auto_spec_params(algo, target_architectures)
        res.auto_chosen = True
        for name, value in (
            ("speculative_num_steps", steps),
            ("speculative_eagle_topk", topk),
            ("speculative_num_draft_tokens", draft),
        ):
            res.adjustments.append(Adjustment(name, None, value, "auto-chosen by SGLang"))
    elif topk is None:
        res.rejections.append(
            Rejection(
                "--speculative-num-steps given without --speculative-eagle-topk: SGLang compares the unset "
                "topk with 1 later and fails at start-up (TypeError)",
                "TypeError",
                "pass --speculative-eagle-topk (1 for a chain) and --speculative-num-draft-tokens too",
            )
        )
        return res

    if steps is not None and steps < 1:
        res.rejections.append(Rejection(f"--speculative-num-steps must be >= 1 (got {steps})", "ValueError"))
    if topk is not None and topk < 1:
        res.rejections.append(Rejection(f"--speculative-eagle-topk must be >= 1 (got {topk})", "ValueError"))

    if use_rejection_sampling:
        if topk != 1:
            res.rejections.append(
                Rejection(
                    f"--speculative-use-rejection-sampling requires --speculative-eagle-topk 1 (got {topk})",
                    "ValueError",
                    "use topk 1, or drop rejection sampling",
                )
            )
        if draft_vocab_size and target_vocab_size and draft_vocab_size != target_vocab_size:
            res.rejections.append(
                Rejection(
                    f"rejection sampling needs the draft vocab to equal the target vocab "
                    f"(draft_vocab_size {draft_vocab_size} vs {target_vocab_size})",
                    "ValueError",
                    "drop --speculative-use-rejection-sampling for a reduced-vocab EAGLE3 draft",
                )
            )

    if topk == 1 and draft != steps + 1:
        res.adjustments.append(
            Adjustment(
                "speculative_num_draft_tokens",
                num_draft_tokens,
                steps + 1,
                "topk 1 (a chain) verifies exactly steps + 1 tokens",
                LOG_TOPK1_ADJUST,
            )
        )
        draft = steps + 1
    elif topk is not None and topk > 1 and draft is None:
        res.rejections.append(
            Rejection(
                "--speculative-num-draft-tokens is required with --speculative-eagle-topk > 1",
                "ValueError",
                "pass --speculative-num-draft-tokens (at most 1 + topk + (steps - 1) * topk^2)",
            )
        )
    if topk is not None and topk > 1:
        if draft is not None and steps is not None and draft > tree_capacity(steps, topk):
            res.rejections.append(
                Rejection(
                    f"--speculative-num-draft-tokens {draft} exceeds what a tree of steps {steps} / topk {topk} "
                    f"can hold ({tree_capacity(steps, topk)} = 1 + topk + (steps - 1) * topk^2): SGLang's tree "
                    "builder fails in torch.topk at the first speculative step",
                    "RuntimeError",
                    f"use at most {tree_capacity(steps, topk)} draft tokens, or more steps / a larger topk",
                )
            )
        if (page_size or 1) > 1 and (attention_backend or "") not in ("flashinfer", "fa3", "triton"):
            res.rejections.append(
                Rejection(
                    f"topk {topk} with --page-size {page_size} needs attention backend flashinfer, fa3 or "
                    f"triton (got {attention_backend or 'the default'})",
                    "ValueError",
                    "use --page-size 1, topk 1, or one of those attention backends",
                )
            )
        if attention_backend == "trtllm_mha":
            res.rejections.append(
                Rejection("trtllm_mha does not support --speculative-eagle-topk > 1", "ValueError", "use topk 1")
            )
        if has_feature("spec_v2_env", version) and env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in (
            "1",
            "true",
        ):
            res.rejections.append(
                Rejection(
                    f"SGLANG_ENABLE_SPEC_V2=1 supports only chain drafting (topk 1) on SGLang {version}; "
                    f"got topk {topk}, draft tokens {draft}: start-up fails with 'Spec v2 currently only "
                    "supports topk = 1 for speculative decoding.'",
                    "ValueError",
                    f"use topk 1, steps {steps}, draft tokens {steps + 1}, or unset SGLANG_ENABLE_SPEC_V2",
                )
            )
    res.num_steps, res.eagle_topk, res.num_draft_tokens = steps, topk, draft
    return res


def _lora_check(res: SpecResolution, facts, algo: str, flags: dict[str, Any]) -> None:
    """SGLang's refusal of LoRA with speculative decoding, as the release's facts state it
    (``checks.lora_speculative``: the algorithms allowed with LoRA, whether ``--speculative-adaptive`` is
    refused too; ``server_args.py`` ``check_lora_server_args`` ≤ 0.5.18, ``arg_groups/lora_hook.py``
    ``check_lora_speculative_compatibility`` 0.5.19+)."""
    chk = facts.check("lora_speculative")
    lora = bool(flags.get("--enable-lora")) or bool(flags.get("--lora-paths"))
    if not chk or not lora or str(flags.get("--enable-lora", "")).lower() == "false":
        return
    allowed = set(chk.get("allowed") or [])
    where = f"SGLang {facts.release} {chk['src']}"
    if algo not in allowed:
        res.rejections.append(Rejection(
            f"{chk['message'].replace('{cfg.speculative_algorithm}', algo).replace('{promoted}', '')} "
            f"(--enable-lora / --lora-paths with --speculative-algorithm {algo}; {where})", "ValueError",
            f"drop the LoRA adapters or serve with one of {', '.join(sorted(allowed))}; "
            + ("a later release allows EAGLE/EAGLE3 with LoRA (SGLang PR #34337)" if allowed == {"NGRAM"} else "")))
    elif chk.get("adaptive_refused") and flags.get("--speculative-adaptive"):
        reason = chk.get("adaptive_reason") or "does not support --speculative-adaptive"
        res.rejections.append(Rejection(
            f"LoRA with EAGLE/NEXTN/EAGLE3 speculative decoding {reason}. ({where})", "ValueError",
            "drop --speculative-adaptive (or the LoRA adapters)"))


def _normalize_other(res: SpecResolution, algo: str, steps, topk, draft, facts=None,
                     flags: dict[str, Any] | None = None) -> SpecResolution:
    """NGRAM / DFLASH rules (the NGRAM and DFLASH branches of ``arg_groups/speculative_hook.py``; DFLASH's
    ``--speculative-dflash-block-size`` check from the release's facts); DSPARK/UNO/FROZEN_KV_MTP keep what
    was given."""
    flags = flags or {}
    if res.max_running_requests is None:
        res.max_running_requests = 48
        res.adjustments.append(Adjustment("max_running_requests", None, 48, "speculative default", LOG_MAX_RUNNING_48))
    if algo == "NGRAM":
        topk_eff = 10
        draft_eff = draft if draft is not None else 12
        if topk != topk_eff:
            res.adjustments.append(Adjustment("speculative_eagle_topk", topk, topk_eff, "= ngram max BFS breadth"))
        if draft is None:
            res.adjustments.append(Adjustment("speculative_num_draft_tokens", None, 12, "NGRAM default"))
        steps_eff = draft_eff // topk_eff
        if steps != steps_eff:
            res.adjustments.append(Adjustment("speculative_num_steps", steps, steps_eff, "= draft tokens // topk"))
        res.num_steps, res.eagle_topk, res.num_draft_tokens = steps_eff, topk_eff, draft_eff
    elif algo == "DFLASH":
        for name, val in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk)):
            if val not in (None, 1):
                res.adjustments.append(Adjustment(name, val, 1, "DFLASH forces 1"))
        block = flag_int(flags.get("--speculative-dflash-block-size"))
        chk = facts.check("dflash_block_size_mismatch") if facts is not None else None
        if block is not None and chk is not None:
            if block <= 0:
                res.rejections.append(Rejection(
                    f"DFLASH requires --speculative-dflash-block-size to be positive, got {block}. "
                    f"(SGLang {facts.release} {chk['src']})", "ValueError", "use the draft's block_size"))
            elif draft is not None and draft != block:
                msg = re.sub(r"\{[^}]*num_draft_tokens\}", str(draft), chk["message"])
                msg = re.sub(r"\{[^}]*dflash_block_size\}", str(block), msg)
                res.rejections.append(Rejection(
                    f"{msg} (SGLang {facts.release} {chk['src']})", "ValueError",
                    f"give one of them: --speculative-dflash-block-size {block} is an alias of "
                    "--speculative-num-draft-tokens for DFLASH (and should match the draft's block_size)"))
            else:
                if draft is None:
                    res.adjustments.append(Adjustment("speculative_num_draft_tokens", None, block,
                                                      "= --speculative-dflash-block-size"))
                draft = block
        res.num_steps, res.eagle_topk, res.num_draft_tokens = 1, 1, draft if draft is not None else 16
    else:
        res.num_steps, res.eagle_topk, res.num_draft_tokens = steps, topk, draft
    return res


def resolve_flags(
    flags: dict[str, Any],
    *,
    version: str = DEFAULT_VERSION,
    env: dict[str, str] | None = None,
    target_architectures: list[str] | None = None,
    draft_vocab_size: int | None = None,
    target_vocab_size: int | None = None,
    draft_architectures: list[str] | None = None,
) -> SpecResolution:
    """:func:`normalize_speculative` applied to canonical SGLang flags (``--name`` → value, as
    parsed by :func:`specdash.sglang.cmdline.parse_command_line` or built by
    :func:`specdash.profile.server_flags`); unparseable numbers count as not given."""
    return normalize_speculative(
        flags.get("--speculative-algorithm"),
        flag_int(flags.get("--speculative-num-steps")),
        flag_int(flags.get("--speculative-eagle-topk")),
        flag_int(flags.get("--speculative-num-draft-tokens")),
        version=version,
        target_architectures=target_architectures,
        max_running_requests=flag_int(flags.get("--max-running-requests")),
        page_size=flag_int(flags.get("--page-size")),
        attention_backend=flags.get("--attention-backend"),
        use_rejection_sampling=bool(flags.get("--speculative-use-rejection-sampling"))
        or bool(flags.get("--speculative-use-block-verification")),
        draft_vocab_size=draft_vocab_size,
        target_vocab_size=target_vocab_size,
        env=env,
        draft_architectures=draft_architectures,
        flags=flags,
    )

