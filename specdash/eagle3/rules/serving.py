"""How the server is configured around the head: SPEC_ARGS, CONTEXT_LEN, DTYPE, MEMORY, EXPOSED."""

from __future__ import annotations

import json
import os

import numpy as np

from specdash.checkpoint.reader import ModelDir
from specdash.eagle3.rules.context import RuleContext
from specdash.sglang.speculative import EAGLE_FAMILY
from specdash.sglang.versions import has_feature

_CTX_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def loopback_host(host: str) -> bool:
    """Whether ``host`` (a name, IPv4 or [IPv6] address) is this machine's loopback: ``localhost`` or an
    address in 127.0.0.0/8 or ::1."""
    import ipaddress

    h = host.strip("[]")
    if h.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def rule_exposed(ctx: RuleContext) -> None:
    """EXPOSED: the server listens beyond loopback (``--host 0.0.0.0``, a LAN address, a host name)
    without ``--api-key``: anyone who reaches the port can generate, flush the cache and change internal
    state (SGLang ``srt/entrypoints/http_server.py`` checks the key only when one is set)."""
    host = ctx.flags.get("--host")
    if not isinstance(host, str) or loopback_host(host):
        return
    if ctx.flags.get("--api-key") not in (None, True, ""):
        return
    port = ctx.flags.get("--port")
    ctx.add("EXPOSED", "warning",
            f"the server listens on {host}{f':{port}' if port not in (None, True) else ''} without an API key",
            "Every address of this host can reach it: generation, /flush_cache and /set_internal_state are open "
            "to anyone on the network (SGLang checks a key only when --api-key is set).",
            'bind loopback ([server] host = "127.0.0.1") or set an API key: extra_args = ["--api-key", '
            '"${SGLANG_API_KEY}"] with SGLANG_API_KEY exported', host=host)


def _cuda_graph_max_bs(flags: dict) -> tuple[int | None, str | None]:
    for name in ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"):
        v = flags.get(name)
        if v not in (None, True):
            try:
                return int(v), name
            except (TypeError, ValueError):
                pass
    cfg = flags.get("--cuda-graph-config")
    if isinstance(cfg, str):
        try:
            val = json.loads(cfg).get("decode", {}).get("max_bs")
            if val is not None:
                return int(val), "--cuda-graph-config"
        except (ValueError, AttributeError, TypeError):
            pass
    return None, None


