"""SGLang's facts per release, as its wheels state them (generated data, read-only here).

``sglang-<release>.json.gz`` beside this module holds one release each, written by
``scripts/extract_sglang_facts.py`` from the PyPI wheel (read with :mod:`ast`, never imported; the
file names the release, the wheel and its sha256, and every entry its ``src`` = ``path/in/wheel.py:line``).
The doctor, the launcher's resolution of the speculative flags and the simulator read these facts
through this module and keep no copies of them:

- the long options each release accepts, their defaults, choices, deprecated and removed aliases
  (``flags``);
- the speculative algorithms, their aliases (``NEXTN`` → ``EAGLE``) and draft architectures that promote
  an algorithm (Gemma-4 assistant drafts → ``FROZEN_KV_MTP``) or refuse one (``algorithms``);
- which registered model classes can feed an EAGLE3 head (define or inherit
  ``set_eagle3_layers_to_capture``) and expose ``get_embed_and_head`` (``models``);
- the target architectures SGLang rewrites to a draft class when it drafts from the target's own
  directory — bundled MTP / NextN layers (``draft_archs``; the fallback of the draft's model path to the
  target's is ``draft_default_src``);
- argument checks specdash's resolver mirrors (``checks``), adaptive-mode data (``adaptive``) and what
  the EAGLE3 draft loader reads of its config (``eagle3_loader``).

A judged release with no file of its own uses the nearest stored release below it
(:func:`facts_for`; ``exact`` says which).  A new SGLang release is a re-run of the extractor, not a
code change.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from specdash.sglang.release import SGLangVersion, parse_version

FACTS_DIR = Path(__file__).resolve().parent
#: The extractor's output version these readers understand (``extractor_version`` of every file).
EXTRACTOR_VERSION = 1


class FactsError(Exception):
    """A facts file is unreadable or was written by another extractor version (re-run the extractor)."""


@cache
def stored_releases() -> tuple[SGLangVersion, ...]:
    """The releases with a facts file, ascending."""
    out = []
    for p in FACTS_DIR.glob("sglang-*.json.gz"):
        try:
            out.append(parse_version(p.name[len("sglang-"):-len(".json.gz")]))
        except ValueError:
            continue
    return tuple(sorted(out))


def release_file(release: str | SGLangVersion) -> Path:
    """The facts file of a stored release (it may not exist)."""
    return FACTS_DIR / f"sglang-{parse_version(release)}.json.gz"


@cache
def _load(release: str) -> dict:
    path = release_file(release)
    try:
        data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, ValueError, EOFError) as exc:
        raise FactsError(f"{path}: cannot be read ({exc}); re-run scripts/extract_sglang_facts.py") from None
    if data.get("extractor_version") != EXTRACTOR_VERSION:
        raise FactsError(f"{path}: written by extractor version {data.get('extractor_version')!r}, this specdash "
                         f"reads version {EXTRACTOR_VERSION}; re-run scripts/extract_sglang_facts.py")
    return data


def basis_release(version: str | SGLangVersion) -> SGLangVersion | None:
    """The stored release whose facts judge ``version``: the newest stored one ≤ it (None when ``version`` is
    older than every stored release)."""
    v = parse_version(version)
    best = None
    for r in stored_releases():
        if not v < r:
            best = r
    return best


def next_release(version: str | SGLangVersion) -> SGLangVersion | None:
    """The oldest stored release strictly newer than ``version`` (None if none)."""
    v = parse_version(version)
    return next((r for r in stored_releases() if v < r), None)


def _names(architectures) -> list[str]:
    """The architecture names of a config's ``architectures`` (anything else in a malformed config skipped)."""
    if isinstance(architectures, str):
        return [architectures]
    try:
        return [a for a in architectures or [] if isinstance(a, str)]
    except TypeError:
        return []


