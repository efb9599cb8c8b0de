"""The speculative settings a server really runs, as it reports them: the one reader of the four fields.

SGLang's ``/server_info`` carries ``speculative_algorithm``, ``speculative_num_steps``,
``speculative_eagle_topk`` and ``speculative_num_draft_tokens`` after its start-up normalisation
(:mod:`specdash.sglang.speculative`); a RUN's ``effective`` (:class:`specdash.results.Effective`) holds the
same four read back at run time.  :meth:`SpecSettings.from_effective` reads either, so the runner, the
comparison, the live collector, the context check and the dashboard agree on what "speculation on" and
"a count" mean: an algorithm that is absent, empty or ``NONE`` is off; a count is an ``int`` (a bool,
a string or a float is not one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class SpecSettings:
    """The four speculative settings of a server: ``algorithm`` (None when speculation is off) and the
    counts (None when unknown or not integers)."""

    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None

    @classmethod
    def from_effective(cls, d: Mapping[str, Any] | None) -> SpecSettings:
        """From ``/server_info`` or a RUN's ``effective`` (anything else reads as speculation off)."""
        d = d if isinstance(d, Mapping) else {}
        algo = d.get("speculative_algorithm")
        algo = algo if isinstance(algo, str) and algo and algo.upper() != "NONE" else None
        return cls(algo, _count(d.get("speculative_num_steps")), _count(d.get("speculative_eagle_topk")),
                   _count(d.get("speculative_num_draft_tokens")))

    @property
    def on(self) -> bool:
        """Whether a speculative algorithm runs."""
        return self.algorithm is not None

    def depth(self) -> tuple[int | None, int | None]:
        """``(steps, draft tokens)`` while speculation is on, else ``(None, None)``: how many draft positions
        ``accept_by_position`` lists (:func:`specdash.sglang.positions.accept_fields`)."""
        return (self.steps, self.draft_tokens) if self.on else (None, None)


__all__ = ["SpecSettings"]
