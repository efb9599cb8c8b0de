"""Datasets on the Hugging Face hub, read from the local ``huggingface_hub`` cache.

``--dataset hf:OWNER/NAME[:CONFIG[:SPLIT]][@REVISION]`` (the ``hf:`` prefix may be left out when no
local path of that name exists).  The dataset repository's snapshot is looked up in the hub cache
(``$HF_HUB_CACHE``, default ``~/.cache/huggingface/hub``) with
``huggingface_hub.snapshot_download(repo_id, repo_type="dataset", local_files_only=True)`` — the cache
``hf download OWNER/NAME --repo-type dataset`` fills, never touching the network.  When it is not there:

* in offline mode (``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` set to 1 / on / yes / true, as
  ``huggingface_hub`` and ``datasets`` read them) the run stops with where it looked and the exact
  ``hf download`` line that fetches it;
* otherwise the files it needs are downloaded into that cache (the dataset card first, then only the
  chosen configuration's data files: ``allow_patterns``).  A gated dataset uses the token
  ``huggingface_hub`` finds itself (``HF_TOKEN`` or ``hf auth login``); specdash never passes it.

Which files: the dataset card's ``configs`` (its YAML front matter, read with
``huggingface_hub.DatasetCard``; ``data_files`` as a string, a list, or ``{split, path}`` entries, glob
patterns relative to the repository, the layout ``datasets`` documents for "Manual configuration")
give each configuration's splits.  CONFIG picks one (default: the one marked ``default``, else the only
one; several and none asked → an error listing them); SPLIT picks a split (default: the only one, else
``test`` — benchmarks publish their prompts there — else ``train``, else the first).  A card without
``configs`` falls back to ``datasets``' conventions: the data files (``.jsonl``, ``.json``,
``.parquet``) under a directory named CONFIG when one is given, split by a split name in the file name
(``test-00000-of-00001.parquet``), else all of them as ``train``.  Each file is read by its format's
reader (:mod:`~specdash.profile.datasets.jsonl`, :mod:`~specdash.profile.datasets.parquet`).

``huggingface_hub`` is imported only here and only for such a source (``pip install huggingface_hub``,
or the ``[datasets]`` extra, brings it).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdash.checkpoint.hub import is_hub_id
from specdash.profile.datasets import jsonl, parquet
from specdash.profile.schema import ProfileError

PREFIX = "hf:"
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
"""The environment variables that put ``huggingface_hub`` / ``datasets`` in offline mode."""
_TRUE = {"1", "on", "yes", "true"}
DATA_SUFFIXES = (*jsonl.SUFFIXES, *parquet.SUFFIXES)
SPLIT_ORDER = ("test", "train", "validation")
"""The split taken when none is asked and the configuration has several, in order."""
_SOURCE = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?::(?P<config>[^:@]*))?(?::(?P<split>[^:@]*))?"
                     r"(?:@(?P<rev>[^@]+))?$")


@dataclass(frozen=True)
class HubSource:
    """A hub dataset as ``--dataset`` names it: the repository, and the configuration, split and
    revision asked (None: chosen as the module docstring says)."""

    repo_id: str
    config: str | None = None
    split: str | None = None
    revision: str | None = None

    def spec(self) -> str:
        """The source back in ``hf:`` form."""
        s = PREFIX + self.repo_id + (f":{self.config}" if self.config else "") + (f":{self.split}" if self.split else "")
        return s + (f"@{self.revision}" if self.revision else "")


def parse_source(source: str) -> HubSource | None:
    """The hub dataset ``source`` names (``hf:OWNER/NAME[:CONFIG[:SPLIT]][@REVISION]``, or the same without
    ``hf:`` when it is not a local path), else None.

    Raises:
        ProfileError: an ``hf:`` source that is not of that form.
    """
    explicit = source.startswith(PREFIX)
    body = source[len(PREFIX):] if explicit else source
    m = _SOURCE.match(body)
    if m is None or not is_hub_id(m["repo"]):
        if explicit:
            raise ProfileError(f"--dataset {source}: not a hub dataset id; the form is hf:OWNER/NAME[:CONFIG[:SPLIT]]"
                               "[@REVISION], e.g. hf:nvidia/SPEED-Bench:qualitative:test")
        return None
    if not explicit and (Path(os.path.expanduser(m["repo"])).exists() or m["repo"].lower().endswith(DATA_SUFFIXES)):
        return None  # a local path owner/name (or a data file's name) wins
    return HubSource(m["repo"], m["config"] or None, m["split"] or None, m["rev"] or None)


def offline() -> bool:
    """Whether offline mode is on (:data:`OFFLINE_VARS`), read now (not at import)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in OFFLINE_VARS)


def hub_cache_dir() -> str:
    """The hub cache ``huggingface_hub`` uses now (for messages)."""
    try:
        from huggingface_hub import constants
    except ImportError:
        return os.environ.get("HF_HUB_CACHE") or "~/.cache/huggingface/hub"
    return str(constants.HF_HUB_CACHE)


