"""Names in EAGLE draft checkpoints: draft architectures and the tensors of one EAGLE3 layer.

Plain data, no imports: the ground floor that the reader, the virtual models, the
doctor, SGLang's version table and the simulator all read.  The names follow SGLang's
``srt/models/llama_eagle3.py`` (``LlamaForCausalLMEagle3``) and ``llama_eagle.py``.
"""

#: Architecture names that declare an EAGLE3 head: SGLang's ``LlamaForCausalLMEagle3`` plus the
#: names other exporters write (speculators' ``Eagle3Speculator``, SpecForge's ``Eagle3DraftModel``,
#: MLA variants).  Which of them SGLang can load is an SGLang fact (``specdash.sglang.capture``).
EAGLE3_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3Speculator", "Eagle3DraftModel", "LlamaForCausalLMEagle3MLA")
#: Architecture names that declare an EAGLE-2 head (``fc`` over concat(embeds, hidden) = 2 × hidden):
#: the ``EntryClass`` of SGLang's ``srt/models/llama_eagle.py``, ``qwen2_eagle.py``,
#: ``mistral_eagle.py`` and ``mistral_large_3_eagle.py``, and speculators' ``EagleSpeculator``.
EAGLE2_ARCHS = ("LlamaForCausalLMEagle", "Qwen2ForCausalLMEagle", "MistralForCausalLMEagle",
                "MistralLarge3ForCausalLMEagle", "EagleSpeculator")

#: Parameter names of SGLang's ``LlamaForCausalLMEagle3`` after its own renames, as a
#: checkpoint should provide them (``midlayer`` form).  Used by the doctor's
#: WEIGHT_KEYS / MISSING_WEIGHT rules, the simulator and the virtual models.
EAGLE3_LAYER_PARTS = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "hidden_norm.weight",
)
