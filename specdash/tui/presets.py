"""Tweak and save: the session's speculative settings edited in place and saved as presets.

A mixin of :class:`~specdash.tui.session.Session` (it uses ``self.profile`` and
``self.source_text``); no Textual import.  Presets are TOML written with tomlkit: when the
profile came from a file, that file's text is updated so its comments survive, and a first
line says where the preset came from.  Nothing is ever overwritten unless asked.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from pathlib import Path
from typing import Any

from specdash.profile import Profile, ProfileError


class PresetsMixin:
    """``tweaked`` / ``preset_path`` / ``save_preset`` for the session."""

    profile: Profile | None
    source_text: str | None

    def tweaked(self, changes: dict[str, Any]) -> Profile:
        """A copy of the current profile with ``[speculative]`` fields replaced.

        ``changes`` keys: ``algorithm``, ``draft_model_path``, ``num_steps``, ``eagle_topk``,
        ``num_draft_tokens`` (None = unset, SGLang chooses), ``extra_args`` (a string, split
        like a shell would, or a list).

        Raises:
            ProfileError: the result does not validate.
        """
        from pydantic import ValidationError

        if self.profile is None:
            raise ProfileError("no profile chosen")
        data = self.profile.model_dump()
        spec = dict(data.get("speculative") or {})
        for k, v in changes.items():
            if k == "extra_args" and isinstance(v, str):
                v = shlex.split(v)
            spec[k] = v
        data["speculative"] = spec
        try:
            prof = Profile.model_validate(data)
        except ValidationError as exc:
            raise ProfileError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
        prof._path = self.profile.path
        return prof

    def preset_path(self, name: str, directory: Path | None = None) -> Path:
        """Where :meth:`save_preset` writes ``name`` (the user's profile directory by default)."""
        from specdash.bench.rundir import safe_name
        from specdash.profile import user_profile_dir

        return Path(directory or user_profile_dir()) / f"{safe_name(name)}.toml"

    def save_preset(self, name: str, *, directory: Path | None = None, force: bool = False) -> Path:
        """Save the current profile as preset ``name`` (TOML via tomlkit; the source profile's
        comments kept, a first line saying where it came from).  Never overwrites unless
        ``force``.

        Raises:
            ProfileError: the file exists and ``force`` is False, or no profile is chosen.
        """
        from specdash.profile import profile_to_toml, write_new_file

        if self.profile is None:
            raise ProfileError("no profile chosen")
        prof = self.profile.model_copy(update={"name": name})
        src = self.profile.path.name if self.profile.path else "an unsaved profile"
        stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        header = f"# Saved by the specdash dashboard on {stamp}, from {src} ({self.profile.name})."
        text = profile_to_toml(prof, header=header.lstrip("# "), base_text=self.source_text)
        if self.source_text is not None:
            text = header + "\n" + text
        return write_new_file(self.preset_path(name, directory), text, force=force)
