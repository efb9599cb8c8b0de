"""What changes between SGLang releases: version parsing, behaviour features, flag look-ups.

Facts that SGLang's wheels state as data (flags, algorithms, which model classes capture aux hidden
states or carry MTP layers, draft class rewrites) are generated per release into
:mod:`specdash.sglang.facts`; the flag functions here read them.  This module keeps the behaviours
that changed between releases (:data:`FEATURES`, one source of truth per fact), the speculative
``meta_info`` key names and which draft-checkpoint key forms the EAGLE3 loader maps.  The preflight doctor, the post-launch verification, the launcher and the
simulator all consult this module, so a correction lands once.

Sources are given per entry: SGLang's source files (read from the 0.5.23 and
0.5.10 wheels), recordings of a real 0.5.14 server on an H200, and SGLang pull requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from specdash.checkpoint.layout import EAGLE3_LAYER_PARTS
from specdash.sglang.release import SGLangVersion, parse_version

#: The newest release specdash knows (assumed when nothing else names one).
DEFAULT_VERSION = "0.5.23"
#: The release recorded on real hardware (a 0.5.14 server on an H200).
REAL_SERVER_VERSION = "0.5.14"

@dataclass(frozen=True)
class Feature:
    """A fact that holds from ``since`` (inclusive) until ``until`` (exclusive).

    ``None`` bounds are open.  ``source`` says where the fact was read.
    """

    name: str
    description: str
    source: str
    since: str | None = None
    until: str | None = None

    def holds(self, version: str | SGLangVersion) -> bool:
        """True when this fact applies to ``version``."""
        v = parse_version(version)
        if self.since is not None and v < parse_version(self.since):
            return False
        if self.until is not None and not v < parse_version(self.until):
            return False
        return True


#: The version table.  Keep entries short and sourced.  Entries marked "wheel:" were read
#: from the PyPI wheels themselves (``pip download --no-deps sglang==X``, unpacked; file and
#: line given), checked release by release around each boundary.
FEATURES: dict[str, Feature] = {
    f.name: f
    for f in [
        Feature(
            "draft_layers0_keys",
            "The EAGLE3 draft loader also maps speculators-style `layers.0.*` tensor names "
            "(older releases map only `midlayer.*` and silently drop `layers.0.*`).",
            "wheel: sglang-0.5.12 sglang/srt/models/llama_eagle3.py L305-316 (`legacy_name_map` "
            "midlayer→layers.0, decoder layers in `self.layers` ModuleList; SGLang PR #24663); "
            "sglang-0.5.11 llama_eagle3.py L243-284 has `self.midlayer` and no rename, so "
            "`layers.0.*` finds no parameter and is skipped; seen loading on a real 0.5.14 server",
            since="0.5.12",
        ),
        Feature(
            "draft_fc_norm",
            "The EAGLE3 draft supports per-aux `fc_norm` (config `fc_norm` / `use_aux_norm`; "
            "checkpoint `aux_norm_low/mid/high` → `fc_norm.0/1/2`), `num_aux_hidden_states` and "
            "`num_hidden_layers` > 1; before it fc is always 3 × hidden and >1 layer raises ValueError.",
            "wheel: sglang-0.5.12 llama_eagle3.py L153-178 (num_aux resolution, fc_norm); "
            "sglang-0.5.11 llama_eagle3.py L139 (`hidden_size_in * 3`), L212 "
            "('EAGLE3 currently only supports 1 layer')",
            since="0.5.12",
        ),
        Feature(
            "draft_norm_before_fc",
            "The EAGLE3 draft honours `norm_before_fc` (eagle_config or top level) with an "
            "`input_norm` RMSNorm over the concatenated aux states; before it `input_norm.weight` "
            "is dropped and the norm never applied.",
            "wheel: sglang-0.5.17 llama_eagle3.py L165-174, L230 (absent in 0.5.16); sglang#32226 "
            "(SGLang PR #32334)",
            since="0.5.17",
        ),
        Feature(
            "gpt_oss_boundary_ids",
            "gpt-oss targets keep EAGLE3 aux ids unchanged when max(ids) == num_hidden_layers "
            "(boundary convention, final boundary captured after the last layer); before it every "
            "id is shifted by +1 and the final boundary is never captured.",
            "wheel: sglang-0.5.17 sglang/srt/models/gpt_oss.py L1328-1343 (absent in 0.5.16 "
            "L1284-1296); sglang#32226 (PR #32334)",
            since="0.5.17",
        ),
        Feature(
            "deepseek_aux_ids_unshifted",
            "DeepSeek-family targets (deepseek_v2.py, also Kimi-K2.5's language model) use explicit "
            "aux ids unchanged as capture indices unless the first id is 1 (then +1 like Llama).",
            "wheel: sglang-0.5.13 sglang/srt/models/deepseek_v2.py set_eagle3_layers_to_capture "
            "(`if layer_ids and layer_ids[0] == 1`); 0.5.12 shifts every id by +1; same in 0.5.23 L3458-3473",
            since="0.5.13",
        ),
        Feature(
            "meta_new_spec_keys",
            "meta_info carries spec_num_correct_drafts / spec_num_proposed_drafts / "
            "spec_correct_drafts_histogram.",
            "0.5.23 tokenizer_manager.py; real 0.5.14 sends both old and new names (golden generate_nonstream.json)",
            since="0.5.14",
        ),
        Feature(
            "meta_old_spec_keys",
            "meta_info carries spec_accept_token_num / spec_draft_token_num / spec_accept_histogram "
            "(0.5.10) or the spec_accepted_drafts / spec_proposed_drafts aliases (0.5.14).",
            "wheel: sglang-0.5.10 tokenizer_manager.py; golden 0.5.14 recordings",
            until="0.5.22",
        ),
        Feature(
            "cuda_graph_max_bs_flag",
            "`--cuda-graph-max-bs` exists (0.5.14–0.5.19 only as a deprecated alias of "
            "`--cuda-graph-max-bs-decode` that prints a deprecation warning); from 0.5.20 it is gone "
            "and argparse's prefix matching rejects it as ambiguous (exit code 2).",
            "wheel: sglang-0.5.19 server_args.py (`add_argument(\"--cuda-graph-max-bs\", "
            "action=DeprecatedAliasStoreAction, new_flag=\"--cuda-graph-max-bs-decode\")`, same in "
            "0.5.14 L6358-6365); absent from 0.5.20 (arg_groups/fields/exec_.py declares only "
            "cuda_graph_max_bs_decode/_prefill); argparse ambiguity reproduced on 0.5.23",
            until="0.5.20",
        ),
        Feature(
            "cuda_graph_max_bs_decode_flag",
            "`--cuda-graph-max-bs-decode` / `--cuda-graph-max-bs-prefill` exist.",
            "wheel: sglang-0.5.14 (first release with them; 0.5.13 has only --cuda-graph-max-bs); "
            "golden 0.5.14 command line",
            since="0.5.14",
        ),
        Feature(
            "spec_v2_env",
            "Spec v2 (overlap) is opt-in through SGLANG_ENABLE_SPEC_V2=1 and then supports only "
            "chain drafting: topk > 1 with it set fails at start-up (0.5.10: ValueError 'Spec v2 "
            "currently only supports topk = 1 for speculative decoding.'; older builds crashed at the "
            "first tree step, sglang#14077).  Without it overlap scheduling is disabled for EAGLE.",
            "wheel: sglang-0.5.10 environ.py L442 (EnvBool(False)), server_args.py L2999-3019; "
            "sglang#14077, PR #20210",
            until="0.5.11",
        ),
        Feature(
            "spec_v2_default_topk_fallback",
            "SGLANG_ENABLE_SPEC_V2 defaults to on; topk > 1 silently falls back to spec v1 with overlap "
            "scheduling disabled (one WARNING line 'Spec v1 is used … because spec v2 currently only "
            "supports topk = 1').  From 0.5.14 the variable is gone and spec v2 is the only path.",
            "wheel: sglang-0.5.11 environ.py L459 (EnvBool(True)), server_args.py L3460-3479; "
            "0.5.13 environ.py L620; absent from 0.5.14 environ.py",
            since="0.5.11",
            until="0.5.14",
        ),
        Feature(
            "adaptive_spec",
            "`--speculative-adaptive [--speculative-adaptive-config FILE]`: runtime switching of the draft "
            "step count between pre-built runtime states (EAGLE/EAGLE3, topk 1; draft tokens = steps + 1).",
            "wheel: sglang-0.5.11 sglang/srt/speculative/adaptive_spec_params.py, adaptive_runtime_state.py "
            "(absent from 0.5.10's flag list)",
            since="0.5.11",
        ),
        Feature(
            "adaptive_requires_no_overlap",
            "Adaptive speculation runs only with `--disable-overlap-schedule` (EAGLEWorker v1); otherwise it "
            "is turned off at start-up with 'speculative_adaptive disabled: the overlap scheduler (spec v2) "
            "is enabled …'.",
            "wheel: sglang-0.5.11 adaptive_spec_params.py adaptive_unsupported_reason; the check is gone "
            "in 0.5.12 (eagle_worker_v2.py builds the controller)",
            since="0.5.11",
            until="0.5.12",
        ),
        Feature(
            "adaptive_initial_steps_added",
            "A launch `--speculative-num-steps` missing from the flat config's candidate_steps is added to "
            "them (one INFO line 'Adding initial speculative_num_steps=…'); 0.5.11 starts at the nearest "
            "candidate instead.",
            "wheel: sglang-0.5.12 adaptive_spec_params.py AdaptiveSpeculativeParams.__init__ (absent in 0.5.11)",
            since="0.5.12",
            until="0.5.13",
        ),
        Feature(
            "adaptive_keyed_config",
            "The adaptive config is keyed by batch size (`{\"1\": {...}, \"8\": {...}}`, non-digit keys shared "
            "by all slots); each decode batch is padded to a captured CUDA-graph size and routed to the "
            "largest slot key ≤ it; a flat file raises ValueError ('must contain at least one integer-string "
            "BS key'); the launch steps must be a candidate of some slot (ValueError); `ceiling_coeff`.  "
            "Before it the file is one flat dict and a keyed file is silently ignored (defaults used).",
            "wheel: sglang-0.5.13 adaptive_spec_params.py _load_adaptive_config, "
            "validate_adaptive_initial_steps, AdaptiveSpeculativeParams._route; 0.5.12 load_adaptive_config "
            "reads cfg.get(key) at the top level only",
            since="0.5.13",
        ),
        Feature(
            "adaptive_zero_steps",
            "A candidate may be 0 (no drafting: a plain decode through the verify graph, counted as a verify "
            "round with accept length 1); default slots become {\"1\": [1,3,7], \"8\": [0,1,3], \"32\": [0,1], "
            "\"64\": [0]}; the EMA is frozen at steps 0 and the next decision probes one step up; a decision "
            "that steps down no longer steps back up at once.",
            "wheel: sglang-0.5.14 adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG, AdaptiveStepSlot.update / "
            "_recompute_params, eagle_worker_v2.py _build_trivial_verify_input (0.5.13: positive ints only, "
            "defaults [1,3,7]/[1,3]/[1])",
            since="0.5.14",
        ),
        Feature(
            "adaptive_launch_resolution",
            "With adaptive on, SGLang resolves the launch before the EAGLE checks: topk unset → 1, steps "
            "unset → the middle of the candidates' union, draft tokens := steps + 1 silently.",
            "wheel: sglang-0.5.14 arg_groups/speculative_hook.py _init_adaptive_speculative_params "
            "(0.5.13 only validates the steps, after the usual resolution)",
            since="0.5.14",
        ),
        Feature(
            "adaptive_slot1_four_tiers",
            "The default adaptive slot \"1\" is [1, 3, 5, 7] (before: [1, 3, 7]).",
            "wheel: sglang-0.5.20 adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG (0.5.19: [1, 3, 7])",
            since="0.5.20",
        ),
        Feature(
            "set_internal_state_always_true",
            "`POST /set_internal_state` answers `[true]` even when it rejects a key (it logs 'Updating <key> "
            "is not supported.' and changes nothing); from 0.5.15 it answers `[false]` then.  No release "
            "can change speculative_num_steps / topk / draft tokens this way.",
            "wheel: sglang-0.5.14 managers/scheduler.py Scheduler.set_internal_state "
            "(`SetInternalStateReqOutput(updated=True, …)`); 0.5.15 `updated=if_success`; 0.5.23 "
            "scheduler_components/internal_state.py; real 0.5.14 recording answered [true]",
            until="0.5.15",
        ),
        Feature(
            "metrics_device_timer",
            "`SGLANG_ENABLE_METRICS_DEVICE_TIMER=1` with `--enable-metrics` exports "
            "`sglang:forward_execution_seconds_total{category}` (GPU seconds per forward kind: extend, "
            "decode, target_verify, eagle_draft, eagle_draft_extend, idle) and appends "
            "', fwd occupancy: N%' to the Decode/Prefill batch lines.",
            "wheel: sglang-0.5.11 environ.py (EnvBool(False)); 0.5.14 managers/scheduler_components/"
            "metrics_reporter.py, observability/metrics_collector.py, utils/device_timer.py",
            since="0.5.11",
        ),
        Feature(
            "server_info_endpoint",
            "`/server_info` exists; `/get_server_info` is a deprecated alias that logs a warning.",
            "0.5.23 entrypoints/http_server.py (already so in 0.5.10)",
            since="0.5.10",
        ),
    ]
}


def has_feature(name: str, version: str | SGLangVersion) -> bool:
    """True when feature ``name`` (a key of :data:`FEATURES`) holds for ``version``.

    Raises:
        KeyError: unknown feature name.
    """
    return FEATURES[name].holds(version)


# --- meta_info speculative keys (tokenizer_manager.py, 0.5.10 to 0.5.23) ----------------------
#: For each quantity, the key names in order of preference (newest first).
SPEC_META_KEYS: dict[str, tuple[str, ...]] = {
    "verify_ct": ("spec_verify_ct",),
    "correct_drafts": ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num"),
    "proposed_drafts": ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num"),
    "histogram": ("spec_correct_drafts_histogram", "spec_accept_histogram"),
    "accept_length": ("spec_accept_length",),
    "accept_rate": ("spec_accept_rate",),
}


def read_spec_meta(meta: dict, quantity: str):
    """Return ``meta[key]`` for the first key of ``SPEC_META_KEYS[quantity]`` present, else None."""
    for key in SPEC_META_KEYS[quantity]:
        if key in meta and meta[key] is not None:
            return meta[key]
    return None


# --- EAGLE3 draft weight names (llama_eagle3.py `load_weights`) --------------------------------
EAGLE3_TOP_LEVEL = ("fc.weight", "norm.weight", "lm_head.weight", "embed_tokens.weight")
#: Names the loader consumes without them being parameters.
EAGLE3_BUFFERS = ("d2t", "t2d")
_OPTIONAL_TOP = re.compile(
    r"^(fc\.bias|input_norm\.weight|fc_norm\.\d+\.weight|aux_norm_(low|mid|high)\.weight|"
    r"embed_tokens\.weight|lm_head\.bias)$"
)


def eagle3_param_for_key(name: str, version: str | SGLangVersion) -> str | None:
    """Map a draft-checkpoint tensor name to the SGLang parameter it loads into.

    Follows ``LlamaForCausalLMEagle3.load_weights`` (SGLang 0.5.23): ``midlayer.`` is the
    layer prefix every release maps; ``layers.0.`` is mapped only where
    :data:`FEATURES` ``draft_layers0_keys`` holds; ``aux_norm_low/mid/high`` become
    ``fc_norm.0/1/2``; ``d2t`` is consumed as the hot-token map and ``t2d`` is skipped
    on purpose.  Returns the canonical ``midlayer.*`` / top-level name, or ``None``
    when the loader would silently drop the tensor.
    """
    if name in EAGLE3_BUFFERS:
        return name
    if name.startswith("model."):
        name = name[len("model."):]
    m = re.match(r"^(midlayer|layers\.(\d+))\.(.+)$", name)
    if m:
        prefix, idx, rest = m.group(1), m.group(2), m.group(3)
        if prefix.startswith("layers"):
            if idx != "0" or not has_feature("draft_layers0_keys", version):
                return None
        return f"midlayer.{rest}" if rest in EAGLE3_LAYER_PARTS else None
    aux = re.match(r"^aux_norm_(low|mid|high)\.weight$", name)
    if aux:
        return f"fc_norm.{['low', 'mid', 'high'].index(aux.group(1))}.weight"
    if name in EAGLE3_TOP_LEVEL or _OPTIONAL_TOP.match(name):
        return name
    return None


def resolve_version(
    *,
    cli: str | None = None,
    profile: str | None = None,
    server: str | None = None,
    installed: bool = True,
) -> tuple[str, str]:
    """Choose the SGLang version a judgement uses, in this order.

    ``--sglang-version`` on the command line, then ``[server] sglang_version`` in the
    profile, then ``/server_info.version`` of an attached server, then the installed
    ``sglang`` package (read from its distribution metadata, without importing it),
    else :data:`DEFAULT_VERSION`.

    Returns:
        ``(version, source)`` with source one of ``cli|profile|server|installed|assumed``.
    """
    for value, source in ((cli, "cli"), (profile, "profile"), (server, "server")):
        if value:
            return str(parse_version(value)), source
    if installed:
        v = installed_sglang_version()
        if v:
            return v, "installed"
    return DEFAULT_VERSION, "assumed"


def installed_sglang_version() -> str | None:
    """The installed ``sglang`` distribution's version, or None (never imports sglang)."""
    from importlib import metadata

    try:
        return str(parse_version(metadata.version("sglang")))
    except (metadata.PackageNotFoundError, ValueError):
        return None