def rule_spec_args(ctx: RuleContext) -> None:
    """SPEC_ARGS: SGLang's rejections and silent adjustments of the speculative flags
    (:attr:`RuleContext.res`, from :func:`specdash.sglang.speculative.resolve_flags`, which follows
    ``srt/arg_groups/speculative_hook.py``), plus tree drafting under concurrency, a decode
    CUDA-graph cap below the planned concurrency, and the tree accept-rate ceiling.
    """
    res = ctx.res
    for r in res.rejections:
        ctx.add("SPEC_ARGS", "error", r.message,
                f"SGLang {ctx.version} refuses this at start-up ({r.exception}) — arg_groups/speculative_hook.py "
                "(server_args.py before 0.5.13).", r.fix or "", exception=r.exception)
    auto = [a for a in res.adjustments if a.reason.startswith("auto-chosen")]
    if auto:
        vals = {a.field: a.effective for a in auto}
        ctx.add("SPEC_ARGS", "info",
                f"steps/topk/draft tokens not given: SGLang picks ({vals.get('speculative_num_steps')}, "
                f"{vals.get('speculative_eagle_topk')}, {vals.get('speculative_num_draft_tokens')}) for "
                f"{', '.join(ctx.target_archs) or 'this target'}",
                "_auto_choose_speculative_params: LlamaForCausalLM → (5, 4, 8), most others → (3, 1, 4) "
                "(speculative_hook.py _handle_eagle_family).", "pin all three in [speculative] to compare runs reproducibly",
                effective=vals)
    for a in res.adjustments:
        if a in auto:
            continue
        if a.field == "max_running_requests":
            ctx.add("SPEC_ARGS", "info", f"max_running_requests not set: SGLang uses {a.effective} with speculation",
                    "speculative_hook.py _handle_eagle_family; log line: " + (a.log_line or ""), "pass --max-running-requests to change it",
                    field=a.field, asked=a.asked, effective=a.effective, log_line=a.log_line)
            continue
        if a.field == "speculative_algorithm":  # an alias or a draft promotion SGLang documents: expected
            ctx.add("SPEC_ARGS", "info", f"--speculative-algorithm {a.asked}: SGLang runs {a.effective} ({a.reason})",
                    "/server_info and the logs name the algorithm SGLang runs, not the one typed.", "",
                    field=a.field, asked=a.asked, effective=a.effective)
            continue
        ctx.add("SPEC_ARGS", "warning",
                f"{a.field}: asked {a.asked}, SGLang runs {a.effective} ({a.reason})",
                "A silent start-up adjustment (speculative_hook.py" + (f"; SGLang logs: '{a.log_line}'" if a.log_line else "")
                + "); a reported Kimi-K2.5 launch's steps 1 / draft tokens 16 ran as 2 draft tokens (so did SGLang 0.5.14 on an H200).",
                f"ask for what will run: {a.field.replace('speculative_', '').replace('_', ' ')} = {a.effective}"
                + (" (or raise steps: draft tokens = steps + 1 with topk 1)" if "draft_tokens" in a.field else ""),
                field=a.field, asked=a.asked, effective=a.effective, log_line=a.log_line, case="sglang#13212")
    if not res.enabled:
        return
    steps, topk, draft = res.num_steps, res.eagle_topk, res.num_draft_tokens
    env_v2 = ctx.env.get("SGLANG_ENABLE_SPEC_V2") or os.environ.get("SGLANG_ENABLE_SPEC_V2")
    if env_v2 is not None and not has_feature("spec_v2_env", ctx.version) and \
            not has_feature("spec_v2_default_topk_fallback", ctx.version):
        ctx.add("SPEC_ARGS", "info", f"SGLANG_ENABLE_SPEC_V2={env_v2} has no effect on SGLang {ctx.version}",
                "From 0.5.14 spec v2 (overlap) is the only implementation and the variable is gone (SGLang "
                "environ.py of the wheels).", "remove it from [env]")
    if has_feature("spec_v2_default_topk_fallback", ctx.version) and topk and topk > 1 and ctx.algo in EAGLE_FAMILY:
        ctx.add("SPEC_ARGS", "info",
                f"topk {topk} on SGLang {ctx.version}: spec v2 supports only topk 1, so SGLang falls back to spec v1 "
                "with the overlap scheduler disabled",
                "server_args.py (0.5.11–0.5.13): 'Spec v1 is used for eagle/eagle3/standalone speculative decoding "
                "because spec v2 currently only supports topk = 1' (sglang#14077).",
                "compare against topk 1 (chain) runs, which keep overlap scheduling")
    if ctx.flags.get("--speculative-token-map") and ctx.algo == "EAGLE3":
        ctx.add("SPEC_ARGS", "warning", "--speculative-token-map is ignored for EAGLE3",
                "EAGLE3 heads carry their vocabulary map as d2t in the checkpoint; SGLang warns and ignores the "
                "flag (speculative_hook.py).", "put d2t into the draft checkpoint (specdash draft fix --hot-token-ids)")
    planned = ctx.concurrency or res.max_running_requests
    if topk and topk > 1 and draft and draft > 8:
        ctx.add("SPEC_ARGS", "warning",
                f"topk {topk} / {draft} draft tokens is a batch-1 tree: every request verifies {draft} tokens per step"
                + (f" at up to {planned} concurrent requests" if planned else ""),
                "Tree verification cost grows with batch size; the EAGLE authors advise against trees for batch > 1 "
                "(SafeAILab/EAGLE#298, #269: per-step latency rose > 3× with concurrency).",
                "for concurrency > 1 start from topk 1, steps 3, draft tokens 4 and sweep per concurrency level "
                "(specdash tune)", topk=topk, num_draft_tokens=draft, planned_concurrency=planned, case="SafeAILab/EAGLE#298")
    cg, cg_flag = _cuda_graph_max_bs(ctx.flags)
    if cg is not None and planned and cg < planned:
        # A known plan (or an explicit cap) is a real conflict; the default cap of 48 is only a ceiling, so
        # then only a batch-1-sized capture (≤ 4; the reported batch-1 setups captured 2) is worth a warning.
        known = ctx.concurrency is not None or res.asked.get("max_running_requests") is not None
        ctx.add("SPEC_ARGS", "warning" if known or cg <= 4 else "info",
                f"{cg_flag} {cg} but up to {planned} requests run at once: decode batches larger than {cg} run without "
                "CUDA graphs", "Batches above the largest captured size fall back to eager execution (SGLang docs; "
                "SafeAILab/EAGLE#298).", f"raise the decode CUDA-graph max batch size to ≥ {planned} "
                f"({'--cuda-graph-max-bs-decode' if has_feature('cuda_graph_max_bs_decode_flag', ctx.version) else '--cuda-graph-max-bs'} "
                f"{planned}) or cap --max-running-requests at {cg}", cuda_graph_max_bs=cg,
                planned_concurrency=planned, case="SafeAILab/EAGLE#298")
    if topk and topk > 1 and steps and draft and draft != steps + 1:
        ceiling = steps / (draft - 1) if draft > 1 else None
        ctx.add("SPEC_ARGS", "info",
                f"tree drafting (steps {steps}, topk {topk}, draft tokens {draft}): SGLang's accept rate divides by "
                f"verify rounds × {draft - 1} tree nodes, but at most {steps} can be accepted per round"
                + (f" (ceiling {ceiling:.2f})" if ceiling is not None else ""),
                "accept rate = correct drafts / (rounds × (draft tokens − 1)), bonus excluded; accept length = "
                "tokens per verify round, bonus included (tokenizer_manager.py). Some releases computed the tree rate wrongly "
                "(sglang PR #13212). specdash reports accept length from completion_tokens / "
                "spec_verify_ct and states each definition.", "compare tree configs by accept length and tok/s, not "
                "by accept rate", ceiling=ceiling, case="sglang#13212")


