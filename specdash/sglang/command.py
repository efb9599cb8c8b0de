"""Profile → SGLang argv + env, and SGLang's own normalisation of speculative arguments.

This is the single place that knows what SGLang will *really* run for a given set of
launch flags (DESIGN.md "one source of truth"): the launcher shows asked vs effective
values from here, the preflight doctor's SPEC_ARGS rule reports from here, the advisor
only proposes settings that survive it, and the simulator applies it to its own flags.

The rules follow SGLang 0.5.23 ``arg_groups/speculative_hook.py`` as summarised in
``../shared/sglang/FACTS.md`` §6 (with version differences from ``versions.py``), and
were checked against a real 0.5.14 server (``../shared/sglang/golden/runs/eagle3_steps1_draft16``:
steps 1 / topk 1 / draft tokens 16 → 2 with one WARNING line).
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specdash.sglang.versions import DEFAULT_VERSION, has_feature

if TYPE_CHECKING:  # pragma: no cover
    from specdash.profile import Profile

#: Speculative algorithms SGLang accepts (FACTS.md §6); ``NEXTN`` is an alias of EAGLE.
KNOWN_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")

#: SGLang log lines for the silent adjustments (quoted from SGLang; FACTS.md §5/§6).
LOG_TOPK1_ADJUST = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
)
LOG_MAX_RUNNING_48 = (
    "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
    "setting --max-running-requests."
)

# Architectures whose auto-chosen (steps, topk, draft tokens) is (5, 4, 8) — FACTS.md §6 step 7.
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
        """The four values CONTRACTS.md's ``effective`` block reports."""
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
    """SGLang's ``_auto_choose_speculative_params`` (FACTS.md §6 step 7): (steps, topk, draft tokens)."""
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
    if algo not in KNOWN_ALGORITHMS:
        res.rejections.append(
            Rejection(
                f"Unknown speculative algorithm name: {algorithm}",
                "ValueError",
                f"use one of {', '.join(a for a in KNOWN_ALGORITHMS if a != 'NEXTN')}",
            )
        )
        return res
    if algo == "NEXTN":
        res.adjustments.append(Adjustment("speculative_algorithm", algorithm, "EAGLE", "NEXTN is an alias of EAGLE"))
        algo = "EAGLE"
    res.algorithm = algo

    if algo in ("NGRAM", "DFLASH", "DSPARK", "UNO"):
        return _normalize_other(res, algo, num_steps, eagle_topk, num_draft_tokens)

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


def _normalize_other(res: SpecResolution, algo: str, steps, topk, draft) -> SpecResolution:
    """NGRAM / DFLASH rules (FACTS.md §6 steps 8–9); DSPARK/UNO keep what was given."""
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
        res.num_steps, res.eagle_topk, res.num_draft_tokens = 1, 1, draft if draft is not None else 16
    else:
        res.num_steps, res.eagle_topk, res.num_draft_tokens = steps, topk, draft
    return res


# --- SGLang command lines ---------------------------------------------------------------------

#: Flags specdash maps to profile fields (canonical name → aliases SGLang accepts).
FLAG_ALIASES: dict[str, tuple[str, ...]] = {
    "--model-path": ("--model",),
    "--tp-size": ("--tensor-parallel-size", "--tp"),
    "--speculative-draft-model-path": ("--speculative-draft-model",),
}
#: Flags that take no value (store_true) among those specdash reads.
BOOL_FLAGS = frozenset(
    {
        "--enable-metrics",
        "--trust-remote-code",
        "--disable-custom-all-reduce",
        "--disable-cuda-graph",
        "--disable-overlap-schedule",
        "--enable-cache-report",
        "--speculative-use-rejection-sampling",
        "--speculative-use-block-verification",
        "--disable-radix-cache",
        "--enable-mixed-chunk",
        "--enable-dp-attention",
        "--skip-server-warmup",
        "--disable-prefill-cuda-graph",
        "--disable-decode-cuda-graph",
        "--enable-torch-compile",
        "--speculative-adaptive",
        "--enable-multi-layer-eagle",
        "--incremental-streaming-output",
        "--stream-response-default-include-usage",
        "--enable-return-aux-hidden-states",
        "--enable-memory-saver",
        "--log-requests",
        "--enable-hierarchical-cache",
    }
)


