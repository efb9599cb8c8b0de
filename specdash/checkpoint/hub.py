"""Hugging Face hub ids in profiles: find the snapshot already in the local cache, offline.

SGLang accepts a hub id (``owner/name``) as ``--model-path`` and downloads it at start-up; the doctor can
only check what is on disk.  :func:`cached_snapshot` asks ``huggingface_hub`` for the cached snapshot of
the id — ``snapshot_download(repo_id, revision=…, local_files_only=True)``, which reads
``$HF_HUB_CACHE`` (default ``~/.cache/huggingface/hub``) and never touches the network — so the checks run
on the same files SGLang would load.  ``huggingface_hub`` is imported only here and only when a profile
names a hub id; without it, or without a cached snapshot, the caller reports what could not be checked
and how to fetch it (``hf download owner/name``; the older ``huggingface-cli download`` is deprecated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_HUB_ID = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def is_hub_id(path: str) -> bool:
    """``owner/name`` that is not a local path: a Hugging Face repo id SGLang would download."""
    return bool(_HUB_ID.fullmatch(path)) and not path.startswith((".", "/", "~"))


@dataclass(frozen=True)
class HubLookup:
    """What :func:`cached_snapshot` found: ``path`` (the snapshot directory) or ``why`` not."""

    repo_id: str
    revision: str
    path: Path | None
    why: str | None = None
    #: ``huggingface_hub`` is not installed (the cache was not searched)
    missing_library: bool = False


def cached_snapshot(repo_id: str, revision: str | None = None) -> HubLookup:
    """The locally cached snapshot of ``repo_id`` at ``revision`` (default ``main``), offline.

    Never raises: ``path`` is None and ``why`` says what was missing (``huggingface_hub`` not
    installed, nothing cached for the id or revision, a cache it cannot read).
    """
    rev = revision or "main"
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError:
        return HubLookup(repo_id, rev, None, "huggingface_hub is not installed, so the local Hugging Face cache "
                                             "was not searched", missing_library=True)
    try:
        path = snapshot_download(repo_id=repo_id, revision=rev, local_files_only=True)
    except Exception as exc:  # LocalEntryNotFoundError, a corrupt cache, a bad id: reported, never raised
        name = type(exc).__name__
        if "NotFound" in name or "LocalEntry" in name:
            why = f"not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) at revision {rev}"
        else:
            why = f"the local Hugging Face cache could not be read ({name}: {str(exc)[:160]})"
        return HubLookup(repo_id, rev, None, why)
    return HubLookup(repo_id, rev, Path(path))