@dataclass(frozen=True)
class ReleaseFacts:
    """The facts of one stored release (``data``: the file's JSON) as judged for ``asked``.

    ``release`` is the stored release the facts come from, ``exact`` whether it is ``asked`` itself.
    """

    asked: str
    release: str
    data: dict

    @property
    def exact(self) -> bool:
        return parse_version(self.asked) == parse_version(self.release)

    @property
    def wheel(self) -> str:
        return str(self.data.get("wheel", ""))

    # -- flags --------------------------------------------------------------------------------------
    @property
    def flags(self) -> dict[str, dict]:
        """Long option → ``{dest, kind, default?, choices?, deprecated?, removed?, alias_of?, src}``."""
        return self.data.get("flags", {})

    def flag(self, name: str) -> dict | None:
        return self.flags.get(name)

    def deprecated_flags(self) -> dict[str, str | None]:
        """Deprecated aliases → the replacement SGLang names (None when it names none)."""
        out: dict[str, str | None] = {}
        for name, e in self.flags.items():
            dep = e.get("deprecated")
            if dep:
                out[name] = dep if isinstance(dep, str) else None
        return out

    def removed_flags(self) -> dict[str, str]:
        """Retired flags SGLang still declares only to stop with a message (argparse error)."""
        return {n: e["removed"] for n, e in self.flags.items() if e.get("removed")}

    # -- algorithms ---------------------------------------------------------------------------------
    @property
    def algorithms(self) -> tuple[str, ...]:
        """Algorithm names ``--speculative-algorithm`` accepts (members and aliases, upper case)."""
        a = self.data.get("algorithms", {})
        return tuple(sorted(set(a.get("names", [])) | set(a.get("aliases", {}))))

    def alias(self, name: str) -> tuple[str, str] | None:
        """``(canonical name, src)`` when ``name`` is an alias (``NEXTN`` → ``EAGLE``), else None."""
        a = self.data.get("algorithms", {}).get("aliases", {}).get(str(name).upper())
        return (a["to"], a["src"]) if a else None

    def promotion(self, draft_architectures: list[str], algorithm: str) -> dict | None:
        """``{algorithm, src, arch}`` when a draft of these architectures promotes ``algorithm`` (as typed,
        upper case: ``NEXTN`` / ``EAGLE``) to another one (Gemma-4 assistant → ``FROZEN_KV_MTP``)."""
        promos = self.data.get("algorithms", {}).get("promotions", {})
        for arch in _names(draft_architectures):
            p = promos.get(arch)
            if p and algorithm.upper() in p.get("from", []):
                return dict(p, arch=arch)
        return None

    def refusal_for_draft(self, draft_architectures: list[str], algorithm: str) -> dict | None:
        """``{message, src, arch}`` when SGLang refuses ``algorithm`` for a draft of these architectures."""
        refused = self.data.get("algorithms", {}).get("refused", {})
        for arch in _names(draft_architectures):
            r = refused.get(arch, {}).get(algorithm.upper())
            if r:
                return dict(r, arch=arch)
        return None

    # -- model classes ------------------------------------------------------------------------------
    def model(self, arch: str) -> dict | None:
        """``{module, src, eagle3_capture?, embed_and_head?}`` of a registered architecture, else None."""
        return self.data.get("models", {}).get(arch)

    def capture(self, architectures: list[str]) -> tuple[bool | None, str | None, str | None]:
        """Can a target of these architectures feed an EAGLE3 head in this release?

        Returns ``(answer, arch, src)``: True with the source of ``set_eagle3_layers_to_capture`` (defined
        by the class or a base it inherits); False when the class is registered without it (SGLang raises
        ``ValueError`` at start-up); None when no architecture is registered in this release.
        """
        known = [(a, self.model(a)) for a in _names(architectures)]
        for a, m in known:
            if m and m.get("eagle3_capture"):
                return True, a, m["eagle3_capture"]
        for a, m in known:
            if m:
                return False, a, m.get("src")
        return None, None, None

    def draft_class(self, architectures: list[str]) -> tuple[str, str, str] | None:
        """``(target arch, draft arch, src)`` when SGLang drafts from the target's own directory with an
        MTP / NextN class for this architecture (``ModelConfig._config_draft_model``), else None."""
        for a in _names(architectures):
            d = self.data.get("draft_archs", {}).get(a)
            if d:
                return a, d["draft"], d["src"]
        return None

    def drafts_from_target(self, architectures: list[str]) -> tuple[str, str | None, str] | None:
        """``(target arch, draft arch or None, src)`` when SGLang, given no draft path, drafts from the
        target's own checkpoint for this architecture: the speculative hook sets the draft path to the
        model path (``draft_path_defaults``), or the draft's model path falls back to the target's and
        ``_config_draft_model`` rewrites the architecture to an MTP / NextN class (``draft_archs``).
        None: SGLang loads the target class itself as the draft (it has no draft layers)."""
        dc = self.draft_class(architectures)
        if dc is not None:
            return dc
        for a in _names(architectures):
            src = self.data.get("draft_path_defaults", {}).get(a)
            if src:
                return a, None, src
        return None

    @property
    def draft_default_src(self) -> str | None:
        """Where the draft's model path falls back to the target's when none is given."""
        return self.data.get("draft_default_src")

    def eagle3_draft_archs(self) -> dict[str, str]:
        """Registered EAGLE3 draft architectures (classes of an ``*eagle3*`` module) → their source."""
        return {a: m["src"] for a, m in self.data.get("models", {}).items() if "eagle3" in m.get("module", "")}

    # -- checks, adaptive, loader -------------------------------------------------------------------
    def check(self, name: str) -> dict | None:
        """An argument check of this release (``lora_speculative``, ``dflash_block_size_mismatch``), else None."""
        return self.data.get("checks", {}).get(name)

    @property
    def adaptive(self) -> dict:
        return self.data.get("adaptive", {})

    @property
    def eagle3_loader(self) -> dict:
        return self.data.get("eagle3_loader", {})


def facts_for(version: str | SGLangVersion) -> ReleaseFacts | None:
    """The facts judging ``version`` (nearest stored release ≤ it), or None when it is older than all.

    Raises:
        ValueError: ``version`` is not a version; FactsError: the file is unreadable or stale.
    """
    basis = basis_release(version)
    if basis is None:
        return None
    return ReleaseFacts(str(parse_version(version)), str(basis), _load(str(basis)))


def first_release_with(predicate, *, after: str | SGLangVersion | None = None) -> str | None:
    """The oldest stored release (newer than ``after`` when given) whose facts satisfy ``predicate``."""
    a = parse_version(after) if after is not None else None
    for r in stored_releases():
        if a is not None and not a < r:
            continue
        if predicate(ReleaseFacts(str(r), str(r), _load(str(r)))):
            return str(r)
    return None


def facts_newest() -> ReleaseFacts:
    """The newest stored release's facts.

    Raises:
        FactsError: no facts file is stored.
    """
    rels = stored_releases()
    if not rels:
        raise FactsError(f"no sglang-*.json.gz in {FACTS_DIR}; run scripts/extract_sglang_facts.py")
    return ReleaseFacts(str(rels[-1]), str(rels[-1]), _load(str(rels[-1])))


__all__ = ["EXTRACTOR_VERSION", "FACTS_DIR", "FactsError", "ReleaseFacts", "basis_release", "facts_for",
           "facts_newest", "first_release_with", "next_release", "release_file", "stored_releases"]
