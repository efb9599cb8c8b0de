"""An SGLang release number: :class:`SGLangVersion` and :func:`parse_version`.

The key of everything kept per release — the behaviour table (:mod:`specdash.sglang.versions`) and the
facts generated from each wheel (:mod:`specdash.sglang.facts`) — so it stands below both of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

_VERSION_RE = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.+-]?(.*))?$")


@total_ordering
@dataclass(frozen=True)
class SGLangVersion:
    """A parsed SGLang release number (``major.minor.patch``; suffixes such as
    ``rc1`` / ``.post1`` are kept in ``suffix`` and sort before the final release
    only for ``rc``/``a``/``b``/``dev``).

    Raises:
        ValueError: from :func:`parse_version` when the text is not a version.
    """

    major: int
    minor: int
    patch: int
    suffix: str = ""

    def _key(self) -> tuple:
        pre = bool(re.match(r"^(rc|a|b|dev)", self.suffix))
        return (self.major, self.minor, self.patch, 0 if pre else 1, self.suffix)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, SGLangVersion):
            other = parse_version(str(other))
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = parse_version(other)
        return isinstance(other, SGLangVersion) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}.{self.patch}"
        if self.suffix.startswith("post"):  # PEP 440 spells post-releases with a dot: 0.5.10.post1
            return f"{base}.{self.suffix}"
        return f"{base}{self.suffix}" if self.suffix else base


def parse_version(text: str | SGLangVersion) -> SGLangVersion:
    """Parse ``"0.5.14"``, ``"0.5.2rc2"``, ``"v0.5.23"`` into :class:`SGLangVersion`.

    Raises:
        ValueError: the text does not start with a dotted release number.
    """
    if isinstance(text, SGLangVersion):
        return text
    m = _VERSION_RE.match(str(text))
    if not m:
        raise ValueError(f"not an SGLang version: {text!r} (expected e.g. 0.5.14)")
    major, minor, patch, rest = m.groups()
    return SGLangVersion(int(major), int(minor or 0), int(patch or 0), rest or "")
