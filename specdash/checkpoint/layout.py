"""Names in EAGLE draft checkpoints: draft architectures and the tensors of one EAGLE3 layer.

Plain data, no imports: the ground floor that the reader, the virtual models, the
doctor, SGLang's version table and the simulator all read.  The names follow SGLang's
``srt/models/llama_eagle3.py`` (``LlamaForCausalLMEagle3``) and ``llama_eagle.py``.
"""

EAGLE3_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3Speculator", "Eagle3DraftModel", "LlamaForCausalLMEagle3MLA")
EAGLE_ARCHS = ("LlamaForCausalLMEagle", "EagleSpeculator")

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
