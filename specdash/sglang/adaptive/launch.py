"""How SGLang resolves ``--speculative-adaptive`` at launch, by release (fall-backs, launch tier, flag values).

Part of :mod:`specdash.sglang.adaptive` (its docstring describes the mechanism).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specdash.sglang.adaptive.config import AdaptiveConfig, AdaptiveConfigError, parse_config
from specdash.sglang.versions import has_feature, parse_version

__all__ = [
    "LaunchResolution",
    "early_launch",
    "flag_int",
    "launch_booleans",
    "resolve_launch",
    "unsupported_reason",
]
# -- launch resolution ---------------------------------------------------------------------------

def unsupported_reason(version: str, *, algorithm: str | None, topk: int | None,
                       disable_overlap_schedule: bool = False, enable_dp_attention: bool = False,
                       enable_multi_layer_eagle: bool = False, enable_two_batch_overlap: bool = False,
                       enable_pdmux: bool = False) -> str | None:
    """``adaptive_unsupported_reason``: why SGLang turns adaptive off (it then logs
    ``speculative_adaptive disabled: <reason>. Falling back to static speculative params.``
    and runs the launch settings), or None when adaptive runs."""
    v = str(parse_version(version))
    if algorithm not in ("EAGLE", "EAGLE3"):
        return f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    # 0.5.14 lets an unset top-k through (``_init_adaptive_speculative_params`` then sets 1).
    topk_none_ok = has_feature("adaptive_launch_resolution", v)
    if (topk is not None or not topk_none_ok) and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if enable_dp_attention:
        if not parse_version(v) < parse_version("0.5.23"):  # 0.5.20 still has the old text
            return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
        return ("enable_dp_attention=True is not supported "
                "(adaptive tier decisions are not synchronized across DP ranks)")
    # 0.5.11 checks the overlap scheduler after top-k and attention DP (adaptive_spec_params.py).
    if has_feature("adaptive_requires_no_overlap", v) and not disable_overlap_schedule:
        return "the overlap scheduler (spec v2) is enabled (adaptive is only implemented for EAGLEWorker v1)"
    if enable_multi_layer_eagle:
        worker = "MultiLayerEagleWorkerV2" if has_feature("adaptive_keyed_config", v) else "MultiLayerEagleWorker"
        return f"enable_multi_layer_eagle=True is not supported ({worker} does not implement adaptive)"
    if enable_two_batch_overlap:
        return ("enable_two_batch_overlap=True is not supported "
                "(adaptive state swap would discard the TboAttnBackend wrapper)")
    if enable_pdmux:
        return ("enable_pdmux=True is not supported "
                "(adaptive state swap does not update decode_attn_backend_group)")
    return None


@dataclass
class LaunchResolution:
    """What ``--speculative-adaptive`` does to a launch on one release.

    ``enabled``: adaptive runs; ``reason``: why not (SGLang's text; None when enabled or not
    asked); ``num_steps`` / ``eagle_topk`` / ``num_draft_tokens``: the values to launch with
    (None = leave the flags as given); ``config``: the parsed config (None when disabled or
    on error); ``error``: the start-up failure (config or launch-steps check).
    """

    enabled: bool
    reason: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    config: AdaptiveConfig | None = None
    error: AdaptiveConfigError | None = None
    notes: list[str] = field(default_factory=list)


def resolve_launch(version: str, *, algorithm: str | None, num_steps: int | None, eagle_topk: int | None,
                   num_draft_tokens: int | None, config: Any = None, **flags: bool) -> LaunchResolution:
    """Apply SGLang's adaptive start-up rules to the speculative flags.

    From 0.5.14 (``_init_adaptive_speculative_params``, before the EAGLE-family checks):
    top-k None → 1, steps None → the middle of the candidates' union, steps must be a
    candidate (``ValueError``), draft tokens := steps + 1 silently.  0.5.13 only checks the
    steps (after the usual resolution); 0.5.11–0.5.12 check nothing (0.5.12 adds the launch
    steps to the candidates).  ``flags`` are :func:`unsupported_reason`'s booleans.
    """
    v = str(parse_version(version))
    algo = str(algorithm).upper() if algorithm else None
    if algo == "NEXTN":
        algo = "EAGLE"
    reason = unsupported_reason(v, algorithm=algo, topk=eagle_topk, **flags)
    if reason is not None:
        return LaunchResolution(False, reason)
    early = has_feature("adaptive_launch_resolution", v)
    try:
        cfg = parse_config(config, v)
    except AdaptiveConfigError as exc:
        return LaunchResolution(False, error=exc)
    steps, topk, draft = num_steps, eagle_topk, num_draft_tokens
    if early:
        cands = cfg.candidate_steps()
        topk = 1 if topk is None else topk
        steps = cands[len(cands) // 2] if steps is None else steps
    if steps is not None:
        try:
            cfg = parse_config(config, v, launch_steps=steps)
        except AdaptiveConfigError as exc:
            return LaunchResolution(False, error=exc)
        if early:
            draft = steps + 1
    return LaunchResolution(True, num_steps=steps, eagle_topk=topk, num_draft_tokens=draft, config=cfg,
                            notes=list(cfg.warnings))


#: Server flags :func:`unsupported_reason` reads (canonical flag → its keyword).
UNSUPPORTED_FLAGS: dict[str, str] = {
    "--disable-overlap-schedule": "disable_overlap_schedule",
    "--enable-dp-attention": "enable_dp_attention",
    "--enable-multi-layer-eagle": "enable_multi_layer_eagle",
    "--enable-two-batch-overlap": "enable_two_batch_overlap",
    "--enable-pdmux": "enable_pdmux",
}

_ENV_FALSE = ("false", "0", "no", "n")  # environ.py EnvBool.parse


def flag_int(v: Any) -> int | None:
    """A flag's integer value (None when absent, bare, or not a number)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def launch_booleans(flags: Mapping[str, Any], env: Mapping[str, str] | None = None,
                    version: str | None = None) -> dict[str, bool]:
    """:func:`unsupported_reason`'s booleans from canonical server flags (``--enable-dp-attention`` …).

    ``disable_overlap_schedule`` is also True where SGLang turns the overlap scheduler off itself
    before the adaptive check: on releases that still read ``SGLANG_ENABLE_SPEC_V2`` (0.5.11–0.5.13,
    ``environ.py`` ``EnvBool(True)``), a false value in ``env`` makes
    ``_handle_speculative_decoding`` log ``Spec v1 is used … because SGLANG_ENABLE_SPEC_V2=False``
    and set it (``server_args.py``).  Other start-up paths that disable it (some model families,
    pipeline parallelism) are not modelled.
    """
    out = {kw: bool(flags.get(flag)) for flag, kw in UNSUPPORTED_FLAGS.items()}
    if not out["disable_overlap_schedule"] and env and version is not None:
        val = str(env.get("SGLANG_ENABLE_SPEC_V2", "")).strip().lower()
        if val in _ENV_FALSE and has_feature("spec_v2_default_topk_fallback", version):
            out["disable_overlap_schedule"] = True
    return out


