"""Is the draft served the way it was trained?  The simulator's model of SGLang's silent faults.

SGLang starts fine and accepts (almost) nothing in several draft-wiring situations; a few
others crash at start-up.  This module reads the draft directory (real or ``sim:`` virtual,
through :func:`specdash.checkpoint.reader.read_draft`) and decides, for the emulated
release, what the server does with it.  The result is reported at ``/sim/truth``
(``wiring``) so tests can check specdash's diagnosis against the truth.

Sources: SGLang 0.5.23's source (aux capture, ``LlamaForCausalLMEagle3.load_weights`` renames and
silent skips, ``d2t`` semantics ``target = draft + d2t[draft]``), the golden recordings
(``eagle_wrongalgo``: EAGLE3 head + ``--speculative-algorithm EAGLE`` → accept len 1.00,
no warning), ``versions.py`` (which key forms a release maps), and public reports
(sglang PR #21272 wrong algorithm, sglang#27829 missing ``lm_head``, vllm PR #18909 /
Automodel PR #2447 vocabulary map, sglang#36528 no draft path, sglang#32226 ``input_norm``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from specdash.checkpoint.layout import EAGLE3_LAYER_PARTS
from specdash.checkpoint.reader import DraftInfo, ModelDir
from specdash.sglang.capture import bundles_mtp, capture_plan, capture_source, default_aux_ids
from specdash.sglang.versions import eagle3_param_for_key, has_feature


@dataclass
class Fatal:
    """A start-up crash: ``exception`` type name and ``message`` as the real server prints
    them; ``phase`` is when it happens (``load``: while loading the draft; ``warmup``: at the
    first forward / CUDA-graph capture)."""

    exception: str
    message: str
    phase: str = "load"


@dataclass
class Wiring:
    """How the draft is served.

    ``served_as_trained``: True when nothing silently changes what the head computes;
    ``reason``: one sentence on why (or why not); ``alpha_factor`` multiplies the scenario's
    α; ``alpha_override`` replaces it (a collapsed or random head); ``fatal``: the real
    server would crash (the simulator exits the same way); ``draft``: a summary of what
    was read; ``draft_max_position``: the draft's ``max_position_embeddings`` (long-context
    degradation, sglang#6783).
    """

    served_as_trained: bool = True
    reason: str = "no speculation"
    alpha_factor: float = 1.0
    alpha_override: float | None = None
    fatal: Fatal | None = None
    draft: dict = field(default_factory=dict)
    draft_max_position: int | None = None
    findings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """JSON for ``/sim/truth``."""
        d = asdict(self)
        d["fatal"] = asdict(self.fatal) if self.fatal else None
        return d


def analyse(
    algorithm: str | None,
    draft: DraftInfo | None,
    target: ModelDir,
    version: str,
    *,
    draft_path_given: bool,
    assumed_draft: bool = False,
    eagle2_factor: float = 0.85,
    misaligned_aux_factor: float = 0.3,
    random_draft_alpha: float = 0.01,
    ngram_alpha: float = 0.45,
) -> Wiring:
    """Decide how the emulated SGLang ``version`` serves ``draft`` for ``algorithm``.

    Args:
        algorithm: the effective ``speculative_algorithm`` (upper case) or None.
        draft: the draft as read (None when no draft path was given or it is not readable).
        target: the target model directory (config + headers).
        version: the emulated SGLang release.
        draft_path_given: ``--speculative-draft-model-path`` was on the command line.
        assumed_draft: the given draft path was not readable and the scenario's virtual
            draft stands in for it (reported, treated as healthy).
        eagle2_factor, misaligned_aux_factor, random_draft_alpha, ngram_alpha: from the scenario.
    """
    if not algorithm:
        return Wiring()
    if algorithm == "NGRAM":
        return Wiring(True, "NGRAM drafts from an n-gram table, no draft model", alpha_override=ngram_alpha)
    archs = target.architectures
    tarch = archs[0] if archs else "the target model"
    if draft is None:
        if bundles_mtp(archs, version):
            return Wiring(True, f"no draft path: {tarch} bundles MTP weights, so SGLang drafts with the target "
                                "checkpoint itself (speculative_hook.py)", alpha_factor=eagle2_factor)
        if "Llama" in tarch:
            msg = f"'{tarch}' object has no attribute 'hot_token_id'"
        else:
            msg = f"'{tarch}' object has no attribute 'set_embed'"
        return Wiring(False, f"{algorithm} without --speculative-draft-model-path on a target without bundled "
                             f"draft weights: SGLang falls back to the target checkpoint as the draft and crashes "
                             f"(sglang#36528)", fatal=Fatal("AttributeError", msg, "load"))

    w = Wiring(True, "", draft=_summary(draft, target.vocab_size), draft_max_position=draft.model.max_position_embeddings)
    if assumed_draft:
        w.findings.append("the draft path is not a readable directory here; the scenario's virtual draft "
                          f"{draft.path} stands in for it")
    hidden = target.hidden_size
    kind = draft.head_kind

    if algorithm == "EAGLE":
        if kind == "eagle3":
            w.served_as_trained = False
            w.alpha_override = 0.0
            w.reason = ("EAGLE3 head served with --speculative-algorithm EAGLE: the target captures no aux hidden "
                        "states, the draft's fc is skipped because the width already equals hidden_size, every "
                        "draft is rejected; no warning (sglang PR #21272; SGLang 0.5.14: accept len 1.00)")
            return w
        w.alpha_factor = eagle2_factor
        w.reason = "EAGLE head served with --speculative-algorithm EAGLE (as trained)"
        return w

    if algorithm in ("EAGLE3",):
        if kind == "eagle2":
            h = draft.hidden_in or hidden or 0
            w.fatal = Fatal("RuntimeError", f"mat1 and mat2 shapes cannot be multiplied (1x{3 * h} and {2 * h}x{h})",
                            "warmup")
            w.served_as_trained = False
            w.reason = ("EAGLE (EAGLE-2) head served with --speculative-algorithm EAGLE3: its fc expects 2 × hidden "
                        "but the target sends 3 aux states (shape error at the first forward)")
            return w
        if kind != "eagle3":
            w.fatal = Fatal("AttributeError",
                            f"'{(draft.model.architectures or ['LlamaForCausalLM'])[0]}' object has no attribute "
                            "'hot_token_id'", "load")
            w.served_as_trained = False
            w.reason = "the draft directory is not an EAGLE3 head (no EAGLE3 architecture, no 3 × hidden fc)"
            return w
        capable, cls, src = capture_source(archs, version)
        if capable is False:  # the class and its bases define no set_eagle3_layers_to_capture (generated facts)
            w.fatal = Fatal("ValueError", f"Model {cls} does not implement set_eagle3_layers_to_capture, which EAGLE3 "
                            "aux hidden-state capture requires.", "load")
            w.served_as_trained = False
            w.reason = f"the target class {cls} ({src}) cannot capture aux hidden states for an EAGLE3 head"
            return w
        return _eagle3_checks(w, draft, target, version, misaligned_aux_factor, random_draft_alpha)

    # STANDALONE / DFLASH / other algorithms: served as given.
    w.reason = f"{algorithm} draft served as given (not modelled in detail)"
    return w


def _summary(draft: DraftInfo, target_vocab: int | None) -> dict:
    return {
        "path": draft.path,
        "architectures": draft.model.architectures,
        "is_eagle3": draft.is_eagle3,
        "head_kind": draft.head_kind,
        "fc_in_features": draft.fc_in_features,
        "num_aux": draft.num_aux,
        "aux_layer_ids": draft.aux_layer_ids,
        "draft_vocab_size": draft.draft_vocab_size,
        "d2t_form": draft.d2t_form(target_vocab),
        "tensors": len(draft.model.tensors),
    }


def _eagle3_checks(w: Wiring, draft: DraftInfo, target: ModelDir, version: str,
                   misaligned_aux_factor: float, random_draft_alpha: float) -> Wiring:
    tensors = draft.model.tensors
    mapped = {eagle3_param_for_key(name, version): name for name in tensors}
    mapped.pop(None, None)
    hidden = target.hidden_size
    target_vocab = target.vocab_size

    # Hidden-size / fc shape problems crash (weight loader assertion, or a shape error at warmup).
    if draft.hidden_in and hidden and draft.hidden_in != hidden:
        w.fatal = Fatal("RuntimeError", f"mat1 and mat2 shapes cannot be multiplied "
                                        f"(1x{draft.num_aux * hidden} and {draft.num_aux * draft.hidden_in}x"
                                        f"{draft.model.hidden_size})", "warmup")
        w.served_as_trained = False
        w.reason = f"draft built for a target hidden size of {draft.hidden_in}, target has {hidden}"
        return w
    fc_in = draft.fc_in_features
    if fc_in and draft.hidden_in and fc_in != draft.hidden_in * draft.num_aux:
        w.fatal = Fatal("AssertionError",
                        f"Attempted to load weight (torch.Size([{tensors['fc.weight'].shape[0]}, {fc_in}])) into "
                        f"parameter (torch.Size([{draft.model.hidden_size}, {draft.hidden_in * draft.num_aux}]))",
                        "load")
        w.served_as_trained = False
        w.reason = (f"fc.weight has {fc_in} inputs but the config implies {draft.num_aux} aux states × "
                    f"{draft.hidden_in}")
        return w

    problems: list[str] = []
    random_head = False
    missing_parts = [p for p in EAGLE3_LAYER_PARTS if f"midlayer.{p}" not in mapped]
    if missing_parts:
        random_head = True
        layers0 = [n for n in tensors if n.startswith(("layers.0.", "model.layers.0."))]
        if layers0 and not has_feature("draft_layers0_keys", version):
            problems.append(f"{len(layers0)} `layers.0.*` tensors are silently dropped by SGLang {version}'s EAGLE3 "
                            "loader (it maps only `midlayer.*` before 0.5.12): the trained decoder layer stays random")
        else:
            problems.append(f"decoder-layer weights missing or unmapped ({', '.join(missing_parts[:3])}…): "
                            "those parameters stay random")
    if "fc.weight" not in mapped:
        random_head = True
        problems.append("no fc.weight: the aux-state projection stays random")
    tied = bool(draft.model.cfg("tie_word_embeddings", False))
    if draft.draft_vocab_size is not None and not tied and "lm_head.weight" not in mapped:
        random_head = True
        problems.append("draft_vocab_size is set but the checkpoint has no lm_head.weight: SGLang allocates the "
                        "draft's own head and leaves it random (sglang#27829)")
    dvs = draft.draft_vocab_size
    if dvs and target_vocab and dvs < target_vocab and "d2t" not in tensors:
        random_head = True
        problems.append(f"reduced draft vocabulary ({dvs} < {target_vocab}) without a d2t tensor: draft ids are "
                        "used as target ids (NVIDIA-NeMo/Automodel#2447)")
    # SGLang applies d2t whenever the checkpoint has one (llama_eagle3.py load_weights).
    form = draft.d2t_form(target_vocab)
    if form in ("absolute", "ambiguous"):
        random_head = True
        problems.append("d2t holds absolute target ids" + (" (strictly increasing, no t2d)" if form == "ambiguous" else "")
                        + ", but SGLang adds them to the draft id as offsets (target = draft + d2t[draft]): every "
                        "draft token maps to a wrong id")
    elif form == "invalid":
        random_head = True
        problems.append("d2t maps draft ids outside the target vocabulary or onto the same target id "
                        "(target = draft + d2t[draft]): the proposed tokens are wrong")
    if random_head:
        w.served_as_trained = False
        w.alpha_override = random_draft_alpha
        w.reason = "; ".join(problems)
        return w

    # Degraded, not collapsed.
    cfg = draft.model.config
    ec = draft.eagle_config or {}
    norm_before_fc = ec.get("norm_before_fc") or cfg.get("norm_before_fc")
    if not has_feature("draft_norm_before_fc", version) and norm_before_fc and "input_norm.weight" in tensors:
        problems.append(f"norm_before_fc with input_norm.weight is ignored by SGLang {version} (needs 0.5.17+, "
                        "sglang#32226)")
        w.alpha_factor *= 0.1
    if not has_feature("draft_fc_norm", version) and any(n.startswith(("aux_norm_", "fc_norm.")) for n in tensors):
        problems.append(f"per-aux fc_norm weights are dropped by SGLang {version} (needs 0.5.12+)")
        w.alpha_factor *= 0.1
    ids = draft.aux_layer_ids
    layers = target.num_hidden_layers
    if "eagle_config" not in ids and ids.get("top_level") and layers:
        # The target captures its defaults; harmful only where they are other layers than the ids name.
        archs = target.architectures
        dflt = default_aux_ids(int(layers))
        if capture_plan(archs, int(layers), list(ids["top_level"]), version)[0] != \
                capture_plan(archs, int(layers), None, version)[0]:
            problems.append(f"aux layer ids {ids['top_level']} are only at the top level of the draft config; the "
                            f"target reads eagle_config.eagle_aux_hidden_state_layer_ids and captures its defaults "
                            f"{dflt} instead (spec_aux_hidden_state.py)")
            w.alpha_factor *= misaligned_aux_factor
    if problems:
        w.served_as_trained = False
        w.reason = "; ".join(problems)
    else:
        w.reason = "EAGLE3 head served with --speculative-algorithm EAGLE3; all trained tensors load (as trained)"
    return w
