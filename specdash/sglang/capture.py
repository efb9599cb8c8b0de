"""SGLang's EAGLE3 capture facts: which targets capture aux hidden states, at which layers,
which draft classes SGLang has, and which targets bundle their own draft weights.

One place for these facts: the preflight doctor (:mod:`specdash.eagle3.rules`) and the
simulator (:mod:`specdash.sim.wiring`) both import them.  Sources, SGLang 0.5.23 unless a
release is named (version-dependent behaviour is looked up in :mod:`specdash.sglang.versions`):

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
- ``srt/arg_groups/speculative_hook.py`` ``_handle_eagle_family``: for targets that bundle
  MTP weights a missing ``--speculative-draft-model-path`` defaults to ``--model-path``.
- ``EntryClass`` of ``srt/models/llama_eagle3.py`` and (0.5.14+) ``kimi_k25_eagle3.py``.

Imports nothing of specdash but :mod:`specdash.sglang.versions`.
"""

from __future__ import annotations

from specdash.sglang.versions import has_feature

#: Draft architectures SGLang has an EAGLE3 model class for, with the first release that has it
#: (``EntryClass`` of ``srt/models/llama_eagle3.py``; ``kimi_k25_eagle3.py``, the MLA head, is in the
#: 0.5.12 wheel and absent from 0.5.11's — read from the released wheels).
EAGLE3_ARCH_SINCE = {"LlamaForCausalLMEagle3": "0.5.0", "Eagle3DeepseekV2ForCausalLM": "0.5.12"}
SGLANG_EAGLE3_ARCHS = tuple(EAGLE3_ARCH_SINCE)


def eagle3_arch_release(arch: str, version: str) -> tuple[bool, str | None]:
    """(whether SGLang ``version`` has a model class for the EAGLE3 draft architecture ``arch``, the first
    release that has one or None when no release does)."""
    from specdash.sglang.versions import parse_version

    since = EAGLE3_ARCH_SINCE.get(arch)
    if since is None:
        return False, None
    try:
        return parse_version(version) >= parse_version(since), since
    except (TypeError, ValueError):
        return True, since

#: Target architecture prefixes whose checkpoints bundle MTP/draft weights: without a draft
#: path SGLang uses the target path as the draft (``speculative_hook.py`` ``_handle_eagle_family``:
#: DeepseekV3/V32/V4, Glm4Moe(+Lite), GlmMoeDsa, BailingMoe, MistralLarge3, Pixtral, HYV3/V4, Qwen4Exp).
BUNDLED_MTP_PREFIXES = ("DeepseekV3", "DeepseekV32", "DeepseekV4", "Glm4Moe", "GlmMoeDsa", "BailingMoe",
                        "MistralLarge3", "Pixtral", "HYV3", "HYV4", "Qwen4Exp")

#: Target architecture prefixes whose model files implement ``set_eagle3_layers_to_capture``
#: (the 29 files of 0.5.23's ``srt/models/``: apertus, bailing_moe, deepseek_v2, exaone_moe,
#: gemma3/4, glm4_moe(_lite), glm5_next, gpt_oss, kimi_k25, llama, longcat_flash, mindspore,
#: minimax_m2/m3, mllama4, qwen2/2.5-vl/2-moe/3/3.5/3-moe/3-next/3-vl).
CAPTURE_PREFIXES = ("Llama", "Qwen2", "Qwen3", "Deepseek", "KimiK25", "Glm4Moe", "Glm5", "GptOss", "Gemma3",
                    "Gemma4", "MiniMaxM2", "MiniMaxM3", "BailingMoe", "Exaone", "Apertus", "LongcatFlash",
                    "Mllama4", "Llama4", "MindSpore")


def bundles_mtp(target_architectures: list[str]) -> bool:
    """True when a target of these architectures bundles its own MTP/draft weights, so SGLang
    drafts with the target checkpoint when no draft path is given (:data:`BUNDLED_MTP_PREFIXES`)."""
    return any(a.startswith(BUNDLED_MTP_PREFIXES) for a in target_architectures)


def implements_capture(target_architectures: list[str]) -> bool:
    """True when the target's model class (probably) implements ``set_eagle3_layers_to_capture``
    (:data:`CAPTURE_PREFIXES`); False means SGLang raises ``ValueError`` at start-up under EAGLE3."""
    return any(a.startswith(CAPTURE_PREFIXES) for a in target_architectures)


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
    "BUNDLED_MTP_PREFIXES",
    "CAPTURE_PREFIXES",
    "EAGLE3_ARCH_SINCE",
    "SGLANG_EAGLE3_ARCHS",
    "bundles_mtp",
    "capture_plan",
    "default_aux_ids",
    "eagle3_arch_release",
    "implements_capture",
    "target_family",
]
