"""Pasted SGLang launch commands: shell text → program, environment and canonical flags.

:func:`parse_command_line` splits what a user pastes (``NCCL_X=1 python -m
sglang.launch_server --flag v …``, with prompts, comments, ``export`` lines and
backslash continuations) the way a shell would; :func:`canonical_flag` maps SGLang's
aliases and, for a given release, expands abbreviations as SGLang's ``argparse`` parser
does (``allow_abbrev``; an ambiguous one exits 2 there and raises
:class:`AmbiguousFlagError` here); :func:`flags_to_argv` renders flags back to argv words.
"""

from __future__ import annotations

import codecs
import re
import shlex
import warnings
from dataclasses import dataclass, field
from typing import Any

from specdash.sglang.versions import DEFAULT_VERSION, known_flags

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

#: Flags that always take a value (a bare one at the end of a pasted line is a mistake, not ``True``).
VALUE_FLAGS = frozenset({
    "--model-path", "--tokenizer-path", "--served-model-name", "--host", "--port", "--tp-size", "--dp-size",
    "--pp-size", "--ep-size", "--mem-fraction-static", "--context-length", "--max-running-requests",
    "--max-total-tokens", "--chunked-prefill-size", "--dtype", "--kv-cache-dtype", "--quantization",
    "--load-format", "--attention-backend", "--sampling-backend", "--log-level", "--random-seed",
    "--api-key", "--admin-api-key", "--dist-init-addr", "--nnodes", "--node-rank", "--decode-log-interval",
    "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--speculative-algorithm",
    "--speculative-draft-model-path", "--speculative-num-steps", "--speculative-eagle-topk",
    "--speculative-num-draft-tokens", "--speculative-draft-load-format", "--speculative-adaptive-config",
    "--speculative-token-map", "--revision", "--download-dir", "--speculative-draft-model-quantization",
    "--speculative-draft-model-revision", "--config",
})
#: Terminal colour / cursor escape sequences a copied terminal line may carry.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]")
#: Bash's ANSI-C quoting ``$'…'`` (backslash escapes inside).
_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")


def strip_terminal_codes(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves) and other control characters
    (tabs and newlines kept): what a pasted terminal line shows, not what it carries."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", _ANSI.sub("", text))


def _decode_ansi_c(text: str) -> str:
    """``$'a\tb'`` → ``'a<TAB>b'`` (shell-quoted again), as bash reads it."""
    def one(m: re.Match) -> str:
        try:
            with warnings.catch_warnings():  # "\ " and other escapes bash keeps literally: not our warning
                warnings.simplefilter("ignore", DeprecationWarning)
                raw = codecs.decode(m.group(1).encode("latin-1", "backslashreplace"), "unicode_escape")
        except (UnicodeDecodeError, ValueError):
            raw = m.group(1)
        return shlex.quote(raw)

    return _ANSI_C.sub(one, text)


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
    text = _decode_ansi_c(_ANSI.sub("", text))
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
                if name in VALUE_FLAGS:
                    where = "at the end of the line" if nxt is None else f"before {nxt}"
                    raise ValueError(f"{typed} needs a value ({where}): e.g. {typed} VALUE")
                value = True
                i += 1
            else:
                # every word up to the next --flag: one value, or several for SGLang's multi-value
                # flags (argparse nargs="+"/"*", e.g. --cuda-graph-bs-decode 1 2 4 8)
                j = i + 1
                while j < len(words) and not (words[j].startswith("--") and not _is_number(words[j])):
                    j += 1
                vals = words[i + 1 : j]
                value = vals[0] if len(vals) == 1 else list(vals)
                i = j
        if name in flags and flags[name] != value:
            notes.append(f"{typed} is given more than once: the last value ({_shown(value)}) wins, as in SGLang")
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


def _shown(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def flags_to_argv(flags: dict[str, Any], order: list[str] | None = None) -> list[str]:
    """Render canonical flags back to argv words (``True`` → bare flag; ``False``/None dropped; a list
    → the flag followed by each value, as SGLang's multi-value flags take them)."""
    out: list[str] = []
    for name in order or list(flags):
        value = flags.get(name)
        if value is None or value is False:
            continue
        if value is True:
            out.append(name)
        elif isinstance(value, (list, tuple)):
            out.extend([name, *map(str, value)])
        else:
            out.extend([name, str(value)])
    return out