def fetch_line(src: HubSource, patterns: Sequence[str] = ()) -> str:
    """The ``hf download`` command that puts ``src``'s files into the cache."""
    inc = "".join(f" --include '{p}'" for p in patterns)
    rev = f" --revision {src.revision}" if src.revision else ""
    return f"hf download {src.repo_id} --repo-type dataset{rev}{inc}"


def _hf():
    try:
        import huggingface_hub
    except ImportError:
        raise ProfileError("reading a Hugging Face hub dataset needs huggingface_hub, which is not installed: "
                           "pip install huggingface_hub (or pip install 'specdash[datasets]')") from None
    return huggingface_hub


def _snapshot(src: HubSource, patterns: Sequence[str] | None, *, download: bool) -> Path | None:
    """The snapshot directory: from the cache, or (``download``) after fetching ``patterns``; None when
    not cached and not downloading.

    Raises:
        ProfileError: a download that fails (not found, gated, network), or a cache that cannot be read.
    """
    hf = _hf()
    kw: dict[str, Any] = {"repo_id": src.repo_id, "repo_type": "dataset", "revision": src.revision}
    try:
        if not download:
            return Path(hf.snapshot_download(**kw, local_files_only=True))
        return Path(hf.snapshot_download(**kw, allow_patterns=list(patterns) if patterns else None))
    except Exception as exc:  # the library's errors: LocalEntryNotFound, RepositoryNotFound, Gated, HTTP, OS
        name = type(exc).__name__
        if not download and ("LocalEntryNotFound" in name or "NotFound" in name):
            return None
        if "Gated" in name:
            why = "it is gated: accept its terms on https://huggingface.co/datasets/" + src.repo_id + \
                  " and log in (hf auth login, or set HF_TOKEN)"
        elif "RepositoryNotFound" in name:
            why = "no such dataset repository (or it is private: log in with hf auth login, or set HF_TOKEN)"
        elif "RevisionNotFound" in name:
            why = f"it has no revision {src.revision}"
        else:
            why = f"{name}: {str(exc)[:200]}"
        verb = "download" if download else "read the cached copy of"
        raise ProfileError(f"--dataset {src.spec()}: could not {verb} the hub dataset {src.repo_id}: {why}; or "
                           f"fetch it yourself with `{fetch_line(src)}` and run again with HF_HUB_OFFLINE=1") from None


def card_configs(snapshot: Path) -> list[dict[str, Any]]:
    """The ``configs`` of the dataset card ``README.md`` in ``snapshot`` (``[]`` without a card or without
    ``configs``), each ``{"config_name", "default", "splits": {split: [patterns]}}``.

    Raises:
        ProfileError: a card whose ``configs`` is not a list of mappings.
    """
    card = snapshot / "README.md"
    if not card.is_file():
        return []
    hf = _hf()
    try:
        data = hf.DatasetCard.load(card).data.to_dict()
    except Exception as exc:  # malformed YAML front matter: the library's error, shown as the card's fault
        raise ProfileError(f"{card}: the dataset card's YAML front matter cannot be read ({exc})") from None
    raw = data.get("configs") or []
    if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
        raise ProfileError(f"{card}: configs in the dataset card is not a list of mappings")
    out = []
    for c in raw:
        out.append({"config_name": str(c.get("config_name", "default")), "default": bool(c.get("default")),
                    "splits": _splits_of(c.get("data_files"), c.get("data_dir"))})
    return out


def _splits_of(data_files: Any, data_dir: Any) -> dict[str, list[str]]:
    """``{split: [patterns]}`` of a card config's ``data_files`` (str, list of str, or list of
    ``{split, path}``); with only ``data_dir``, every file below it as ``train``."""
    base = f"{str(data_dir).strip('/')}/" if data_dir else ""
    if data_files is None:
        return {"train": [f"{base}**"]} if base else {}
    if isinstance(data_files, str):
        return {"train": [base + data_files]}
    if isinstance(data_files, dict):  # {split: path(s)}
        return {str(k): [base + p for p in ([v] if isinstance(v, str) else list(v or []))] for k, v in data_files.items()}
    out: dict[str, list[str]] = {}
    for entry in data_files or []:
        if isinstance(entry, str):
            out.setdefault("train", []).append(base + entry)
        elif isinstance(entry, dict):
            paths = entry.get("path")
            for p in [paths] if isinstance(paths, str) else list(paths or []):
                out.setdefault(str(entry.get("split", "train")), []).append(base + str(p))
    return out


def _pick_split(splits: Sequence[str], asked: str | None, where: str) -> str:
    if asked is not None:
        if asked not in splits:
            raise ProfileError(f"{where} has no split {asked!r} (splits: {', '.join(splits) or 'none'})")
        return asked
    if len(splits) == 1:
        return splits[0]
    return next((s for s in SPLIT_ORDER if s in splits), sorted(splits)[0])


