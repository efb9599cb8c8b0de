"""The fact extractor (``scripts/extract_sglang_facts.py``) and the committed facts it generated.

A tiny synthetic SGLang wheel is written here (a ``ServerArgs`` with ``A[…]`` fields and ``add_argument``
calls, a deprecated alias, the LoRA check, ``SpeculativeAlgorithm``, a model class that inherits
``set_eagle3_layers_to_capture`` from a base in another module and one without it, the draft-class rewrite,
the EAGLE3 loader); the extractor's output for it is compared with the facts written out by hand, and read back
through :mod:`specdash.sglang.facts` as the doctor reads the committed files.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import textwrap
import zipfile
from pathlib import Path

import pytest

from specdash.sglang.facts import EXTRACTOR_VERSION, FACTS_DIR, ReleaseFacts, stored_releases

ROOT = Path(__file__).resolve().parents[1]


def _extractor():
    spec = importlib.util.spec_from_file_location("extract_sglang_facts", ROOT / "scripts" / "extract_sglang_facts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FILES = {
    "sglang/srt/server_args.py": '''
        import dataclasses
        from sglang.srt.arg_groups.arg_utils import A, Arg
        ATTN = ["fa3", "triton"]

        @dataclasses.dataclass
        class ServerArgs:
            model_path: A[str, Arg(help="weights", aliases=["--model"])]
            tp_size: A[int, Arg(help="tp", cli_name="--tensor-parallel-size", aliases=["--tp-size"])] = 1
            attention_backend: A[Optional[str], Arg(help="b", choices=ATTN)] = None
            enable_lora: A[bool, "lora"] = False
            hidden: A[int, Arg(no_cli=True)] = 0
            speculative_algorithm: Optional[str] = None
            cuda_graph_max_bs_decode: Optional[int] = None

            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--speculative-algorithm", choices=["EAGLE", "EAGLE3", "NEXTN"],
                                    default=ServerArgs.speculative_algorithm)
                parser.add_argument("--cuda-graph-max-bs", dest="cuda_graph_max_bs_decode",
                                    action=DeprecatedAliasStoreAction, new_flag="--cuda-graph-max-bs-decode")
                parser.add_argument("--old-flag", action=DeprecatedAction, error_message="--old-flag is gone")

            def _handle(self):
                if self.speculative_algorithm == "NEXTN":
                    self.speculative_algorithm = "EAGLE"
                if model_arch in ["FooV3ForCausalLM"]:
                    if self.speculative_draft_model_path is None:
                        self.speculative_draft_model_path = self.model_path

            def check_lora_server_args(self):
                if self.enable_lora:
                    if self.speculative_algorithm not in ["NGRAM", None]:
                        raise ValueError("Currently LoRA is only compatible with NGRAM speculative decoding.")
        ''',
    "sglang/srt/speculative/spec_info.py": '''
        class SpeculativeAlgorithm(Enum):
            EAGLE = auto()
            EAGLE3 = auto()
            NONE = auto()
        ''',
    "sglang/srt/models/base.py": '''
        class BaseForCausalLM(nn.Module):
            def set_eagle3_layers_to_capture(self, layer_ids=None):
                pass
        ''',
    "sglang/srt/models/child.py": '''
        from sglang.srt.models.base import BaseForCausalLM

        class ChildForCausalLM(BaseForCausalLM):
            def get_embed_and_head(self):
                return None

        EntryClass = ChildForCausalLM
        ''',
    "sglang/srt/models/nocap.py": '''
        class NoCapForCausalLM(nn.Module):
            pass

        EntryClass = [NoCapForCausalLM]
        ''',
    "sglang/srt/models/llama_eagle3.py": '''
        class LlamaForCausalLMEagle3(LlamaForCausalLM):
            def __init__(self, config):
                self.norm_output = getattr(config, "norm_output", False)
                if hasattr(config, "target_hidden_size"):
                    self.h = config.target_hidden_size
                if self.config.tie_word_embeddings:
                    self.lm_head = self.model.embed_tokens
                else:
                    self.lm_head = ParallelLMHead(config.draft_vocab_size, config.hidden_size)

        EntryClass = [LlamaForCausalLMEagle3]
        ''',
    "sglang/srt/configs/model_config.py": '''
        class ModelConfig:
            @staticmethod
            def from_server_args(server_args, model_path=None, is_draft_model=False):
                return ModelConfig(model_path=model_path or server_args.model_path)

            def _config_draft_model(self):
                if is_draft_model and self.hf_config.architectures[0] in ["FooV3ForCausalLM", "FooV32ForCausalLM"]:
                    self.hf_config.architectures[0] = "FooV3ForCausalLMNextN"
        ''',
    "sglang/srt/model_executor/model_runner.py": '''
        class ModelRunner:
            def max_decode_logits_rows(self):
                return max(capture_bs) * self.decode_num_tokens_per_bs()
        ''',
}

EXPECTED = {
    "release": "9.9.9",
    "wheel": "sglang-9.9.9-py3-none-any.whl",
    "flags": {
        "--attention-backend": {"choices": ["fa3", "triton"], "default": None, "dest": "attention_backend",
                                "kind": "value", "src": "sglang/srt/server_args.py:10"},
        "--cuda-graph-max-bs": {"default": None, "deprecated": "--cuda-graph-max-bs-decode",
                                "dest": "cuda_graph_max_bs_decode", "kind": "value",
                                "src": "sglang/srt/server_args.py:20"},
        "--enable-lora": {"default": False, "dest": "enable_lora", "kind": "bool", "src": "sglang/srt/server_args.py:11"},
        "--model": {"alias_of": "--model-path", "default": None, "dest": "model_path", "kind": "value",
                    "src": "sglang/srt/server_args.py:8"},
        "--model-path": {"default": None, "dest": "model_path", "kind": "value", "src": "sglang/srt/server_args.py:8"},
        "--old-flag": {"dest": "old_flag", "kind": "bool", "removed": "--old-flag is gone",
                       "src": "sglang/srt/server_args.py:22"},
        "--speculative-algorithm": {"choices": ["EAGLE", "EAGLE3", "NEXTN"], "default": None,
                                    "dest": "speculative_algorithm", "kind": "value", "src": "sglang/srt/server_args.py:18"},
        "--tensor-parallel-size": {"default": 1, "dest": "tp_size", "kind": "value", "src": "sglang/srt/server_args.py:9"},
        "--tp-size": {"alias_of": "--tensor-parallel-size", "default": 1, "dest": "tp_size", "kind": "value",
                      "src": "sglang/srt/server_args.py:9"},
    },
    "algorithms": {"aliases": {"NEXTN": {"src": "sglang/srt/server_args.py:25", "to": "EAGLE"}},
                   "names": ["EAGLE", "EAGLE3"], "promotions": {}, "src": "sglang/srt/speculative/spec_info.py:2"},
    "models": {
        "ChildForCausalLM": {"eagle3_capture": "sglang/srt/models/base.py:3", "embed_and_head":
                             "sglang/srt/models/child.py:5", "module": "child", "src": "sglang/srt/models/child.py:4"},
        "LlamaForCausalLMEagle3": {"module": "llama_eagle3", "src": "sglang/srt/models/llama_eagle3.py:2"},
        "NoCapForCausalLM": {"module": "nocap", "src": "sglang/srt/models/nocap.py:2"},
    },
    "draft_archs": {"FooV32ForCausalLM": {"draft": "FooV3ForCausalLMNextN", "src": "sglang/srt/configs/model_config.py:8"},
                    "FooV3ForCausalLM": {"draft": "FooV3ForCausalLMNextN", "src": "sglang/srt/configs/model_config.py:8"}},
    "draft_default_src": "sglang/srt/configs/model_config.py:5",
    "draft_path_defaults": {"FooV3ForCausalLM": "sglang/srt/server_args.py:27"},
    "checks": {"lora_speculative": {"adaptive_refused": False, "allowed": ["NGRAM"],
                                    "message": "Currently LoRA is only compatible with NGRAM speculative decoding.",
                                    "src": "sglang/srt/server_args.py:34"}},
    "adaptive": {"shared_logits_buffer": {"sized_for_adaptive_candidates": False,
                                          "src": "sglang/srt/model_executor/model_runner.py:3"}},
    "eagle3_loader": {
        "optional": {"norm_output": {"default": False, "src": "sglang/srt/models/llama_eagle3.py:4"}},
        "reads": {}, "src": "sglang/srt/models/llama_eagle3.py",
        "tie_word_embeddings": {"code": "self.lm_head = self.model.embed_tokens",
                                "src": "sglang/srt/models/llama_eagle3.py:8", "test_src": "sglang/srt/models/llama_eagle3.py:7"},
        "untied_reads": {"draft_vocab_size": "sglang/srt/models/llama_eagle3.py:10",
                         "hidden_size": "sglang/srt/models/llama_eagle3.py:10"}},
}


@pytest.fixture
def wheel(tmp_path):
    path = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sglang-9.9.9.dist-info/METADATA", "Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.9\n")
        for name, src in FILES.items():
            zf.writestr(name, textwrap.dedent(src))
    return path


def test_the_extractor_reads_a_wheel(wheel):
    facts = _extractor().extract(wheel)
    assert facts.pop("extractor_version") == EXTRACTOR_VERSION and len(facts.pop("wheel_sha256")) == 64
    assert facts == EXPECTED


def test_its_output_is_what_the_doctor_reads(wheel, tmp_path):
    ex = _extractor()
    path = ex.write(ex.extract(wheel), tmp_path / "facts")
    assert path.name == "sglang-9.9.9.json.gz"
    assert path.read_bytes() == ex.write(ex.extract(wheel), tmp_path / "again").read_bytes()  # reproducible bytes
    f = ReleaseFacts("9.9.9", "9.9.9", json.loads(gzip.decompress(path.read_bytes())))
    assert f.capture(["ChildForCausalLM"]) == (True, "ChildForCausalLM", "sglang/srt/models/base.py:3")
    assert f.capture(["NoCapForCausalLM"])[0] is False and f.capture(["Unknown"])[0] is None
    assert f.draft_class(["FooV32ForCausalLM"]) == ("FooV32ForCausalLM", "FooV3ForCausalLMNextN",
                                                     "sglang/srt/configs/model_config.py:8")
    assert f.alias("nextn") == ("EAGLE", "sglang/srt/server_args.py:25") and f.algorithms == ("EAGLE", "EAGLE3", "NEXTN")
    assert f.deprecated_flags() == {"--cuda-graph-max-bs": "--cuda-graph-max-bs-decode"}
    assert f.removed_flags() == {"--old-flag": "--old-flag is gone"}
    assert f.eagle3_draft_archs() == {"LlamaForCausalLMEagle3": "sglang/srt/models/llama_eagle3.py:2"}


def test_the_committed_facts():
    rels = [str(r) for r in stored_releases()]
    assert rels[0] == "0.5.10" and {"0.5.14", "0.5.15", "0.5.22", "0.5.23"} <= set(rels) and len(rels) >= 10
    ex = _extractor()
    for r in rels:
        raw = (FACTS_DIR / f"sglang-{r}.json.gz").read_bytes()
        data = json.loads(gzip.decompress(raw))
        assert data["extractor_version"] == ex.EXTRACTOR_VERSION == EXTRACTOR_VERSION, r
        assert data["release"] == r and data["wheel"].startswith(f"sglang-{r}-") and len(data["wheel_sha256"]) == 64
        assert gzip.decompress(raw).decode() == ex.dumps(data)  # written by this extractor, unedited
    f14 = ReleaseFacts("0.5.14", "0.5.14", json.loads(gzip.decompress((FACTS_DIR / "sglang-0.5.14.json.gz").read_bytes())))
    assert f14.capture(["LlamaForCausalLM"])[2] == "sglang/srt/models/llama.py:812"
    assert f14.check("lora_speculative")["src"] == "sglang/srt/server_args.py:6850"
