"""What the simulated server reports about itself: ``/server_info`` (with ``internal_states[0]``), ``/model_info``,
``/sim/truth`` (its ground truth for tests) and ``/sim/gpus``.  A mixin of :class:`specdash.sim.server.SimServer`
(it reads the resolved flags, the scenario, the engine and the memory plan); the shapes follow SGLang 0.5.14's
own (the golden ``server_info.json`` and ``model_info.json``)."""

from __future__ import annotations

import os
import time
from typing import Any

from specdash.sglang.secrets import MASK, is_secret_flag
from specdash.sglang.versions import parse_version
from specdash.sim import args as A


class ReportsMixin:
    """``internal_state`` / ``server_info`` / ``model_info`` / ``truth`` / ``gpus`` of the simulated server."""

    args: dict
    checked: Any
    sc: Any
    opts: Any
    res: Any
    engine: Any
    adaptive: Any
    wiring: Any
    target: Any
    version: str
    ready: bool

    def internal_state(self) -> dict[str, Any]:
        """``internal_states[0]`` (``scheduler_components/internal_state.py``; golden server_info.json)."""
        st = dict(self.args)
        st["context_length"] = self.context_len
        st["disable_chunked_prefix_cache"] = True
        st["pp_max_micro_batch_size"] = self.max_running
        st.update({
            "enable_grpc": False, "grpc_port": int(self.args.get("port") or 30000) + 10000,
            "_quantization_explicitly_unset": False,
            "_cuda_graph_config_locked": [["prefill", "backend"], ["decode", "max_bs"]],
            "uses_mamba_radix_cache": False,
            "use_mla_backend": any(a.startswith(("Deepseek", "KimiK")) for a in self.target.architectures),
            "_mx_config_cache": {},
            "max_speculative_num_draft_tokens": self.res.num_draft_tokens if self.res else None,
            "last_gen_throughput": self.engine.last_gen_throughput if self.engine else 0.0,
            "memory_usage": {"weight": round(self.mem.target_weights_gib, 2),
                             "kvcache": round(self.mem.kv_target_gib + self.mem.kv_draft_gib, 2),
                             "token_capacity": self.max_total_num_tokens, "graph": round(self.mem.graph_gib, 2)},
            "effective_max_running_requests_per_dp": self.max_running,
        })
        if self.spec_shape is not None and self.engine is not None:
            avg = self.engine.avg_spec_accept_length()
            if avg is not None:
                st["avg_spec_accept_length"] = avg
        st.update(self.adaptive.internal_state())
        st.update(self.state_overrides)
        return st

    def server_info(self) -> dict[str, Any]:
        """``/server_info``: resolved args flat, scheduler info, ``internal_states``, ``version``."""
        info = dict(self.args)
        info["status"] = "ready" if self.ready else "starting"
        info["max_total_num_tokens"] = self.max_total_num_tokens
        info["max_req_input_len"] = max(1, self.context_len - 6)
        info["internal_states"] = [self.internal_state()]
        info["version"] = self.version
        info["kv_events"] = None
        if not parse_version(self.version) < parse_version(A.SERVER_INFO_LAUNCH_COMMAND_SINCE):
            argv = ["python", "-m", "sglang.launch_server"]
            for f in self.checked.order:
                v = self.checked.flags[f]
                argv += [f] if v is True else [f, MASK if is_secret_flag(f) else str(v)]
            info["launch_command"] = " ".join(argv)
            info["startup_time"] = getattr(self, "startup_seconds", None)
            info["frontend"] = "python"
        info["simulated"] = True
        info["sim_scenario"] = self.sc.name
        return info

    def model_info(self) -> dict[str, Any]:
        """``/model_info`` (golden model_info.json)."""
        return {"model_path": self.args.get("model_path"), "tokenizer_path": self.args.get("tokenizer_path"),
                "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
                "has_image_understanding": False, "has_audio_understanding": False,
                "model_type": self.target.config.get("model_type"), "architectures": self.target.architectures,
                "simulated": True}

    def truth(self, *, include_records: bool = True, since: float | None = None,
              decode_windows: bool = False) -> dict[str, Any]:
        """``/sim/truth``: the engine's counts plus scenario, settings and wiring (``decode_windows``: with
        the engine's per-decode-line entries, :meth:`specdash.sim.engine.Engine.truth_json`)."""
        out = {"simulated": True, "version": self.version, "seed": self.opts.seed, "time_scale": self.time_scale,
               "scenario": {"name": self.sc.name, "path": self.sc.path, "description": self.sc.description,
                            "alpha": self.sc.acceptance.alpha, "decay": self.sc.acceptance.decay,
                            "tree_gain": self.sc.acceptance.tree_gain, "tree_model": self.sc.acceptance.tree_model,
                            "rank_decay": self.sc.acceptance.rank_decay, "target_step_ms": self.sc.target.step_ms},
               "effective": {
                   "speculative_algorithm": self.res.algorithm if self.res else None,
                   "speculative_num_steps": self.res.num_steps if self.res else None,
                   "speculative_eagle_topk": self.res.eagle_topk if self.res else None,
                   "speculative_num_draft_tokens": self.res.num_draft_tokens if self.res else None,
                   "max_running_requests": self.max_running, "tp_size": self.tp,
                   "graph_max_bs": getattr(self, "graph_max_bs", 0),
                   "alpha_effective": (self.wiring.alpha_override if self.wiring.alpha_override is not None
                                       else self.sc.acceptance.alpha * self.wiring.alpha_factor),
               },
               "adjustments": [{"field": a.field, "asked": a.asked, "effective": a.effective, "reason": a.reason}
                               for a in (self.res.adjustments if self.res else [])],
               "wiring": self.wiring.to_json(), "started_at": self.started_at, "ready": self.ready,
               "adaptive": self.adaptive.truth()}
        if self.engine is not None:
            out.update(self.engine.truth_json(include_records=include_records, since=since,
                                              decode_windows=decode_windows))
        return out

    def gpus(self) -> dict[str, Any]:
        """``/sim/gpus``: simulated per-device memory and utilisation (read by the TUI in demo mode)."""
        sc = self.sc
        util = self.engine.utilization() * 100.0 if self.engine else 0.0
        mem = getattr(self, "mem", None)
        devices = []
        for i in range(sc.gpu.count):
            used = 0.0
            active = i < len(self.local_ranks) and mem is not None
            if active:
                used = (sc.gpu.context_reserve_mib + (mem.static_gib + mem.graph_gib) * 1024.0)
            devices.append({
                "index": i, "name": sc.gpu.name, "memory_total_mib": float(sc.gpu.memory_mib),
                "memory_used_mib": round(min(used, sc.gpu.memory_mib), 1),
                "utilization_pct": round(util, 1) if active else 0.0, "simulated": True,
                "processes": [{"pid": os.getpid(), "used_mib": round(used, 1), "name": "specdash.sim"}]
                if active else [],
            })
        return {"simulated": True, "time": time.time(), "devices": devices}
