"""Exit codes, and the one place that turns an exception into an exit code and a message.

Every command runs its body through :func:`run`: what the body returns is the exit code;
an exception listed in :func:`diagnose` becomes its code and a message on stderr, prefixed
with the command (``specdash doctor: …``); any other exception is a bug and propagates
(a traceback).  stdout only ever carries a command's result (a table, or ``--json``); the
one exception is a preflight refusal under ``--json``, which stdout gets as JSON so
that a script reading it learns why nothing ran.

Codes (as the README states): 0 success; 1 a run failed, preflight refused a launch, an error
finding, or post-launch verification failed; 2 usage or configuration error.

This module imports nothing heavy at import time; :func:`diagnose` imports the exception
classes it maps only once something was raised.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """The process exit codes of every ``specdash`` command."""

    OK = 0
    FAILED = 1
    """A run failed (server did not start, no request succeeded, interrupted), preflight
    refused the launch, doctor found an error, post-launch verification failed, or the
    draft self-test scored poorly."""
    USAGE = 2
    """A bad flag or value, or a profile / suite / draft / sample that cannot be read or used."""
    BROKEN_PIPE = 141
    """stdout's reader went away (128 + SIGPIPE, as a shell pipeline reports it)."""


class UsageError(Exception):
    """A flag, a value or a combination the command cannot run with (exit 2)."""


class Parser(argparse.ArgumentParser):
    """Every ``specdash`` command's argument parser: argparse, with two differences.

    - No abbreviations (``allow_abbrev=False``): ``--profil`` is an error, not ``--profile`` — an abbreviation
      that works today becomes ambiguous, or means another flag, once a flag is added.
    - An unknown option is named, with the nearest known spellings (``difflib``), instead of what argparse says
      after it: ``specdash --bench --sim-scenario X`` read ``X`` as a command ("invalid choice: 'X'").
    Exit code 2 with ``usage`` first, as argparse's own errors.
    """

    def __init__(self, *args, hints: dict[str, str] | None = None, **kwargs) -> None:
        """``hints``: unknown option → what to say instead of a near spelling (an option of another command)."""
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._argv: list[str] = []
        self._hints = dict(hints or {})

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _options(self) -> set[str]:
        """Every option string of this parser and of its sub-command parsers, recursively."""
        out = set(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    out |= sub._options() if isinstance(sub, Parser) else set(sub._option_string_actions)
        return out

    def error(self, message: str):
        known = self._options()
        unknown = []
        for word in self._argv:
            if word == "--":
                break
            name = word.split("=", 1)[0]
            if name.startswith("--") and len(name) > 2 and name not in known and name not in unknown:
                unknown.append(name)
        if unknown:  # the likely cause of whatever argparse met after it (a value read as a command, …)
            parts = []
            for name in unknown:
                near = difflib.get_close_matches(name, sorted(o for o in known if o.startswith("--")), n=2,
                                                 cutoff=0.75)
                hint = self._hints.get(name) or (f"did you mean {' or '.join(near)}?" if near else "")
                parts.append(f"{name}" + (f" ({hint})" if hint else ""))
            message = (f"unknown option{'s' if len(parts) > 1 else ''}: {', '.join(parts)}; "
                       f"`{self.prog} --help` lists the options")
        elif (m := re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)):
            near = difflib.get_close_matches(m.group(1), re.findall(r"'([^']+)'", m.group(2)) or
                                             [c.strip() for c in m.group(2).split(",")], n=1, cutoff=0.6)
            if near:
                message += f"; did you mean {near[0]!r}?"
        super().error(message)


class VerificationFailed(Exception):
    """Post-launch verification failed for ``profiles`` and ``--allow-unverified`` was not
    given: the numbers are printed but are not a valid measure of speculation (exit 1)."""

    def __init__(self, profiles: list[str]) -> None:
        super().__init__(", ".join(profiles))
        self.profiles = list(profiles)


#: The message of an interrupted command that launches servers.
INTERRUPTED_RUN = "interrupted; servers stopped; partial results are in the run directory"


@dataclass(frozen=True)
class Diagnosis:
    """What an exception means for the process: ``code``; the ``lines`` for stderr (each
    gets the command prefix; ``report_text``, e.g. the doctor's findings, goes before them
    as it is); under ``--json``, ``stdout_json`` for stdout (None: stdout stays empty)."""

    code: ExitCode
    lines: list[str]
    report_text: str | None = None
    stdout_json: dict | None = None


