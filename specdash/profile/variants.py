"""Derived profiles and saved presets: the one variant maker and the one preset writer.

:func:`profile_variant` is how ``specdash tune`` makes the settings it launches (:func:`variant`, and its
no-speculation baseline, :func:`baseline_of`) and how the dashboard's Tweak screen edits the session's
profile.  :func:`write_preset` is how both save a profile as a new preset: TOML written
with tomlkit, the source profile's comments kept when its text is given, a first comment
line saying where the preset came from, and never an overwrite unless asked.

A derived profile exists only in memory, so a run directory records how to make it again:
:func:`variant_record` (the manifest's ``variant``: the source file and the changed fields) and
:func:`apply_variant` (what ``--bench --resume`` does with it) — a tune's baseline or exploration
run that was cut short resumes with the very profile it ran.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from specdash.profile.files import profile_to_toml, safe_name, user_profile_dir, write_new_file
from specdash.profile.schema import Profile, parse_profile


def profile_variant(profile: Profile, speculative: Mapping[str, Any] | None, *, name: str | None = None) -> Profile:
    """A validated copy of ``profile`` with other ``[speculative]`` settings.

    Args:
        profile: the source; left unchanged.
        speculative: ``[speculative]`` fields to set (``algorithm``, ``draft_model_path``,
            ``num_steps``, ``eagle_topk``, ``num_draft_tokens`` — None = unset, SGLang
            chooses — and ``extra_args``, a list or a string split like a shell would),
            merged into the existing section (created when missing); or None to drop the
            section (speculation off).
        name: the copy's name (default: the source's).

    Returns:
        The copy; its :attr:`~Profile.path` is the source's, so relative paths in it
        (e.g. ``[sim] scenario``) still resolve.

    Raises:
        ProfileError: the result does not validate (the message names each bad field).
    """
    data = profile.model_dump()
    if speculative is None:
        data["speculative"] = None
    else:
        spec = dict(data.get("speculative") or {})
        for k, v in speculative.items():
            spec[k] = shlex.split(v) if k == "extra_args" and isinstance(v, str) else v
        data["speculative"] = spec
    if name is not None:
        data["name"] = name
    prof = parse_profile(data, profile.path or f"<{profile.name}>")
    prof._path = profile.path
    return prof


def variant(profile: Profile, steps: int, topk: int, draft_tokens: int, *, suffix: str | None = None) -> Profile:
    """A copy of ``profile`` with other speculative settings (name tagged ``-s<steps>k<topk>n<draft>``, or
    ``-<suffix>``): what ``specdash tune`` launches at each setting it measures."""
    return profile_variant(profile, {"num_steps": steps, "eagle_topk": topk, "num_draft_tokens": draft_tokens},
                           name=f"{profile.name}-{suffix or f's{steps}k{topk}n{draft_tokens}'}")


def baseline_of(profile: Profile) -> Profile:
    """The same server without speculation (``<name>-baseline``): the baseline of a tune and of a sweep."""
    return profile_variant(profile, None, name=f"{profile.name}-baseline")


def _changes(was: dict, now: dict) -> dict[str, Any]:
    """The top-level fields of ``now`` that differ from ``was``; of a table (``[server]``…) only its
    changed keys, of a table that appeared or went away (``[speculative]`` → none) the whole value."""
    out: dict[str, Any] = {}
    for key in sorted({*was, *now}):
        a, b = was.get(key), now.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out[key] = {k: b.get(k) for k in sorted({*a, *b}) if a.get(k) != b.get(k)}
        else:
            out[key] = b
    return out


def variant_record(profile: Profile) -> dict[str, Any] | None:
    """How to make ``profile`` again from its source file, for a run manifest: ``{"of": the source's name,
    "of_path": its file, "changes": {field or table: changed values}}``, or None when ``profile`` is the
    file's own profile (or has no readable file).  Both sides are compared expanded and redacted
    (:func:`~specdash.profile.flags.redacted_profile_data`), so no secret reaches the record; a change that
    involves a secret (a redacted value) gives None — such a variant cannot be rebuilt from the file, and a
    resume then refuses, saying why."""
    from specdash.profile.files import load_profile
    from specdash.profile.flags import redacted_profile_data
    from specdash.profile.schema import ProfileError
    from specdash.sglang.secrets import MASK

    path = profile.path
    if path is None or not Path(path).is_file():
        return None
    try:
        source = load_profile(str(path)).expanded()
    except (ProfileError, OSError):
        return None
    changes = _changes(redacted_profile_data(source), redacted_profile_data(profile))
    if not changes:
        return None
    if MASK in repr(changes):
        return None
    return {"of": source.name, "of_path": str(path), "changes": changes}


def apply_variant(source: Profile, changes: Mapping[str, Any]) -> Profile:
    """``source`` with a :func:`variant_record`'s ``changes`` applied (a table's keys merged into it, a
    whole value replaced); the result keeps ``source``'s path.

    Raises:
        ProfileError: the result does not validate (the file changed since the run: the message says how).
    """
    data = source.model_dump()
    for key, val in changes.items():
        if isinstance(val, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **val}
        else:
            data[key] = val
    prof = parse_profile(data, source.path or f"<{source.name}>")
    prof._path = source.path
    return prof


def preset_path(name: str, directory: Path | None = None) -> Path:
    """Where preset ``name`` is written: ``<directory>/<safe name>.toml``, the user's profile
    directory (:func:`~specdash.profile.files.user_profile_dir`) by default."""
    return Path(directory or user_profile_dir()) / f"{safe_name(name)}.toml"


def write_preset(
    profile: Profile,
    name: str,
    *,
    note: str,
    directory: Path | None = None,
    description: str | None = None,
    base_text: str | None = None,
    on_exists: Literal["refuse", "number", "overwrite"] = "refuse",
) -> Path:
    """Save ``profile`` as preset ``name`` at :func:`preset_path` (``name`` and, when given,
    ``description`` replace the profile's own).

    Args:
        note: one line saying where the preset came from; it becomes the file's first
            comment line (a leading ``#`` is optional).
        base_text: the source profile's TOML text: that document is updated so its
            comments survive, below ``note``; without it a fresh document starts with ``note``.
        on_exists: when the file exists: ``"refuse"`` raises, ``"overwrite"`` replaces it,
            ``"number"`` writes ``<name>-2.toml``, ``-3`` … (the first free one) instead.

    Returns:
        The path written (atomically: a temporary file, then a rename).

    Raises:
        ProfileError: the file exists and ``on_exists`` is ``"refuse"``.
    """
    update: dict[str, Any] = {"name": name}
    if description is not None:
        update["description"] = description
    prof = profile.model_copy(update=update)
    note = note.lstrip("# ").rstrip()
    text = profile_to_toml(prof, header=note, base_text=base_text)
    if base_text is not None:
        text = f"# {note}\n{text}"
    path = preset_path(name, directory)
    if on_exists == "number":
        n, first = 1, path
        while path.exists():
            n += 1
            path = first.with_name(f"{first.stem}-{n}.toml")
    return write_new_file(path, text, force=on_exists == "overwrite")