def early_launch(flags: Mapping[str, Any], version: str, *,
                 env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], LaunchResolution | None]:
    """The speculative flags as SGLang resolves them when ``--speculative-adaptive`` runs first.

    From 0.5.14 (``adaptive_launch_resolution``: ``arg_groups/speculative_hook.py``
    ``handle_speculative_decoding`` calls ``_maybe_disable_adaptive`` and
    ``_init_adaptive_speculative_params`` before the EAGLE-family checks) adaptive fixes top-k,
    steps and draft tokens before anything else reads them; the returned flags carry those values,
    so the usual resolution (``specdash.sglang.speculative.resolve_flags``) then sees what SGLang sees.

    Returns ``(flags, resolution)``: the flags unchanged and None when adaptive is not asked or the
    release resolves it after the EAGLE checks (≤ 0.5.13); unchanged with the resolution when
    SGLang turns adaptive off (``reason``) or refuses the config (``error``); an unreadable config
    file (OSError, JSON syntax) also leaves them unchanged, with None.
    """
    v = str(parse_version(version))
    out = dict(flags)
    if not flags.get("--speculative-adaptive") or not has_feature("adaptive_spec", v) \
            or not has_feature("adaptive_launch_resolution", v):
        return out, None
    cfg = flags.get("--speculative-adaptive-config")
    try:
        e = resolve_launch(v, algorithm=flags.get("--speculative-algorithm"),
                           num_steps=flag_int(flags.get("--speculative-num-steps")),
                           eagle_topk=flag_int(flags.get("--speculative-eagle-topk")),
                           num_draft_tokens=flag_int(flags.get("--speculative-num-draft-tokens")),
                           config=cfg if isinstance(cfg, str) else None, **launch_booleans(flags, env, v))
    except (OSError, ValueError):
        return out, None
    if e.enabled:
        out["--speculative-num-steps"] = e.num_steps
        out["--speculative-eagle-topk"] = e.eagle_topk
        out["--speculative-num-draft-tokens"] = e.num_draft_tokens
    return out, e


