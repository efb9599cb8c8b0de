"""The doctor and the simulator give the same answers for the same checkpoint.

Both read SGLang's facts from one place (head kind and d2t form: ``specdash.checkpoint.reader``;
capture plan, default aux ids, bundled-MTP targets: ``specdash.sglang.capture``).  Each case
below is a tiny real checkpoint with the answer written out by hand; the doctor's findings
(their evidence and severities), the simulator's wiring decision (``specdash.sim.wiring.analyse``)
and the shared classifier must all give that answer.  Several cases sit exactly where the
copies these facts used to have disagreed (a t2d that confirms offsets, a table invalid in range,
absolute ids in a full-vocabulary draft, DeepSeek's unshifted aux ids, an EAGLE-2 architecture
without a 2 × hidden fc), so a new private copy that disagrees fails here.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from specdash.checkpoint.reader import read_draft, read_model_dir
from specdash.checkpoint.tiny import write_safetensors
from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.findings import DoctorReport
from specdash.eagle3.sample import write_profile
from specdash.eagle3.verify import verify_server
from specdash.sglang.capture import bundles_mtp, capture_plan, default_aux_ids
from specdash.sim.testing import make_draft, make_target
from specdash.sim.wiring import Wiring, analyse

VERSION = "0.5.23"
VOCAB, DRAFT_VOCAB, LAYERS = 32000, 8000, 8  # make_target / make_draft defaults
_n = itertools.count()


def _doctor(tmp: Path, target: Path, draft: Path | None, algo: str, version: str = VERSION) -> DoctorReport:
    prof = write_profile(tmp / f"p{next(_n)}.toml", model_path=str(target), draft_path=str(draft) if draft else None,
                         algorithm=algo, sglang_version=version)
    return run_doctor(prof)


def _sim(target: Path, draft: Path | None, algo: str, version: str = VERSION) -> Wiring:
    return analyse(algo, read_draft(draft) if draft else None, read_model_dir(target), version,
                   draft_path_given=draft is not None)


def _evidence(rep: DoctorReport, code: str, key: str) -> set:
    return {f.evidence[key] for f in rep.findings if f.code == code and key in f.evidence}


@pytest.fixture
def target(tmp_path):
    return make_target(tmp_path / "target", layers=LAYERS, vocab=VOCAB)


# --- head kind ------------------------------------------------------------------------------------

HEADS = [
    ("eagle3", {}, "eagle3"),
    ("eagle2 by fc width", {"fc_mult": 2, "arch": "LlamaForCausalLMEagle"}, "eagle2"),
    ("eagle2 by architecture (qwen2_eagle.py)", {"fc_mult": 1, "arch": "Qwen2ForCausalLMEagle"}, "eagle2"),
    ("eagle2 by architecture (mistral_large_3_eagle.py)", {"fc_mult": 1, "arch": "MistralLarge3ForCausalLMEagle"},
     "eagle2"),
    ("eagle3 by architecture (speculators)", {"fc_mult": 1, "arch": "Eagle3Speculator"}, "eagle3"),
    ("full language model", {"fc_mult": 1, "arch": "LlamaForCausalLM"}, "lm"),
    ("unknown", {"fc_mult": 1, "arch": "MysteryHead"}, "unknown"),
]


@pytest.mark.parametrize("label, kw, kind", HEADS, ids=[h[0] for h in HEADS])
def test_head_kind_agrees(tmp_path, target, label, kw, kind):
    draft = make_draft(tmp_path / "draft", **kw)
    assert read_draft(draft).head_kind == kind

    # the doctor names the kind it judged in every ALGO_MISMATCH finding, under either algorithm
    as_eagle3, as_eagle = _doctor(tmp_path, target, draft, "EAGLE3"), _doctor(tmp_path, target, draft, "EAGLE")
    assert _evidence(as_eagle3, "ALGO_MISMATCH", "head_kind") | _evidence(as_eagle, "ALGO_MISMATCH", "head_kind") \
        == {kind}

    # the simulator: under EAGLE3 an EAGLE-2 head fails at the first forward, a non-EAGLE head at load;
    # under EAGLE an EAGLE3 head is served with every draft rejected
    w3, w = _sim(target, draft, "EAGLE3"), _sim(target, draft, "EAGLE")
    assert w3.draft["head_kind"] == w.draft["head_kind"] == kind
    crash = {"eagle2": "RuntimeError", "lm": "AttributeError", "unknown": "AttributeError"}.get(kind)
    if crash:
        assert w3.fatal is not None and w3.fatal.exception == crash
    else:
        assert w3.fatal is None or "not an EAGLE3 head" not in w3.reason
    assert (w.alpha_override == 0.0 and "EAGLE3 head" in w.reason) == (kind == "eagle3")

    # post-launch verification asks for the algorithm the head needs
    needs = {"eagle3": "EAGLE3", "eagle2": "EAGLE"}.get(kind)
    info = read_draft(draft)
    for served in ("EAGLE", "EAGLE3"):
        rep = verify_server({"speculative_algorithm": served}, {"speculative_algorithm": served}, [], None,
                            draft_info=info)
        asked = {f.evidence.get("draft_needs") for f in rep.findings if f.code == "VERIFY_ALGO"} - {None}
        assert asked == ({needs} if needs and needs != served else set())


# --- d2t form -------------------------------------------------------------------------------------

_EVEN = 2 * np.arange(DRAFT_VOCAB, dtype=np.int64)  # a hot vocabulary with no two adjacent ids


def _mask(ids: np.ndarray, n: int = VOCAB) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    m[ids] = True
    return m


#: label, make_draft kwargs, hand-written (d2t, t2d) or None, expected form
D2T = [
    ("offsets", {}, None, "offsets"),
    ("absolute ids past the vocabulary", {"d2t": "absolute"}, None, "absolute"),
    ("absent", {"d2t": None}, None, "absent"),
    # d2t = 0, 1, 2 … is valid both ways (targets 0, 2, 4 … or 0, 1, 2 …): t2d decides
    ("absolute, t2d marks the ids", {"d2t": None},
     (np.arange(DRAFT_VOCAB, dtype=np.int64), _mask(np.arange(DRAFT_VOCAB))), "absolute"),
    ("offsets, t2d marks the targets", {"d2t": None},
     (_EVEN - np.arange(DRAFT_VOCAB), _mask(_EVEN)), "offsets"),
    ("strictly increasing, no t2d", {"d2t": None}, (_EVEN - np.arange(DRAFT_VOCAB), None), "ambiguous"),
    ("past the vocabulary, duplicates as ids", {"d2t": None},
     (np.full(DRAFT_VOCAB, VOCAB - 1000, dtype=np.int64), None), "invalid"),
    ("every draft id onto target 0", {"d2t": None}, (-np.arange(DRAFT_VOCAB, dtype=np.int64), None), "invalid"),
    ("absolute ids, full draft vocabulary", {"d2t": None, "draft_vocab": None},
     (np.arange(VOCAB, dtype=np.int64), np.ones(VOCAB, dtype=bool)), "absolute"),
]


@pytest.mark.parametrize("label, kw, arrays, form", D2T, ids=[c[0] for c in D2T])
def test_d2t_form_agrees(tmp_path, target, label, kw, arrays, form):
    draft = make_draft(tmp_path / "draft", **kw)
    if arrays is not None:
        d2t, t2d = arrays
        specs, values = {"d2t": ("I64", d2t.shape)}, {"d2t": d2t}
        if t2d is not None:
            specs["t2d"], values["t2d"] = ("BOOL", t2d.shape), t2d
        write_safetensors(draft / "extra.safetensors", specs, values)
    assert read_draft(draft).d2t_form(VOCAB) == form

    rep = _doctor(tmp_path, target, draft, "EAGLE3")
    assert _evidence(rep, "VOCAB_MAP", "d2t_form") == {form}
    severities = {f.severity for f in rep.findings if f.code == "VOCAB_MAP" and "d2t_form" in f.evidence}
    assert severities == {"offsets": {"info"}, "ambiguous": {"warning", "info"}}.get(form, {"error"})

    w = _sim(target, draft, "EAGLE3")
    assert w.draft["d2t_form"] == form
    assert w.fatal is None
    assert w.served_as_trained == (form == "offsets")
    if form != "offsets":
        assert w.alpha_override is not None and w.alpha_override < 0.1 and "d2t" in w.reason


# --- aux layer ids --------------------------------------------------------------------------------

#: target architecture, release, ids at the top level of the draft config, what SGLang would capture
#: with them, whether that differs from the defaults it captures instead ([2, 4, 5] for 8 layers)
AUX = [
    ("LlamaForCausalLM", "0.5.23", [1, 3, 4], [2, 4, 5], False),
    ("LlamaForCausalLM", "0.5.23", [2, 4, 6], [3, 5, 7], True),
    ("DeepseekV3ForCausalLM", "0.5.23", [2, 4, 5], [2, 4, 5], False),  # deepseek_v2.py: ids not starting at 1 kept
    ("DeepseekV3ForCausalLM", "0.5.23", [1, 3, 4], [2, 4, 5], False),
    ("DeepseekV3ForCausalLM", "0.5.12", [2, 4, 5], [3, 5, 6], True),  # before 0.5.13 every id shifts
    ("GptOssForCausalLM", "0.5.23", [2, 4, 8], [2, 4, 8], True),  # gpt_oss.py boundary convention
]


@pytest.mark.parametrize("arch, version, ids, intended, differs", AUX,
                         ids=[f"{a[0]}-{a[1]}-{a[2]}" for a in AUX])
def test_aux_ids_agree(tmp_path, arch, version, ids, intended, differs):
    target = make_target(tmp_path / "target", layers=LAYERS, arch=arch)
    draft = make_draft(tmp_path / "draft", extra_cfg={"eagle_aux_hidden_state_layer_ids": ids})
    assert default_aux_ids(LAYERS) == [1, 3, 4]
    assert capture_plan([arch], LAYERS, None, version)[0] == [2, 4, 5]
    assert capture_plan([arch], LAYERS, ids, version)[0] == intended

    rep = _doctor(tmp_path, target, draft, "EAGLE3", version)
    top = [f for f in rep.findings if f.code == "AUX_LAYERS" and "top_level" in f.evidence]
    assert len(top) == 1
    assert top[0].evidence["default_capture"] == [2, 4, 5] and top[0].evidence["intended_capture"] == intended
    assert top[0].severity == ("error" if differs else "warning")

    w = _sim(target, draft, "EAGLE3", version)
    assert w.fatal is None
    assert w.served_as_trained == (not differs)
    assert (w.alpha_factor < 1.0) == differs
    if differs:
        assert "top level" in w.reason and "[1, 3, 4]" in w.reason


# --- bundled MTP ----------------------------------------------------------------------------------

BUNDLED = [
    ("DeepseekV3ForCausalLM", True), ("DeepseekV32ForCausalLM", True), ("Glm4MoeForCausalLM", True),
    ("Glm4MoeLiteForCausalLM", True), ("GlmMoeDsaForCausalLM", True), ("BailingMoeV2ForCausalLM", True),
    ("MistralLarge3ForCausalLM", True), ("PixtralForConditionalGeneration", True),
    ("LlamaForCausalLM", False), ("Qwen2ForCausalLM", False), ("DeepseekV2ForCausalLM", False),
    ("GptOssForCausalLM", False),
]


@pytest.mark.parametrize("arch, bundled", BUNDLED, ids=[b[0] for b in BUNDLED])
def test_bundled_mtp_agrees(tmp_path, arch, bundled):
    target = make_target(tmp_path / "target", layers=LAYERS, arch=arch, mtp_layers=1 if bundled else 0)
    assert bundles_mtp([arch]) == bundled

    rep = _doctor(tmp_path, target, None, "EAGLE")
    sev = {f.severity for f in rep.findings if f.code == "DRAFT_PATH"}
    assert sev == ({"info"} if bundled else {"error"})

    w = _sim(target, None, "EAGLE")
    assert (w.fatal is None) == bundled
    if not bundled:
        assert w.fatal.exception == "AttributeError"


def test_a_bundled_target_without_its_draft_layers_is_an_error(tmp_path):
    """SGLang drafts from a DeepSeek-V3 checkpoint itself; one exported without its NextN layer (no
    num_nextn_predict_layers, no layer-L tensors) leaves the draft unloaded: an error naming the class."""
    bare = make_target(tmp_path / "bare", layers=LAYERS, arch="DeepseekV3ForCausalLM")
    [f] = [f for f in _doctor(tmp_path, bare, None, "EAGLE").findings if f.code == "DRAFT_PATH"]
    assert f.severity == "error" and f.evidence["draft_architecture"] == "DeepseekV3ForCausalLMNextN"
    assert "model_config.py" in f.evidence["source"]
    full = make_target(tmp_path / "full", layers=LAYERS, arch="DeepseekV3ForCausalLM", mtp_layers=1)
    [g] = [f for f in _doctor(tmp_path, full, None, "EAGLE").findings if f.code == "DRAFT_PATH"]
    assert g.severity == "info" and g.evidence["mtp_layers_declared"] == 1 and g.evidence["mtp_tensors"] == 12  # a full decoder layer + eh_proj, enorm, hnorm