def plan(snapshot: Path, src: HubSource) -> tuple[str | None, str, list[str], list[str]]:
    """``(config, split, patterns, splits)``: what to read from ``snapshot`` for ``src`` (module docstring).

    Raises:
        ProfileError: CONFIG or SPLIT not in the card, or several configurations and none asked.
    """
    configs = card_configs(snapshot)
    where = f"hub dataset {src.repo_id}"
    if configs:
        names = [c["config_name"] for c in configs]
        if src.config is not None:
            chosen = next((c for c in configs if c["config_name"] == src.config), None)
            if chosen is None:
                raise ProfileError(f"{where} has no configuration {src.config!r} (its card lists {', '.join(names)}); "
                                   f"e.g. --dataset hf:{src.repo_id}:{names[0]}")
        else:
            defaults = [c for c in configs if c["default"]]
            if len(configs) > 1 and not defaults:
                raise ProfileError(f"{where} has {len(configs)} configurations ({', '.join(names)}) and none is the "
                                   f"default: name one, e.g. --dataset hf:{src.repo_id}:{names[0]}")
            chosen = (defaults or configs)[0]
        splits = list(chosen["splits"])
        split = _pick_split(splits, src.split, f"{where}, configuration {chosen['config_name']}")
        return chosen["config_name"], split, chosen["splits"][split], splits
    base = f"{src.config}/" if src.config else ""
    files = [f for f in _data_files(snapshot) if not base or f.startswith(base) or f"/{base}" in f]
    by_split: dict[str, list[str]] = {}
    for f in files:
        name = f.rsplit("/", 1)[-1]
        split = next((s for s in (*SPLIT_ORDER, "dev", "eval") if re.search(rf"(^|[-_.]){s}([-_.]|$)", name)), "train")
        by_split.setdefault(split, []).append(f)
    if not by_split:  # nothing cached yet: what to download
        return src.config, src.split or "train", [f"{base}*{s}" for s in DATA_SUFFIXES] if base else \
            [f"*{s}" for s in DATA_SUFFIXES], []
    split = _pick_split(list(by_split), src.split, where + (f", directory {src.config}" if src.config else ""))
    return src.config, split, by_split[split], list(by_split)


def _data_files(snapshot: Path) -> list[str]:
    """The data files in ``snapshot`` (relative POSIX paths, sorted)."""
    out = []
    for p in snapshot.rglob("*"):
        if p.is_file() and p.suffix.lower() in DATA_SUFFIXES and ".cache" not in p.parts:
            out.append(p.relative_to(snapshot).as_posix())
    return sorted(out)


def _matching(snapshot: Path, patterns: Sequence[str]) -> list[Path]:
    """The data files of ``snapshot`` matching any of ``patterns`` (``fnmatch``; ``**`` as ``*``; a bare
    directory means everything below it)."""
    files = _data_files(snapshot)
    pats = [p.replace("**", "*") for p in patterns]
    pats += [p.rstrip("/") + "/*" for p in pats if not any(ch in p for ch in "*?[")]
    return [snapshot / f for f in files if any(fnmatch.fnmatchcase(f, p) for p in pats)]


def read(src: HubSource) -> tuple[str, list[Any], dict]:
    """``("hub", rows, record)`` of a hub dataset: every row of the chosen configuration and split, file
    after file; ``record`` holds ``repo_id``, ``config``, ``split``, ``splits``, ``revision`` (the snapshot's
    commit), ``snapshot``, ``files`` and ``offline``.

    Raises:
        ProfileError: ``huggingface_hub`` missing; not cached in offline mode (the ``hf download`` line);
            a failed download; no configuration / split / data file as asked; a file its reader refuses.
    """
    off = offline()
    snap = _snapshot(src, None, download=False)
    if snap is None and off:
        raise ProfileError(f"--dataset {src.spec()}: the hub dataset {src.repo_id} is not in the local Hugging Face "
                           f"cache ({hub_cache_dir()}) and offline mode is on ({_offline_var()}): fetch it once with "
                           f"`{fetch_line(src)}` (or unset {_offline_var()} to let specdash download it)")
    if snap is None:  # the card first: it says which files the configuration needs
        snap = _snapshot(src, ["README.md"], download=True)
    config, split, patterns, splits = plan(snap, src)
    files = _matching(snap, patterns)
    if not files and not off:
        snap = _snapshot(src, ["README.md", *patterns], download=True)
        config, split, patterns, splits = plan(snap, src)
        files = _matching(snap, patterns)
    if not files:
        what = f"configuration {config}, split {split}" if config else f"split {split}"
        hint = (f"fetch them with `{fetch_line(src, patterns)}`" if off else
                "the repository has no .jsonl, .json or .parquet file there")
        raise ProfileError(f"--dataset {src.spec()}: no data file of {what} ({', '.join(patterns)}) in the cached "
                           f"snapshot {snap}; {hint}")
    rows: list[Any] = []
    for f in files:
        reader = parquet.read if f.suffix.lower() in parquet.SUFFIXES else jsonl.read
        rows.extend(reader(f)[1])
    return "hub", rows, {"repo_id": src.repo_id, "config": config, "split": split, "splits": splits,
                         "revision": snap.name, "snapshot": str(snap),
                         "files": [f.relative_to(snap).as_posix() for f in files], "offline": off}


def _offline_var() -> str:
    return next((f"{v}={os.environ[v]}" for v in OFFLINE_VARS if os.environ.get(v, "").strip().lower() in _TRUE),
                "HF_HUB_OFFLINE=1")
