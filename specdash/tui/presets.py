"""Tweak and save: the session's speculative settings edited in place and saved as presets.

A mixin of :class:`~specdash.tui.session.Session` (it uses ``self.profile`` and
``self.source_text``); no Textual import.  Presets are TOML written with tomlkit: when the
profile came from a file, that file's text is updated so its comments survive, and a first
line says where the preset came from.  Nothing is ever overwritten unless asked.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from specdash.profile import Profile, ProfileError, preset_path, profile_variant, write_preset


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
        if self.profile is None:
            raise ProfileError("no profile chosen")
        return profile_variant(self.profile, changes)

    def preset_path(self, name: str, directory: Path | None = None) -> Path:
        """Where :meth:`save_preset` writes ``name`` (the user's profile directory by default)."""
        return preset_path(name, directory)

    def save_preset(self, name: str, *, directory: Path | None = None, force: bool = False) -> Path:
        """Save the current profile as preset ``name`` (TOML via tomlkit; the source profile's
        comments kept, a first line saying where it came from).  Never overwrites unless
        ``force``.

        Raises:
            ProfileError: the file exists and ``force`` is False, or no profile is chosen.
        """
        if self.profile is None:
            raise ProfileError("no profile chosen")
        src = self.profile.path.name if self.profile.path else "an unsaved profile"
        stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        return write_preset(self.profile, name, directory=directory,
                            note=f"Saved by the specdash dashboard on {stamp}, from {src} ({self.profile.name})."
                                 + (" The comments below are the source profile's: where they name settings, "
                                    "they describe its old ones." if self.source_text else ""),
                            base_text=self.source_text, on_exists="overwrite" if force else "refuse")
