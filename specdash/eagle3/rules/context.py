"""The state every doctor rule reads and appends to: :class:`RuleContext`.

:func:`specdash.eagle3.doctor.run_doctor` builds one per profile (flags, the models it could
open, SGLang's resolution of the speculative flags) and passes it to each rule in turn; a
rule reads what it needs and adds findings with :meth:`RuleContext.add`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdash.checkpoint.reader import DraftInfo, ModelDir
from specdash.eagle3.findings import Finding
from specdash.sglang.speculative import EAGLE_FAMILY, SpecResolution


@dataclass
class RuleContext:
    """What the rules judge, and the findings so far.

    ``profile``: the expanded :class:`~specdash.profile.Profile`; ``version`` / ``source``: the
    SGLang release judged against and where that choice came from (``cli`` | ``profile`` |
    ``server`` | ``installed`` | ``assumed``); ``flags``: the server flags the profile produces
    (name → value); ``raw_words``: ``extra_args`` as typed; ``env``: the profile's ``[env]``;
    ``res``: SGLang's start-up resolution of the speculative flags; ``target`` / ``draft``: the
    models as read (None when absent or unreadable); ``draft_path``: the draft path given;
    ``gpus``: ``[{"name", "memory_total_mib"}, …]`` or None when unknown; ``concurrency``: the
    planned concurrent requests or None; ``adaptive``: SGLang's early adaptive resolution
    (:func:`specdash.sglang.adaptive.early_launch`, 0.5.14+; None otherwise) — ``res`` was computed
    from the flags it rewrote.
    """

    profile: Any
    version: str
    source: str
    flags: dict
    raw_words: list[str]
    env: dict
    res: SpecResolution
    target: ModelDir | None
    draft: DraftInfo | None
    draft_path: str | None
    gpus: list[dict] | None
    concurrency: int | None
    findings: list[Finding] = field(default_factory=list)
    adaptive: Any = None

    def add(self, code: str, severity: str, message: str, why: str = "", fix: str = "", **evidence) -> Finding:
        """Append a :class:`Finding` (keyword arguments become its evidence) and return it.

        Raises:
            ValueError: an unknown severity.
        """
        f = Finding(code, severity, message, why, fix, evidence)
        self.findings.append(f)
        return f

    @property
    def judged(self) -> str:
        """``SGLang X (where X came from)``, for messages."""
        names = {"cli": "--sglang-version", "profile": "the profile's sglang_version",
                 "server": "the server's /server_info", "installed": "the installed sglang",
                 "assumed": "assumed, newest known"}
        return f"SGLang {self.version} ({names.get(self.source, self.source)})"

    @property
    def algo(self) -> str | None:
        """The effective ``speculative_algorithm`` (upper case) or None."""
        return self.res.algorithm

    @property
    def eagle_algo(self) -> bool:
        """True for an algorithm of SGLang's EAGLE family (EAGLE, EAGLE3, STANDALONE)."""
        return self.algo in EAGLE_FAMILY

    @property
    def target_archs(self) -> list[str]:
        """The target's ``architectures`` (empty when the target could not be read)."""
        return self.target.architectures if self.target else []

    @property
    def target_vocab(self) -> int | None:
        """The target's ``vocab_size``, else the draft config's (which must equal it), else None."""
        if self.target is not None and self.target.vocab_size:
            return int(self.target.vocab_size)
        if self.draft is not None and self.draft.model.vocab_size:
            return int(self.draft.model.vocab_size)
        return None