# --- CONTEXT_LEN ----------------------------------------------------------------------------------


def _parse_ctx(v) -> int | None:
    """A context length as SGLang accepts it (``32k``, ``1m``, ``4096``) in tokens, or None."""
    if v is None or v is True:
        return None
    s = str(v).strip().lower()
    try:
        if s.endswith("k"):
            return int(float(s[:-1]) * 1024)
        if s.endswith("m"):
            return int(float(s[:-1]) * 1024 * 1024)
        return int(float(s))
    except ValueError:
        return None


def _derived_len(md: ModelDir) -> int | None:
    """The model's own maximum length in tokens (the first positive length key of its config)."""
    for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions", "max_seq_len"):
        v = md.cfg(key)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _truthy(v: str | None) -> bool:
    return str(v or "").strip().lower() in ("1", "true", "yes", "on")


def rule_context(ctx: RuleContext) -> None:
    """CONTEXT_LEN: ``--context-length`` vs the target's derived length, and the draft's
    ``max_position_embeddings`` vs the serving context.

    The draft is built with the target's context length (``speculative/eagle_worker_v2.py``);
    ``configs/model_config.py`` ``ModelConfig._derive_context_length`` raises ``ValueError`` when it
    exceeds the derived length unless ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN`` is set (in the
    profile's ``[env]`` or the calling environment).
    """
    d = ctx.draft
    asked = _parse_ctx(ctx.flags.get("--context-length"))
    t_len = _derived_len(ctx.target) if ctx.target is not None else None
    serving = asked or t_len
    env_val = ctx.env.get(_CTX_ENV)
    env_src = "[env]" if env_val is not None else None
    if env_val is None and os.environ.get(_CTX_ENV) is not None:
        env_val, env_src = os.environ.get(_CTX_ENV), "the calling environment"
    allowed = _truthy(env_val)
    msg_tpl = ("Warning: Target model's context_length ({x}) is greater than the derived context_length ({y}). "
               "… set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    if asked and t_len and asked > t_len and not allowed:
        ctx.add("CONTEXT_LEN", "error",
                f"--context-length {asked} exceeds the target's derived length {t_len} "
                f"and {_CTX_ENV} is not set",
                "ModelConfig._derive_context_length raises ValueError at start-up: '"
                + msg_tpl.format(x=asked, y=t_len) + "' (SGLang 0.5.23 model_config.py).",
                f"lower --context-length to ≤ {t_len}, or set {_CTX_ENV}=1 in [env]", asked=asked, target=t_len)
    if d is None or not ctx.eagle_algo or not serving:
        return
    d_len = _derived_len(d.model)
    if not d_len or d_len >= serving:
        return
    ev = {"draft_max_position_embeddings": d_len, "serving_context": serving, "env": env_val, "env_from": env_src}
    if allowed:
        ctx.add("CONTEXT_LEN", "warning",
                f"the draft was built for {d_len} positions (max_position_embeddings) but serves contexts up to "
                f"{serving}; {_CTX_ENV}={env_val} ({env_src}) lets it start",
                "The head was trained up to its max_position_embeddings; past it acceptance falls and the draft/verify "
                "overhead can make long prompts slower than no speculation (sglang#6783; "
                "SafeAILab/EAGLE#311).", "bucket benchmark results by input length; serve long-context traffic "
                "without speculation or use a draft trained on longer sequences", case="sglang#6783", **ev)
    else:
        ctx.add("CONTEXT_LEN", "error",
                f"the draft's max_position_embeddings {d_len} < serving context {serving} and {_CTX_ENV} is not set",
                "The draft is built with the target's context length; ModelConfig._derive_context_length raises "
                "ValueError('" + msg_tpl.format(x=serving, y=d_len) + "') at start-up (eagle_worker_v2.py, SGLang "
                "0.5.23).", f"add {_CTX_ENV} = \"1\" to [env] (expect lower acceptance beyond {d_len} tokens), or "
                f"set [server] context_length = {d_len}", case="sglang#6783", **ev)


# --- DTYPE ----------------------------------------------------------------------------------------


def _norm_dtype(v) -> str | None:
    if not v:
        return None
    s = str(v).replace("torch.", "").lower()
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}.get(s, s)


