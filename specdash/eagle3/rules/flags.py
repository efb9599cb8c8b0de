"""FLAG: launch flags the judged SGLang release does not accept (argparse exits 2 before loading)."""

from __future__ import annotations

import difflib

from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.versions import (
    deprecated_flags,
    flag_replacements,
    flag_versions,
    flags_version_for,
    known_flags,
    next_flags_version,
    parse_version,
)


def _typed_flags(ctx: RuleContext) -> list[str]:
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


def rule_flags(ctx: RuleContext) -> None:
    """FLAG: every flag the server will receive, against the judged release's flag list.

    Unknown flags and ambiguous prefixes are errors (SGLang's plain ``argparse`` parser with
    ``allow_abbrev`` exits 2, ``server_args.py`` ``prepare_server_args``); unique abbreviations and
    deprecated aliases are warnings.  Flag lists come from :func:`specdash.sglang.versions.known_flags`.
    """
    known = known_flags(ctx.version)
    if known is None:
        oldest = flag_versions()[0] if flag_versions() else "?"
        older = bool(flag_versions()) and parse_version(ctx.version) < flag_versions()[0]
        if older:  # as the 'newer than any release' warning below: the other findings are judged by another release
            ctx.add("FLAG", "warning", f"SGLang {ctx.version} is older than any release specdash knows (oldest: "
                    f"{oldest}): its flags were not checked, and the release rules of the other findings (capture "
                    f"layers, defaults, rewrites) are judged as the nearest known release's, which {ctx.version} "
                    "may not follow", "specdash's flag lists and release rules come from the released wheels "
                    f"(specdash/sglang/facts/, from {oldest} on); what an older release parses, refuses or rewrites is "
                    "not known to it.", "check the version on the server host (`python -c 'import sglang; "
                    "print(sglang.__version__)'`); if it is right, compare the flags with `python -m sglang.launch_server "
                    "--help` there, or upgrade to a release specdash knows",
                    version=ctx.version, oldest_known=str(oldest))
        else:
            ctx.add("FLAG", "info", f"no flag list is stored for SGLang {ctx.version} (oldest stored: {oldest}); "
                    f"launch flags were not checked", "Flag lists are extracted from the released wheels "
                    "(specdash/sglang/facts/, scripts/extract_sglang_facts.py).", "", version=ctx.version)
        return
    basis = flags_version_for(ctx.version)
    exact = basis == str(parse_version(ctx.version))
    newest = flag_versions()[-1]
    if parse_version(ctx.version) > newest:
        ctx.add("FLAG", "warning", f"SGLang {ctx.version} is newer than any release specdash knows (newest: {newest}): "
                f"its flags and rules are judged as {newest}'s", "specdash's flag lists and release rules come from "
                "the released wheels (specdash/sglang/facts/); a flag added, renamed or removed after "
                f"{newest} is not known, so findings may be missing or wrong for {ctx.version}.",
                "check the version (`python -c 'import sglang; print(sglang.__version__)'` on the server host); "
                "if it is right, compare the flags with `python -m sglang.launch_server --help` there",
                version=ctx.version, newest_known=str(newest))
    later = next_flags_version(ctx.version)
    later_known = known_flags(later) if later and not exact else None
    repl = flag_replacements()
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
