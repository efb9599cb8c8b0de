"""SGLang's EAGLE3 capture facts: which targets capture aux hidden states, at which layers,
which draft classes SGLang has, and which targets carry their own draft layers.

One place for these facts: the preflight doctor (:mod:`specdash.eagle3.rules`) and the
simulator (:mod:`specdash.sim.wiring`) both import them.  Which classes exist, capture or carry
MTP / NextN layers is read per release from the facts generated from SGLang's wheels
(:mod:`specdash.sglang.facts`); the id conventions below follow SGLang's source (0.5.23 unless
a release is named; version-dependent behaviour in :mod:`specdash.sglang.versions`):

- ``srt/models/llama.py`` ``set_eagle3_layers_to_capture``: with no ids the target captures
  ``layers_to_capture = [2, L//2, L−3]``; explicit ids become ``id + 1``.  A capture index
  ``i`` is the residual stream at the input of decoder layer ``i`` (= output of layer
  ``i − 1``), so explicit ids mean "output of layer id".  qwen2, qwen3, qwen3_moe follow it.
- ``srt/models/gpt_oss.py`` (0.5.17+, SGLang PR #32334): ids are kept when ``max(ids) == L``
  (boundary convention) and index ``L`` is captured after the last layer.
- ``srt/models/deepseek_v2.py`` (0.5.13+): ids are shifted by +1 only when ``layer_ids[0] == 1``.
- ``srt/model_executor/model_runner_components/attention_backend_setup.py``
  ``configure_aux_hidden_state_capture``: a target class without
  ``set_eagle3_layers_to_capture`` raises ``ValueError`` at start-up.
- ``srt/configs/model_config.py`` ``ModelConfig.from_server_args``: the draft's model path falls back
  to the target's (``model_path or …``) and ``_config_draft_model`` rewrites the target architecture to
  its MTP / NextN class; ``srt/arg_groups/speculative_hook.py`` ``_handle_eagle_family`` sets a missing
  draft path to the model path for some targets.

Imports nothing of specdash but :mod:`specdash.sglang.versions` and :mod:`specdash.sglang.facts`.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdash.sglang.facts import facts_for, facts_newest, first_release_with
from specdash.sglang.versions import has_feature


def _facts(version: str | None):
    """The facts judging ``version`` (the newest stored ones when it is None, unparsable or older than all)."""
    try:
        f = facts_for(version) if version else None
    except ValueError:
        f = None
    return f if f is not None else facts_newest()


def eagle3_arch_release(arch: str, version: str) -> tuple[bool, str | None]:
    """(whether SGLang ``version`` has a model class for the EAGLE3 draft architecture ``arch``, the first
    stored release that has one, or None when no stored release does).  Read from the facts: the
    ``EntryClass`` of ``srt/models/*eagle3*.py``."""
    f = _facts(version)
    since = first_release_with(lambda r: arch in r.eagle3_draft_archs())
    return arch in f.eagle3_draft_archs(), since


def sglang_eagle3_archs(version: str | None = None) -> tuple[str, ...]:
    """The EAGLE3 draft architectures SGLang ``version`` registers (newest stored release when None)."""
    return tuple(sorted(_facts(version).eagle3_draft_archs()))


def sglang_eagle3_srcs(version: str | None = None) -> tuple[str, ...]:
    """The source lines of :func:`sglang_eagle3_archs` (same order)."""
    archs = _facts(version).eagle3_draft_archs()
    return tuple(archs[a] for a in sorted(archs))


@dataclass(frozen=True)
class TargetDraft:
    """What SGLang drafts with when a target is served without a draft path.

    ``bundled``: it drafts from the target's own checkpoint with ``draft_arch`` (an MTP / NextN class, or
    None when the speculative hook only points the draft path at the target); ``arch`` is the target
    architecture that decided it; ``src`` the SGLang source line, ``release`` the release judged.
    """

    bundled: bool
    arch: str | None = None
    draft_arch: str | None = None
    src: str | None = None
    release: str | None = None


def target_draft(target_architectures: list[str], version: str | None = None) -> TargetDraft:
    """How SGLang ``version`` drafts for a target of these architectures given no draft path
    (:meth:`specdash.sglang.facts.ReleaseFacts.drafts_from_target`)."""
    f = _facts(version)
    hit = f.drafts_from_target(target_architectures)
    if hit is None:
        return TargetDraft(False, release=f.release)
    return TargetDraft(True, hit[0], hit[1], hit[2], f.release)


def bundles_mtp(target_architectures: list[str], version: str | None = None) -> bool:
    """True when SGLang ``version`` drafts from the target's own checkpoint (bundled MTP / NextN layers)
    when no draft path is given (:func:`target_draft`)."""
    return target_draft(target_architectures, version).bundled


def capture_source(target_architectures: list[str], version: str | None = None) -> tuple[bool | None, str | None,
                                                                                       str | None]:
    """``(can capture, architecture, src)`` of :meth:`specdash.sglang.facts.ReleaseFacts.capture` for SGLang
    ``version``: src is the ``set_eagle3_layers_to_capture`` definition (or the class, when it has none)."""
    return _facts(version).capture(target_architectures)


def implements_capture(target_architectures: list[str], version: str | None = None) -> bool | None:
    """Whether the target's model class in SGLang ``version`` defines or inherits
    ``set_eagle3_layers_to_capture``: True; False (SGLang raises ``ValueError`` at start-up under EAGLE3);
    None when no architecture is registered in that release (the facts' ``models``)."""
    return _facts(version).capture(target_architectures)[0]


def target_family(target_architectures: list[str]) -> str:
    """Which capture convention a target follows: ``"gpt_oss"`` (``gpt_oss.py``), ``"deepseek"``
    (``deepseek_v2.py``, used by DeepSeek and Kimi targets) or ``"default"`` (``llama.py``)."""
    if any(a.startswith("GptOss") for a in target_architectures):
        return "gpt_oss"
    if any(a.startswith(("Deepseek", "KimiK25", "Kimi")) for a in target_architectures):
        return "deepseek"
    return "default"


def default_aux_ids(num_layers: int) -> list[int]:
    """The layers an L-layer target captures when the draft names none, in the config convention
    ("output of layer id"): ``[1, L//2 − 1, L − 4]``.

    ``srt/models/llama.py`` ``set_eagle3_layers_to_capture`` sets ``layers_to_capture =
    [2, L//2, L−3]`` (decoder-input indices = these ids + 1) when the ids are None; e.g. Llama-3.1-8B
    (L = 32) captures the outputs of layers ``[1, 15, 28]``.
    """
    L = int(num_layers)
    return [1, L // 2 - 1, L - 4]


def capture_plan(target_architectures: list[str], num_layers: int, ids: list[int] | None,
                 version: str) -> tuple[list[int], list[int]]:
    """What SGLang's target captures for EAGLE3: ``(capture indices, valid indices)``.

    Args:
        target_architectures: the target's ``architectures`` (picks :func:`target_family`).
        num_layers: the target's ``num_hidden_layers`` (L).
        ids: ``eagle_config.eagle_aux_hidden_state_layer_ids`` of the draft, None when absent.
        version: the SGLang release judged.

    A capture index i means "the residual stream at the input of decoder layer i" = the
    output of layer i − 1 (index 0 = the embeddings).  Defaults (ids None) are
    :func:`default_aux_ids` + 1 = ``[2, L//2, L−3]``; explicit ids become ``id + 1``
    (``models/llama.py``), except on gpt-oss ≥ 0.5.17 when ``max(ids) == L`` (kept: boundary
    convention, ``gpt_oss.py``) and on DeepSeek-family targets ≥ 0.5.13 unless the first id is
    1 (kept, ``deepseek_v2.py``).  Valid indices are ``0 … L−1`` (and ``L`` on gpt-oss ≥ 0.5.17,
    captured after the last layer); invalid ones are silently never captured.
    """
    L = int(num_layers)
    fam = target_family(target_architectures)
    if ids is None:
        cap = [i + 1 for i in default_aux_ids(L)]
    elif (fam == "gpt_oss" and has_feature("gpt_oss_boundary_ids", version) and ids and max(ids) == L) or (
            fam == "deepseek" and has_feature("deepseek_aux_ids_unshifted", version) and ids and ids[0] != 1):
        cap = list(ids)
    else:
        cap = [i + 1 for i in ids]
    top = L if (fam == "gpt_oss" and has_feature("gpt_oss_boundary_ids", version)) else L - 1
    valid = sorted({c for c in cap if 0 <= c <= top})
    return cap, valid


__all__ = [
    "TargetDraft",
    "bundles_mtp",
    "capture_plan",
    "capture_source",
    "default_aux_ids",
    "eagle3_arch_release",
    "implements_capture",
    "sglang_eagle3_archs",
    "sglang_eagle3_srcs",
    "target_draft",
    "target_family",
]