# --- launch flags per release (the doctor's FLAG rule, the simulator's argparse) -----------------
# The long options of every release come from the facts extracted from its wheel
# (:mod:`specdash.sglang.facts`, ``scripts/extract_sglang_facts.py``): every ``parser.add_argument("--…")``
# of ``server_args.py`` / ``arg_groups`` and every ``A[T, …]`` field ``arg_utils.add_cli_args_from_dataclass``
# registers.  The parser is a plain ``argparse.ArgumentParser(prog="sglang serve")``, so ``allow_abbrev`` is
# on: a unique prefix is accepted, a prefix of two flags exits 2 with ``ambiguous option``.


def flag_versions() -> tuple[SGLangVersion, ...]:
    """The releases whose flag tables are stored (ascending)."""
    from specdash.sglang.facts import stored_releases

    return stored_releases()


def flags_version_for(version: str | SGLangVersion) -> str | None:
    """The stored release :func:`known_flags` uses for ``version``: the nearest one ≤ it
    (``None`` when ``version`` is older than every stored release)."""
    from specdash.sglang.facts import basis_release

    best = basis_release(version)
    return str(best) if best is not None else None


def next_flags_version(version: str | SGLangVersion) -> str | None:
    """The nearest stored release strictly newer than ``version`` (None if none)."""
    from specdash.sglang.facts import next_release

    nxt = next_release(version)
    return str(nxt) if nxt is not None else None


def known_flags(version: str | SGLangVersion) -> set[str] | None:
    """The long options SGLang ``version`` accepts (nearest stored release ≤ it), or None
    when no stored release is that old.  Deprecated aliases are included (they still parse)."""
    from specdash.sglang.facts import facts_for

    f = facts_for(version)
    return set(f.flags) if f is not None else None


def deprecated_flags(version: str | SGLangVersion) -> dict[str, str | None]:
    """Deprecated aliases of ``version`` (nearest stored ≤ it) → their replacement (or None)."""
    from specdash.sglang.facts import facts_for

    f = facts_for(version)
    return f.deprecated_flags() if f is not None else {}


@cache
def flag_replacements() -> dict[str, str]:
    """Every deprecated flag of any stored release → its replacement (for suggestions after
    the alias was removed, e.g. ``--cuda-graph-max-bs`` → ``--cuda-graph-max-bs-decode``)."""
    out: dict[str, str] = {}
    for v in flag_versions():
        for name, repl in deprecated_flags(v).items():
            if repl:
                out[name] = repl
    return out