def diagnose(exc: BaseException, *, interrupted: str = "interrupted") -> Diagnosis | None:
    """The :class:`Diagnosis` of ``exc``, or None for an exception no command expects (a bug)
    or one the dispatcher handles (:class:`BrokenPipeError`: :attr:`ExitCode.BROKEN_PIPE`).

    ``interrupted`` is the message for Ctrl-C / SIGINT / SIGTERM (:data:`INTERRUPTED_RUN`
    for commands that launch servers).
    """
    if isinstance(exc, UsageError):
        return Diagnosis(ExitCode.USAGE, [str(exc)])
    if isinstance(exc, VerificationFailed):
        return Diagnosis(ExitCode.FAILED, [
            f"post-launch verification FAILED for {exc}; these numbers are not a valid measure "
            "of speculation (see the findings). Pass --allow-unverified to accept them."])
    # imported here, once something was raised: the mapping costs a command nothing until then
    from specdash.bench.runner import RunFailed
    from specdash.eagle3.convert import ConvertError
    from specdash.eagle3.selftest import SelftestError
    from specdash.launch import PreflightBlocked
    from specdash.profile import ProfileError
    from specdash.sglang.client import SGLangError
    from specdash.sglang.process import ServerStartError

    if isinstance(exc, PreflightBlocked):
        report = exc.report
        return Diagnosis(
            ExitCode.FAILED,
            ["preflight found errors; the server was not launched. Fix them, or pass --force "
             "to launch anyway (post-launch verification will still judge the run)."],
            report_text=report.render(),
            stdout_json={"error": "preflight", "launched": False, "preflight": report.to_json()},
        )
    if isinstance(exc, (ProfileError, ConvertError, SelftestError)):  # a profile, suite, draft or sample
        return Diagnosis(ExitCode.USAGE, [str(exc)])                    # that cannot be read or used
    if isinstance(exc, (RunFailed, ServerStartError)):
        return Diagnosis(ExitCode.FAILED, [str(exc)])
    if isinstance(exc, SGLangError):
        lines = [str(exc)]
        if getattr(exc, "status", None) in (401, 403):
            lines.append("the server wants an API key: pass --api-key KEY or set SGLANG_API_KEY "
                         "(for a launched server, [server] api_key in the profile)")
        return Diagnosis(ExitCode.FAILED, lines)
    if isinstance(exc, BrokenPipeError):  # stdout's reader left: the dispatcher ends quietly (141)
        return None
    if isinstance(exc, OSError):  # an unwritable --out, a full disk, a server program that is not there
        return Diagnosis(ExitCode.USAGE, [f"cannot read or write a file, or start a program: {exc}"])
    if isinstance(exc, ValueError):  # a value no check caught earlier, e.g. an unparsable --sglang-version
        return Diagnosis(ExitCode.USAGE, [str(exc)])
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C / SIGINT (1), or SIGTERM (143: Terminated)
        code = getattr(exc, "exit_code", None)
        return Diagnosis(code if code is not None else ExitCode.FAILED,
                         [interrupted + (" (SIGTERM)" if code is not None else "")])
    return None


def report(diagnosis: Diagnosis, prog: str, *, json_output: bool = False) -> ExitCode:
    """Print ``diagnosis`` (stdout flushed first, so a result already printed stays ahead of
    the message); returns its code."""
    if json_output and diagnosis.stdout_json is not None:
        print(json.dumps(diagnosis.stdout_json, indent=2))
    sys.stdout.flush()
    if diagnosis.report_text:
        print(diagnosis.report_text, file=sys.stderr)
    for line in diagnosis.lines:
        print(f"{prog}: {line}", file=sys.stderr)
    return diagnosis.code


def run(prog: str, body: Callable[[], int], *, json_output: bool = False,
        interrupted: str = "interrupted", cleanup: Callable[[], None] | None = None) -> int:
    """Run a command's ``body``; returns its exit code, or the code of the exception it raised.

    Args:
        prog: the message prefix (``specdash tune``).
        json_output: the command was given ``--json`` (see :class:`Diagnosis`).
        interrupted: the message for an interrupt (see :func:`diagnose`).
        cleanup: called before a message is printed (e.g. ending a progress line).

    Raises:
        whatever :func:`diagnose` does not know (a bug: its traceback is the report).
    """
    try:
        return int(body())
    except (Exception, KeyboardInterrupt) as exc:
        diagnosis = diagnose(exc, interrupted=interrupted)
        if diagnosis is None:
            raise
        if cleanup is not None:
            cleanup()
        return int(report(diagnosis, prog, json_output=json_output))


def url_problem(url: str, flag: str = "--url") -> str | None:
    """Why ``url`` cannot be a server's base URL (not http(s), no host, a port outside 1-65535, or one
    httpx cannot parse — e.g. an unclosed IPv6 bracket), as a usage message; None when it can."""
    import httpx

    example = "(e.g. http://127.0.0.1:30000)"
    if not url.startswith(("http://", "https://")):
        return f"{flag} {url!r} is not an http(s) URL {example}"
    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        return f"{flag} {url!r} is not a valid URL ({exc}) {example}"
    if not u.host:
        return f"{flag} {url!r} has no host {example}"
    if u.port is not None and not 1 <= u.port <= 65535:
        return f"{flag} {url!r}: port {u.port} is outside 1-65535 {example}"
    return None