def rule_dtype(ctx: RuleContext) -> None:
    """DTYPE (only under ``--dtype auto``): a float32 or missing config dtype runs as float16
    (``configs/model_config.py`` ``_get_and_verify_dtype``; bfloat16 for Gemma), draft vs target
    dtype, and stored tensor dtypes vs the declared one.
    """
    d, t = ctx.draft, ctx.target
    if d is None or not ctx.eagle_algo:
        return
    server_dtype = _norm_dtype(ctx.flags.get("--dtype"))
    if server_dtype and server_dtype != "auto":
        return
    dd = _norm_dtype(d.model.torch_dtype)
    td = _norm_dtype(t.torch_dtype) if t is not None else None
    archs = d.model.architectures
    runs = dd if dd and dd != "float32" else ("bfloat16" if any("Gemma" in a for a in archs) else "float16")
    ev = {"draft_dtype": dd, "target_dtype": td, "draft_runs_as": runs}
    if dd in (None, "float32"):
        ctx.add("DTYPE", "warning",
                f"the draft's config.json says torch_dtype {dd or '(none)'}: under --dtype auto SGLang runs it in "
                f"{runs}" + (f" while the target runs in {td}" if td else ""),
                "_get_and_verify_dtype downcasts a float32 (or missing) config dtype to float16 "
                "(configs/model_config.py); bfloat16 hidden states above 65504 overflow in float16.",
                f"set \"torch_dtype\": \"{td or 'bfloat16'}\" in the draft's config.json (or pass --dtype {td or 'bfloat16'})",
                **ev)
    elif td and dd != td and td in ("bfloat16", "float16"):
        ctx.add("DTYPE", "warning", f"draft dtype {dd} ≠ target dtype {td}",
                "The target's hidden states are cast to the draft's dtype; float16 cannot hold bfloat16's range.",
                f"set \"torch_dtype\": \"{td}\" in the draft's config.json", **ev)
    counts: dict[str, int] = {}
    for ti in d.model.tensors.values():
        if ti.dtype in ("BF16", "F16", "F32"):
            counts[ti.dtype] = counts.get(ti.dtype, 0) + 1
    if counts:
        main = max(counts, key=counts.get)
        main_name = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[main]
        if dd and main_name != dd:
            ctx.add("DTYPE", "info", f"draft tensors are stored as {main_name} but config.json says {dd}",
                    "SGLang casts at load time; the file is larger (float32) or less precise than declared.", "",
                    stored=counts, **ev)


# --- MEMORY ---------------------------------------------------------------------------------------