@dataclass
class ParsedCommand:
    """An SGLang launch command line split into parts.

    ``env``: ``NAME=value`` assignments (in front of the command, in ``export`` statements
    or as ``VAR=… python …`` prefixes); ``program``: the words before the first flag (e.g.
    ``['python3', '-m', 'sglang.launch_server']``, launcher words such as ``uv run`` kept);
    ``flags``: canonical flag → value (``True`` for a bare flag; repeated flags keep the
    last value, as argparse does); ``order``: flags in the order typed; ``notes``: what the
    parser skipped or rewrote (``sudo``, other statements, expanded abbreviations).
    """

    env: dict[str, str]
    program: list[str]
    flags: dict[str, Any]
    order: list[str]
    notes: list[str] = field(default_factory=list)

    def get(self, flag: str, default=None):
        """The value of ``flag`` (canonical ``--name``) or ``default``."""
        return self.flags.get(flag, default)


class AmbiguousFlagError(ValueError):
    """A flag abbreviation that is a prefix of several long options (argparse exits 2)."""

    def __init__(self, flag: str, candidates: list[str], version: str | None = None):
        self.flag, self.candidates = flag, candidates
        where = f"SGLang {version}" if version else "SGLang"
        super().__init__(
            f"ambiguous option: {flag} could match {', '.join(candidates)} "
            f"({where} exits 2 on it; type the full flag name)"
        )


#: Flags specdash models itself (profile fields, the bare flags above): abbreviations are
#: expanded against these as well as against the release's own list.
MODELED_FLAGS = frozenset(
    set(FLAG_ALIASES)
    | BOOL_FLAGS
    | {
        "--mem-fraction-static",
        "--host",
        "--port",
        "--context-length",
        "--api-key",
        "--speculative-algorithm",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--max-running-requests",
        "--page-size",
        "--attention-backend",
    }
)


def abbreviation_targets(version: str | None = None) -> set[str]:
    """The long options an abbreviation may expand to: the ones SGLang ``version`` (default
    :data:`DEFAULT_VERSION`) accepts plus :data:`MODELED_FLAGS`."""
    from specdash.sglang.versions import known_flags

    return set(known_flags(version or DEFAULT_VERSION) or ()) | set(MODELED_FLAGS)


def canonical_flag(flag: str, known: set[str] | frozenset[str] | None = None, *, version: str | None = None) -> str:
    """Map an alias (``--model``, ``--tp``) to the canonical flag; ``_`` → ``-``.

    With ``known`` (see :func:`abbreviation_targets`), abbreviations are expanded as
    argparse does (``allow_abbrev``): an exact name (or alias) wins, a unique prefix of a
    known option expands to it, a flag no list has is kept as typed.

    Raises:
        AmbiguousFlagError: ``known`` is given and ``flag`` is a prefix of several options.
    """
    flag = "--" + flag.lstrip("-").replace("_", "-")
    aliases = {a: canon for canon, names in FLAG_ALIASES.items() for a in names}
    if known is not None and flag not in known and flag not in aliases:
        matches = sorted(k for k in known if k.startswith(flag))
        if len(matches) > 1:
            raise AmbiguousFlagError(flag, matches, version)
        if matches:
            flag = matches[0]
    return aliases.get(flag, flag)


#: Words in front of a command that only change how it runs (skipped; ``sudo``/``env``
#: options too).
_WRAPPERS = {"sudo", "env", "nohup", "exec", "time", "command", "$", "#"}
#: Options of the wrappers above that take a value (``sudo -u root``, ``env -u NAME``).
_WRAPPER_VALUE_OPTS = {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-S"}
_SEPARATOR_CHARS = frozenset(";&|\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PROMPT = re.compile(r"[$#](?:[ \t]+|(?=\r?\n)|$)")


def _is_assignment(word: str) -> bool:
    return bool(_ASSIGNMENT.match(word))


def _clean_shell_text(text: str) -> str:
    """Join ``\\``-continued lines, drop ``$ ``/``# `` prompts at line starts, ``#`` comments
    and redirections (``> log 2>&1``), leaving quoted text alone."""
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    out: list[str] = []
    quote = None
    line_start = True
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            out.append(c)
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            i += 1
            continue
        if line_start:
            if c in " \t\r":
                out.append(c)
                i += 1
                continue
            m = _PROMPT.match(text, i)
            line_start = False
            if m:
                i = m.end()
                continue
        if c == "\n":
            line_start = True
        elif c == "\\" and i + 1 < n:
            out.append(c + text[i + 1])
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and (not out or out[-1][-1:] in " \t\n;&|"):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif c in "<>" or (c == "&" and text[i + 1 : i + 2] == ">"):
            while out and out[-1].isdigit() and len(out) > 1 and out[-2][-1:] in " \t":
                out.pop()  # the file descriptor in front: 2>&1
            i += 1
            while i < n and text[i] in "<>&":
                i += 1
            while i < n and text[i] in " \t":
                i += 1
            while i < n and text[i] not in " \t\r\n;|&":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _split_statements(text: str) -> list[list[str]]:
    """Split pasted shell text into statements (newlines, ``;``, ``&&``, ``||``, ``|``, ``&``).

    A line that starts with ``--`` continues the statement before it (a command pasted
    with its line breaks but without the backslashes)."""
    lex = shlex.shlex(_clean_shell_text(text), posix=True, punctuation_chars=";&|\n")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = ""
    statements: list[list[str]] = []
    current: list[str] = []
    after_newline = False
    for tok in lex:
        if tok and set(tok) <= _SEPARATOR_CHARS:
            if current:
                statements.append(current)
            current = []
            after_newline = set(tok) == {"\n"}
            continue
        if not current and after_newline and tok.startswith("--") and statements:
            current = statements.pop()
        current.append(tok)
        after_newline = False
    if current:
        statements.append(current)
    return statements


def _strip_prefixes(words: list[str], env: dict[str, str], notes: list[str]) -> list[str]:
    """Take ``export``/``VAR=…`` assignments into ``env``; skip ``sudo -E``, ``env``,
    ``nohup``, ``exec``, ``time`` and prompt tokens.  Returns the command words left."""
    i = 0
    while i < len(words):
        w = words[i]
        if w == "export":
            for a in words[i + 1 :]:
                if _is_assignment(a):
                    k, v = a.split("=", 1)
                    env[k] = v
            return []
        if _is_assignment(w):
            k, v = w.split("=", 1)
            env[k] = v
            i += 1
            continue
        if w in _WRAPPERS:
            if w not in ("$", "#"):
                notes.append(f"skipped `{w}` in front of the command")
            i += 1
            if w in ("sudo", "env", "time"):
                while i < len(words) and words[i].startswith("-") and not words[i].startswith("--"):
                    i += 2 if words[i] in _WRAPPER_VALUE_OPTS else 1
            continue
        break
    return words[i:]


def is_sglang_program(program: list[str]) -> bool:
    """True for ``… sglang.launch_server``, ``… launch_server.py``, ``… sglang serve``."""
    for j, w in enumerate(program):
        base = w.rsplit("/", 1)[-1]
        if "launch_server" in base:
            return True
        if base == "sglang" and j + 1 < len(program) and program[j + 1] == "serve":
            return True
    return False


def parse_command_line(text_or_argv: str | list[str], *, version: str | None = None) -> ParsedCommand:
    """Split a pasted launch command (``NCCL_X=1 python -m sglang.launch_server --flag v …``).

    A string is split like a shell would (:mod:`shlex`): quotes, backslash-newlines,
    ``$ ``/``# `` prompts and ``#`` comments; statements separated by newlines, ``;``,
    ``&&`` (``export A=1 B=2`` and ``A=1`` statements give the environment); the statement
    that runs SGLang (``sglang.launch_server``, ``launch_server``, ``sglang serve``) is the
    command, its ``VAR=…``, ``sudo [-E]``, ``env``, ``nohup``, ``exec``, ``time`` prefixes
    skipped (assignments go to ``env``).  An argv list is taken as one command.

    ``version``: when given, flag abbreviations are expanded as SGLang's argparse does
    (:func:`canonical_flag` against :func:`abbreviation_targets` of that release).

    Raises:
        ValueError: the text is empty or cannot be split (unbalanced quotes), holds several
            SGLang commands, or (with ``version``) an ambiguous abbreviation
            (:class:`AmbiguousFlagError`).
    """
    env: dict[str, str] = {}
    notes: list[str] = []
    if isinstance(text_or_argv, str):
        try:
            statements = _split_statements(text_or_argv)
        except ValueError as exc:
            raise ValueError(f"cannot split the command line: {exc}") from None
        commands: list[list[str]] = []
        for st in statements:
            rest = _strip_prefixes(st, env, notes)
            if rest:
                commands.append(rest)
        if not statements:
            raise ValueError("empty command line")
        sglang = [c for c in commands if is_sglang_program(_program_words(c))]
        if len(sglang) > 1:
            shown = "; ".join(" ".join(_program_words(c)) for c in sglang)
            raise ValueError(
                f"the text holds {len(sglang)} SGLang launch commands ({shown}); paste only the one to import"
            )
        if sglang:
            words = sglang[0]
            for other in commands:
                if other is not words:
                    notes.append(f"ignored the statement `{' '.join(other)}`")
        elif len(commands) > 1:
            raise ValueError(
                "no SGLang launch command (sglang.launch_server / sglang serve) among the statements: "
                + "; ".join(" ".join(c[:3]) for c in commands)
            )
        else:
            words = commands[0] if commands else []
    else:
        words = list(text_or_argv)
        if not words:
            raise ValueError("empty command line")
        i = 0
        while i < len(words) and (words[i] == "env" or (_is_assignment(words[i]))):
            if words[i] != "env":
                k, v = words[i].split("=", 1)
                env[k] = v
            i += 1
        words = words[i:]
    known = abbreviation_targets(version) if version is not None else None
    program = _program_words(words)
    i = len(program)
    flags: dict[str, Any] = {}
    order: list[str] = []
    while i < len(words):
        w = words[i]
        if not w.startswith("--"):
            raise ValueError(f"unexpected word {w!r} in the command line (expected a --flag)")
        typed, eq, value = w.partition("=")
        name = canonical_flag(typed, known, version=version)
        if known is not None and name != canonical_flag(typed):
            notes.append(f"{typed} is an abbreviation of {name} (argparse prefix matching)")
        if eq:
            i += 1
        else:
            nxt = words[i + 1] if i + 1 < len(words) else None
            if name in BOOL_FLAGS or nxt is None or (nxt.startswith("--") and not _is_number(nxt)):
                value = True
                i += 1
            else:
                value = nxt
                i += 2
        flags[name] = value
        if name not in order:
            order.append(name)
    return ParsedCommand(env, program, flags, order, notes)


def _program_words(words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        if w.startswith("--"):
            break
        out.append(w)
    return out


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def flags_to_argv(flags: dict[str, Any], order: list[str] | None = None) -> list[str]:
    """Render canonical flags back to argv words (``True`` → bare flag; ``False``/None dropped)."""
    out: list[str] = []
    for name in order or list(flags):
        value = flags.get(name)
        if value is None or value is False:
            continue
        if value is True:
            out.append(name)
        else:
            out.extend([name, str(value)])
    return out


# --- Profile → launch -------------------------------------------------------------------------

SECRET_FLAGS = ("--api-key", "--admin-api-key")
SECRET_ENV_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass
class LaunchSpec:
    """Everything needed to start a server from a profile, and to show it.

    ``argv``/``env``: exactly what is executed (``env`` holds only the profile's
    variables; the child also inherits the caller's environment).  ``spec``: the
    speculative resolution (asked vs effective).  ``base_url``: where it will listen.
    """

    argv: list[str]
    env: dict[str, str]
    spec: SpecResolution
    host: str
    port: int
    api_key: str | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the server."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def redacted_argv(self) -> list[str]:
        """``argv`` with secret flag values replaced by ``***``."""
        out = list(self.argv)
        for i, w in enumerate(out):
            if w in SECRET_FLAGS and i + 1 < len(out):
                out[i + 1] = "***"
            elif any(w.startswith(f + "=") for f in SECRET_FLAGS):
                out[i] = w.split("=", 1)[0] + "=***"
        return out

    def redacted_env(self) -> dict[str, str]:
        """``env`` with values of secret-looking variables replaced by ``***``."""
        return {k: ("***" if any(m in k.upper() for m in SECRET_ENV_MARKERS) else v) for k, v in self.env.items()}

    def shell_line(self) -> str:
        """A copy-pasteable, redacted shell line (env assignments, then argv)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.redacted_env().items())
        cmd = " ".join(shlex.quote(w) for w in self.redacted_argv())
        return f"{env} {cmd}".strip()


def server_flags(profile: Profile, *, port: int | None = None) -> dict[str, Any]:
    """The SGLang flags a profile asks for, canonical name → value, in a stable order."""
    s, sp = profile.server, profile.speculative
    flags: dict[str, Any] = {"--model-path": s.model_path}
    if s.tp_size != 1:
        flags["--tp-size"] = s.tp_size
    if s.mem_fraction_static is not None:
        flags["--mem-fraction-static"] = s.mem_fraction_static
    if s.context_length is not None:
        flags["--context-length"] = s.context_length
    flags["--host"] = s.host
    flags["--port"] = port if port is not None else s.port
    if s.enable_metrics:
        flags["--enable-metrics"] = True
    if s.api_key:
        flags["--api-key"] = s.api_key
    extra = parse_command_line(["x"] + list(s.extra_args)).flags if s.extra_args else {}
    if sp is not None and sp.algorithm:
        flags["--speculative-algorithm"] = sp.algorithm
        if sp.draft_model_path:
            flags["--speculative-draft-model-path"] = sp.draft_model_path
        for name, value in (
            ("--speculative-num-steps", sp.num_steps),
            ("--speculative-eagle-topk", sp.eagle_topk),
            ("--speculative-num-draft-tokens", sp.num_draft_tokens),
        ):
            if value is not None:
                flags[name] = value
        if sp.extra_args:
            extra.update(parse_command_line(["x"] + list(sp.extra_args)).flags)
    for k, v in extra.items():
        flags[k] = v
    return flags


def _int_or_none(v) -> int | None:
    if v is None or v is True:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def resolve_flags(
    flags: dict[str, Any],
    *,
    version: str = DEFAULT_VERSION,
    env: dict[str, str] | None = None,
    target_architectures: list[str] | None = None,
    draft_vocab_size: int | None = None,
    target_vocab_size: int | None = None,
) -> SpecResolution:
    """:func:`normalize_speculative` applied to canonical SGLang flags (as parsed by
    :func:`parse_command_line` or built by :func:`server_flags`)."""
    return normalize_speculative(
        flags.get("--speculative-algorithm"),
        _int_or_none(flags.get("--speculative-num-steps")),
        _int_or_none(flags.get("--speculative-eagle-topk")),
        _int_or_none(flags.get("--speculative-num-draft-tokens")),
        version=version,
        target_architectures=target_architectures,
        max_running_requests=_int_or_none(flags.get("--max-running-requests")),
        page_size=_int_or_none(flags.get("--page-size")),
        attention_backend=flags.get("--attention-backend"),
        use_rejection_sampling=bool(flags.get("--speculative-use-rejection-sampling"))
        or bool(flags.get("--speculative-use-block-verification")),
        draft_vocab_size=draft_vocab_size,
        target_vocab_size=target_vocab_size,
        env=env,
    )


def build_launch(profile: Profile, *, version: str | None = None, port: int | None = None) -> LaunchSpec:
    """Build the argv + env that start ``profile``'s server (never through a shell).

    ``launcher = "sglang"`` runs ``<python> -m sglang.launch_server <flags>``;
    ``launcher = "sim"`` runs ``<this python> -m specdash.sim <the same flags> --sim-…``.
    ``port`` overrides the profile's port (the runner picks a free one for port 0).

    Raises:
        specdash.profile.ProfileError: via profile accessors (bad paths, unset variables).
    """
    from specdash.checkpoint.reader import peek_architectures, peek_vocab

    s = profile.server
    ver = version or profile.judged_version()[0]
    flags = server_flags(profile, port=port)
    if profile.server.launcher == "sim":
        program = [sys.executable, "-m", "specdash.sim"]
        sim = profile.sim
        flags["--sim-scenario"] = sim.scenario_ref(profile)
        flags["--sim-seed"] = sim.seed
        if sim.time_scale is not None:
            flags["--time-scale"] = sim.time_scale
        flags["--sim-sglang-version"] = sim.sglang_version or s.sglang_version or DEFAULT_VERSION
    else:
        program = [s.python or "python3", "-m", "sglang.launch_server"]
    target_archs = peek_architectures(s.model_path)
    draft_vocab = peek_vocab(profile.speculative.draft_model_path, "draft_vocab_size") if profile.speculative else None
    spec = resolve_flags(
        flags,
        version=ver,
        env=dict(profile.env),
        target_architectures=target_archs,
        draft_vocab_size=draft_vocab,
        target_vocab_size=peek_vocab(s.model_path, "vocab_size"),
    )
    argv = program + flags_to_argv(flags)
    return LaunchSpec(argv, dict(profile.env), spec, s.host, int(flags["--port"]), s.api_key)