def _gib(b: float) -> str:
    """Bytes as GiB (MiB/KiB below 1 GiB)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{int(b)} B"


def _kv_bytes_per_token(md: ModelDir, kv_dtype_bytes: int) -> int | None:
    L = md.num_hidden_layers
    if not L:
        return None
    if md.cfg("kv_lora_rank"):
        return int(L) * (int(md.cfg("kv_lora_rank")) + int(md.cfg("qk_rope_head_dim") or 64)) * kv_dtype_bytes
    heads = md.cfg("num_attention_heads")
    h = md.hidden_size
    if not heads or not h:
        return None
    kv = md.cfg("num_key_value_heads") or heads
    hd = md.cfg("head_dim") or h // heads
    return 2 * int(L) * int(kv) * int(hd) * kv_dtype_bytes


def rule_memory(ctx: RuleContext) -> None:
    """MEMORY: target + draft weight bytes (safetensors headers) per GPU at ``tp_size`` against
    ``mem_fraction_static`` × the smallest visible GPU's memory (MiB from :attr:`RuleContext.gpus`),
    and the KV tokens left for one context.  An EAGLE3 draft's ``embed_tokens`` is not counted
    when it is replaced by the target's (``eagle_worker_v2.py`` ``init_lm_head``).
    """
    t = ctx.target
    if t is None:
        return
    tw = t.weight_bytes() or 0
    dw = 0
    if ctx.draft is not None and ctx.eagle_algo:
        dm = ctx.draft.model
        dw = dm.weight_bytes() or 0
        emb = dm.tensors.get("embed_tokens.weight")
        shares = not (ctx.draft.target_hidden_size and ctx.draft.target_hidden_size != dm.hidden_size)
        if emb is not None and shares and ctx.algo == "EAGLE3":
            dw -= int(np.prod(emb.shape)) * (4 if emb.dtype == "F32" else 2)  # replaced by the target's embedding
    if not tw:
        return
    tp = int(ctx.profile.server.tp_size or 1)
    per_gpu = (tw + max(dw, 0)) / tp
    frac = ctx.profile.server.mem_fraction_static
    ev = {"target_weight_bytes": tw, "draft_weight_bytes": max(dw, 0), "tp_size": tp, "per_gpu_bytes": per_gpu,
          "mem_fraction_static": frac}
    sizes = f"target {_gib(tw)} + draft {_gib(max(dw, 0))} of weights = {_gib(per_gpu)} per GPU at tp {tp}"
    c20 = ("Weights, the KV pool and CUDA-graph buffers must fit in mem_fraction_static × GPU memory; with a draft, "
           "older releases applied the fraction twice and mis-estimated draft memory (sglang#6875; "
           "PR #28855 counts draft weights against --mem-fraction-static).")
    if not ctx.gpus:
        ctx.add("MEMORY", "info", f"{sizes} (from safetensors headers); GPU memory unknown",
                c20, "run on the GPU host, or pass GPU memory (specdash doctor --gpu-memory-mib N), to have it checked",
                **ev)
        return
    gpus = ctx.gpus
    if len(gpus) < tp:
        ctx.add("MEMORY", "error", f"tp_size {tp} but only {len(gpus)} GPU(s) are visible",
                "SGLang starts one worker per tensor-parallel rank, each on its own GPU.",
                f"set [server] tp_size ≤ {len(gpus)} or make {tp} GPUs visible", gpus=len(gpus), tp_size=tp)
        return
    mem = min(float(g.get("memory_total_mib") or 0) for g in gpus[:tp]) * 2**20
    if not mem:
        return
    f_eff = frac if frac is not None else 0.85
    budget = f_eff * mem
    ev.update(gpu_memory_bytes=mem, budget_bytes=budget, gpu=gpus[0].get("name"))
    frac_txt = f"mem_fraction_static {frac}" if frac is not None else "mem_fraction_static auto (≈0.85 assumed)"
    if per_gpu > mem:
        ctx.add("MEMORY", "error", f"{sizes}, more than the {_gib(mem)} of a {gpus[0].get('name', 'GPU')}",
                c20, "raise tp_size, quantise the target, or use a smaller draft", **ev)
        return
    if per_gpu > budget:
        need = per_gpu / mem
        ctx.add("MEMORY", "error", f"{sizes} exceed {frac_txt} × {_gib(mem)} = {_gib(budget)}",
                c20 + " SGLang stops with 'Not enough memory. Please try to increase --mem-fraction-static.' or CUDA "
                "out of memory.", f"--mem-fraction-static ≥ {min(0.95, need + 0.1):.2f} (weights alone need {need:.2f}"
                "), or raise tp_size / shrink the draft", **ev)
        return
    kv_bytes = 1 if "fp8" in str(ctx.flags.get("--kv-cache-dtype") or "") else 2
    kvt = _kv_bytes_per_token(t, kv_bytes)
    free = budget - per_gpu
    if kvt:
        tokens = int(free / (kvt / tp))
        ev["kv_tokens_estimate"] = tokens
        ctx_len = _parse_ctx(ctx.flags.get("--context-length")) or _derived_len(t) or 0
        if ctx_len and tokens < ctx_len:
            ctx.add("MEMORY", "warning",
                    f"{sizes} leave {_gib(free)} of {frac_txt} × {_gib(mem)} for the KV pool: ≈{tokens} tokens, less "
                    f"than one {ctx_len}-token context", c20,
                    "raise --mem-fraction-static or tp_size, or lower --context-length", **ev)
            return
    if frac is not None and frac > 0.95:
        ctx.add("MEMORY", "warning", f"mem_fraction_static {frac} leaves under 5 % for activations and CUDA graphs",
                c20, "use ≤ 0.9", **ev)
        return
    ctx.add("MEMORY", "info", f"{sizes} fit in {frac_txt} × {_gib(mem)} = {_gib(budget)}"
            + (f"; ≈{ev['kv_tokens_estimate']} KV tokens left" if "kv_tokens_estimate" in ev else ""),
            c20, "", **ev)
