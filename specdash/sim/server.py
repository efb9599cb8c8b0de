"""The simulated SGLang server process: start-up sequence, HTTP serving, shutdown.

:class:`SimServer` resolves the flags (``args.py`` + ``command.resolve_flags``), reads the
target and draft (``checkpoint.py``), decides the draft wiring (``wiring.py``), prints
SGLang's start-up log (server args, weight loading, KV pool, CUDA-graph capture, the
scheduler's ``max_total_num_tokens=…`` line) over a simulated start-up of
``startup_s / time_scale`` seconds, opens the HTTP port (``/health`` answers 503), runs a
warm-up generation and prints ``The server is fired up and ready to roll!``.  Faults the
real server would crash on end the process the same way (traceback, exit code 1).
SIGTERM/SIGINT end it promptly (exit code 0) after SGLang's ``SIGTERM received`` line.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from specdash.checkpoint.reader import CheckpointError, ModelDir, interpret_draft, read_model_dir
from specdash.sglang.simulate import simulate_acc_len
from specdash.sglang.speculative import SpecResolution, resolve_flags
from specdash.sglang.versions import parse_version
from specdash.sim import args as A
from specdash.sim.engine import Engine, EngineConfig
from specdash.sim.logfmt import LogWriter
from specdash.sim.metrics import TPOT_SINCE, SimMetrics
from specdash.sim.nodes import (
    Rendezvous,
    RendezvousError,
    dist_traceback,
    lost_traceback,
    node_args,
)
from specdash.sim.reports import ReportsMixin
from specdash.sim.scenario import Scenario, SpecShape
from specdash.sim.serving import ServingMixin, SimCrash
from specdash.sim.tiers import AdaptiveSetup
from specdash.sim.wiring import Fatal, Wiring, analyse


def estimate_weight_gib(model: ModelDir) -> float:
    """Weights in GiB from the safetensors headers, else estimated from the config (bf16)."""
    wb = model.weight_bytes()
    if wb:
        return wb / 2**30
    h = int(model.hidden_size or 0)
    layers = int(model.num_hidden_layers or 0)
    inter = int(model.cfg("intermediate_size") or 4 * h)
    vocab = int(model.vocab_size or 0)
    params = layers * (4 * h * h + 3 * h * inter) + 2 * vocab * h
    return params * 2 / 2**30


class SimServer(ReportsMixin, ServingMixin):
    """One simulated server (see the module docstring)."""

    def __init__(self, checked: A.CheckedFlags, opts: A.SimOptions, scenario: Scenario, *,
                 log: LogWriter | None = None, env: dict[str, str] | None = None, quiet: bool = False) -> None:
        self.checked = checked
        self.opts = opts
        self.sc = scenario
        self.version = opts.version
        self.time_scale = float(opts.time_scale or scenario.time_scale)
        self.env = dict(os.environ if env is None else env)
        self.env.update(checked.env)
        flags = checked.flags
        self.tp = int(A.coerce(flags.get("--tp-size", 1), 1) or 1)
        self.pp = int(A.coerce(flags.get("--pp-size", 1), 1) or 1)
        self.log = log or LogWriter(str(flags.get("--log-level", "info")), tp_size=self.tp)
        self.nodes = node_args(flags)  # the CLI has refused bad multi-node flags already
        self.local_ranks = self.nodes.local_ranks(self.tp * self.pp) if self.nodes.multi else range(self.tp)
        if self.nodes.node_rank:  # node R's first scheduler is TP<first local rank>
            self.log.scheduler_prefix = f" TP{self.local_ranks[0]}"
        self.rendezvous: Rendezvous | None = None
        self.enable_metrics = bool(flags.get("--enable-metrics"))
        self.incremental = bool(flags.get("--incremental-streaming-output"))
        self.api_key = flags.get("--api-key") if isinstance(flags.get("--api-key"), str) else None
        self.quiet = quiet
        self.ready = False
        self.stopping = False
        self.exit_code = 0
        self.started_at = time.time()
        self.engine: Engine | None = None
        self.metrics: SimMetrics | None = None
        self.spec_shape: SpecShape | None = None
        self.res: SpecResolution | None = None
        self.wiring = Wiring()
        self.adaptive = AdaptiveSetup({}, self.version)
        self.state_overrides: dict[str, Any] = {}  # POST /set_internal_state (scheduler copy only)
        self.args: dict[str, Any] = {}
        self.notes: list[str] = []
        self._uvicorn = None
        self._startup_task: asyncio.Task | None = None

    # -- step 1: resolve (no sleeping) -----------------------------------------------------------------
    def _model(self, path: str | None, fallback: str, what: str) -> tuple[ModelDir | None, bool]:
        if not path:
            return None, False
        try:
            return read_model_dir(path), False
        except CheckpointError as exc:
            if str(path).startswith("sim:"):
                self._crash_main("OSError", str(exc))
            self.notes.append(f"specdash simulator: {what} {path} is not a readable model directory here; using "
                              f"{fallback}'s config.json in its place")
            return read_model_dir(fallback), True

    def resolve(self) -> None:
        """Read models, apply SGLang's flag resolution, compute memory; print the early lines.

        Raises:
            SimCrash: a rejected combination (traceback printed).
        """
        flags = self.checked.flags
        if self.nodes.multi and (self.tp * self.pp) % self.nodes.nnodes:  # server_args.py check_server_args
            self.crash_message = "AssertionError: tp_size must be divisible by number of nodes"
            if self.quiet:
                raise SimCrash(1)
            sys.stderr.write("Traceback (most recent call last):\n"
                             '  File "sglang/launch_server.py", line 32, in <module>\n'
                             "    server_args = prepare_server_args(sys.argv[1:])\n"
                             '  File "sglang/srt/server_args.py", line 6633, in check_server_args\n'
                             "    assert (\n"
                             "AssertionError: tp_size must be divisible by number of nodes\n")
            sys.stderr.flush()
            raise SimCrash(1)
        self.target, self.target_assumed = self._model(str(flags.get("--model-path")), self.sc.target_model,
                                                       "model path")
        draft_path = flags.get("--speculative-draft-model-path")
        draft_path = str(draft_path) if isinstance(draft_path, str) else None
        self.draft_model, self.draft_assumed = self._model(draft_path, self.sc.draft_model, "draft path")
        self.draft = interpret_draft(self.draft_model) if self.draft_model is not None else None
        self.adaptive = AdaptiveSetup(flags, self.version, self.env)
        self.res = resolve_flags(
            self.adaptive.launch_flags(), version=self.version, env=self.env, target_architectures=self.target.architectures,
            draft_vocab_size=self.draft.draft_vocab_size if self.draft else None,
            target_vocab_size=self.target.vocab_size,
            draft_architectures=self.draft.model.config.get("architectures") if self.draft else None,
        )
        for note in self.notes:
            self.log.line(note)
        for line in self.checked.deprecations:
            self.log.warning(line)
        for adj in self.res.adjustments:
            if adj.log_line:
                self.log.warning(adj.log_line)
        if self.res.rejections:
            rej = self.res.rejections[0]
            self._crash_main(rej.exception, rej.message)
        self.adaptive.settle(self.res, self.log.warning, self._crash_main)
        spec = self.res.enabled
        algo = self.res.algorithm
        if spec and algo == "EAGLE3" and flags.get("--speculative-token-map"):
            self.log.warning("speculative_token_map is ignored for EAGLE3 (the draft's own d2t is used).")
        if spec and self.res.num_steps:
            self.spec_shape = SpecShape(int(self.res.num_steps), int(self.res.eagle_topk or 1),
                                        int(self.res.num_draft_tokens or self.res.num_steps + 1))
        acc = self.sc.acceptance
        self.wiring = analyse(
            algo if spec else None, self.draft, self.target, self.version, draft_path_given=draft_path is not None,
            assumed_draft=self.draft_assumed, eagle2_factor=acc.eagle2_factor,
            misaligned_aux_factor=acc.misaligned_aux_factor, random_draft_alpha=acc.random_draft_alpha,
            ngram_alpha=acc.ngram_alpha,
        )
        # Context length (eagle_worker_v2.py, ModelConfig._derive_context_length).
        target_ctx = int(self.target.max_position_embeddings or 4096)
        given_ctx = A.parse_context_length(flags.get("--context-length"))
        self.context_len = given_ctx or target_ctx
        gpu_gib = self.sc.gpu.memory_mib / 1024.0
        self.args = A.build_server_args(
            self.checked, self.res, version=self.version, seed=self.opts.seed, gpu_name=self.sc.gpu.name,
            gpu_mem_gib=gpu_gib, context_len=self.context_len,
            draft_path=(draft_path or (str(flags.get("--model-path")) if spec and self.draft is None else None)),
        )
        if self.adaptive.asked:
            self.args["speculative_adaptive"] = self.adaptive.enabled
        self.served_model_name = str(self.args.get("served_model_name") or self.args.get("model_path"))
        self.max_running = int(self.res.max_running_requests or 4096)

    def _crash_main(self, exception: str, message: str) -> None:
        """An exception in the launcher process (ServerArgs validation): Python's traceback on stderr."""
        src = {
            "AssertionError": "    assert self.speculative_eagle_topk is None and self.speculative_num_draft_tokens "
                              "is None",
            "TypeError": "    if self.speculative_eagle_topk > 1:",
        }.get(exception, f"    raise {exception}(")
        lines = [
            "Traceback (most recent call last):",
            '  File "<frozen runpy>", line 198, in _run_module_as_main',
            '  File "<frozen runpy>", line 88, in _run_code',
            '  File "sglang/launch_server.py", line 32, in <module>',
            "    server_args = prepare_server_args(sys.argv[1:])",
            '  File "sglang/srt/server_args.py", line 287, in __post_init__',
            "    self._handle_speculative_decoding()",
            '  File "sglang/srt/arg_groups/speculative_hook.py", line 190, in _handle_eagle_family',
            src,
        ]
        if exception == "AssertionError":
            lines.append("AssertionError")
        elif exception == "TypeError":
            lines.append("TypeError: '>' not supported between instances of 'NoneType' and 'int'")
        else:
            lines.append(f"{exception}: {message}")
        self.crash_message = f"{exception}: {message}"
        if self.quiet:
            raise SimCrash(1)
        sys.stdout.flush()
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.write(f"[specdash simulator] {message}\n" if exception in ("AssertionError", "TypeError") else "")
        sys.stderr.flush()
        raise SimCrash(1)

    def _crash_scheduler(self, fatal: Fatal) -> None:
        """An exception in the scheduler subprocess: SGLang logs it and the launcher tears down."""
        self.log.scheduler(
            "Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "sglang/srt/managers/scheduler.py", line 3124, in run_scheduler_process\n'
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
            '  File "sglang/srt/speculative/eagle_worker_v2.py", line 229, in __init__\n'
            "    self.draft_worker = EagleDraftWorker(...)\n"
            f"{fatal.exception}: {fatal.message}\n", level="error")
        self.log.line("Received sigquit from a child process. It usually means the child failed.", level="error")
        raise SimCrash(1)

    # -- step 2: the start-up log --------------------------------------------------------------------
    async def _phase(self, fraction: float) -> None:
        await asyncio.sleep(max(0.0, self.sc.startup_s * fraction / self.time_scale))

    async def startup(self) -> None:
        """Print SGLang's start-up lines over the simulated start-up time (see the module docstring).

        Raises:
            SimCrash: a fault the real server crashes on.
        """
        log = self.log
        spec = self.spec_shape is not None
        log.line(A.server_args_line(self.args))
        log.line("Using default HuggingFace chat template with detected content format: string")
        await self._phase(0.15)
        if len(self.local_ranks) > self.sc.gpu.count:  # per node: (tp x pp) / nnodes ranks on GPUs 0…
            self._crash_scheduler(Fatal("RuntimeError", "CUDA error: invalid device ordinal"))
        mem = self._memory()
        ranks = self.local_ranks if self.tp > 1 or self.nodes.multi else [None]

        def per_rank(msg: str) -> None:
            for r in ranks:
                log.line(msg, prefix="" if r is None else f" TP{r}")

        per_rank("Init torch distributed begin.")
        t_dist = time.monotonic()
        await self._rendezvous()
        per_rank(f"Init torch distributed ends. elapsed={0.19 + time.monotonic() - t_dist:.2f} s, mem usage=0.09 GB")
        per_rank(f"Load weight begin. avail mem={A.gb(mem.avail_start_gib)} GB")
        await self._phase(0.25)
        arch = (self.target.architectures or ["LlamaForCausalLM"])[0]
        after_target = mem.avail_start_gib - mem.target_weights_gib
        per_rank(f"Load weight end. elapsed={self.sc.startup_s * 0.25:.2f} s, type={arch}, "
                 f"avail mem={A.gb(after_target)} GB, mem usage={A.gb(mem.target_weights_gib)} GB.")
        if spec:
            self._draft_context_check()
            if self.wiring.fatal and self.wiring.fatal.phase == "load" and self.draft is None:
                self._crash_scheduler(self.wiring.fatal)
            per_rank("Init torch distributed begin.")
            per_rank("Init torch distributed ends. elapsed=0.00 s, mem usage=0.00 GB")
            per_rank(f"Load weight begin. avail mem={A.gb(after_target)} GB")
            await self._phase(0.05)
            if self.wiring.fatal and self.wiring.fatal.phase == "load":
                self._crash_scheduler(self.wiring.fatal)
            darch = (self.draft.model.architectures or ["LlamaForCausalLMEagle3"])[0] if self.draft else arch
            per_rank(f"Load weight end. elapsed=0.03 s, type={darch}, "
                     f"avail mem={A.gb(after_target - mem.draft_weights_gib)} GB, "
                     f"mem usage={A.gb(mem.draft_weights_gib)} GB.")
        if mem.max_total_num_tokens <= 0:
            self._crash_scheduler(Fatal("RuntimeError", "Not enough memory. Please try to increase "
                                                        f"--mem-fraction-static. Current value: "
                                                        f"mem_fraction_static={mem.fraction}"))
        dtype = "torch.float8_e4m3fn" if str(self.args.get("kv_cache_dtype")).startswith("fp8") else "torch.bfloat16"
        half = mem.kv_target_gib / 2
        log.scheduler(f"KV Cache is allocated. dtype: {dtype}, #tokens: {mem.max_total_num_tokens}, "
                      f"K size: {A.gb(half)} GB, V size: {A.gb(half)} GB")
        avail = mem.avail_start_gib - mem.target_weights_gib - mem.draft_weights_gib - mem.kv_target_gib
        log.scheduler(f"Memory pool end. avail mem={A.gb(avail)} GB")
        if spec:
            dh = mem.kv_draft_gib / 2
            log.scheduler(f"KV Cache is allocated. dtype: {dtype}, #tokens: {mem.max_total_num_tokens}, "
                          f"K size: {A.gb(dh)} GB, V size: {A.gb(dh)} GB")
            avail -= mem.kv_draft_gib
            log.scheduler(f"Memory pool end. avail mem={A.gb(avail)} GB")
        for line in self._adaptive_init():
            log.line(line)
        await self._phase(0.1)
        if avail < mem.graph_gib:
            self._crash_scheduler(Fatal("torch.OutOfMemoryError",
                                        f"CUDA out of memory. Tried to allocate {mem.graph_gib * 1024:.2f} MiB. GPU 0 "
                                        f"has a total capacity of {mem.total_gib:.2f} GiB of which "
                                        f"{max(0.0, avail) * 1024:.2f} MiB is free."))
        await self._capture_graphs(avail, mem)
        if self.wiring.fatal:
            self._crash_scheduler(self.wiring.fatal)
        for model_s, line in self.adaptive.built_states():
            await asyncio.sleep(model_s * 0.02 / self.time_scale)
            log.line(line)
        self.available_end_gib = mem.avail_end_gib
        log.scheduler(f"max_total_num_tokens={mem.max_total_num_tokens}, chunked_prefill_size="
                      f"{self.args.get('chunked_prefill_size')}, max_prefill_tokens={self.args.get('max_prefill_tokens')}"
                      f", max_running_requests={self.max_running}, context_len={self.context_len}, "
                      f"available_gpu_mem={A.gb(mem.avail_end_gib)} GB")

    async def _rendezvous(self) -> None:
        """Multi-node: wait in distributed init until every node has joined (node 0) or until node 0
        answers (node R > 0); a timeout ends the process as SGLang's scheduler does (exit 1)."""
        if not self.nodes.multi:
            return
        self.rendezvous = Rendezvous(self.nodes, self.tp * self.pp, self.log, on_lost=self._node_lost)
        try:
            await self.rendezvous.run()
        except RendezvousError as exc:
            self.log.scheduler(dist_traceback(exc.exception, exc.message), level="error")
            self.log.line("Received sigquit from a child process. It usually means the child failed.", level="error")
            raise SimCrash(1) from None

    def _node_lost(self, rank: int) -> None:
        """A joined node's connection ended: the deployment cannot go on (NCCL's peers are gone)."""
        if self.stopping:
            return
        self.log.scheduler(lost_traceback(
            "torch.distributed.DistBackendError",
            f"NCCL error: remote process exited or there was a network error (node {rank} of "
            f"{self.nodes.nnodes} went away)"), level="error")
        self.log.line("Received sigquit from a child process. It usually means the child failed.", level="error")
        self.exit_code = 1
        self._on_signal(None)

    def _adaptive_init(self) -> list[str]:
        """The adaptive controller's first lines (built with the worker, before graph capture)."""
        spec = self.spec_shape
        if spec is None:
            return []
        args = self.args
        cfg = args.get("cuda_graph_config")
        off = A.graph_max_bs(args) <= 0
        bs = None if off else (cfg["decode"]["bs"] if isinstance(cfg, dict) else args.get("cuda_graph_bs"))
        cap = min(A.graph_max_bs(args), self.max_running) if not off else 0
        self.adaptive.make_controller(spec.steps, spec.num_draft_tokens,
                                      [b for b in bs if b <= cap] or [1] if bs else None)
        return self.adaptive.init_lines()

    def context_error(self, prompt_tokens: int, max_new_tokens: int | None) -> tuple[str | None, int | None]:
        """SGLang's request-length check (``TokenizerManager._validate_one_request``, 0.5.14
        ``tokenizer_manager.py``): ``(message, max_new_tokens)`` — the ``ValueError`` text the real
        server answers with (HTTP 400; an error event in a stream), or None and the max new tokens
        to run (cut to fit under ``--allow-auto-truncate``).  EAGLE reserves
        max(topk × steps, draft tokens) slots of the context for its draft tokens."""
        reserved = 0
        if self.spec_shape is not None:
            sh = self.spec_shape
            reserved = max(sh.topk * sh.steps, sh.num_draft_tokens)
        n = int(prompt_tokens) + reserved
        ctx = int(self.context_len)
        truncate = bool(self.args.get("allow_auto_truncate"))
        if n >= ctx and not truncate:
            return (f"The input ({n} tokens) is longer than the model's context length ({ctx} tokens).", None)
        if max_new_tokens is not None and max_new_tokens + n > ctx:
            if truncate:
                return None, max(0, ctx - n)
            return (f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You "
                    f"requested a total of {max_new_tokens + n} tokens: {n} tokens from the input messages and "
                    f"{max_new_tokens} tokens for the completion. Please reduce the number of tokens in the input "
                    "messages or the completion to fit within the limit.", None)
        return None, max_new_tokens

    def _draft_context_check(self) -> None:
        """Draft built with the target's context length (``eagle_worker_v2.py``)."""
        if self.draft is None:
            return
        dpos = self.draft.model.max_position_embeddings
        if not dpos or self.context_len <= int(dpos):
            return
        allow = self.env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() in ("1", "true", "yes")
        msg = (f"Target model's context_length ({self.context_len}) is greater than the derived context_length "
               f"({dpos}). This may lead to incorrect model outputs or CUDA errors. Note that the derived "
               "context_length may differ from max_position_embeddings in the model's config.")
        if allow:
            self.log.warning(f"Warning: {msg}")
            return
        self._crash_scheduler(Fatal("ValueError", f"Warning: {msg} To allow overriding this maximum, set the env var "
                                                  "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"))

    async def _capture_graphs(self, avail: float, mem: A.Memory) -> None:
        log = self.log
        max_bs = A.graph_max_bs(self.args)
        if max_bs <= 0:
            self.graph_max_bs = 0
            await self._phase(0.1)
            return
        cap = min(max_bs, self.max_running)
        cfg = self.args.get("cuda_graph_config")
        bs = cfg["decode"]["bs"] if isinstance(cfg, dict) else self.args.get("cuda_graph_bs") or []
        bs = [b for b in bs if b <= cap] or [1]
        self.graph_max_bs = max(bs)
        if isinstance(cfg, dict) and cfg["prefill"]["backend"] == "disabled":
            log.scheduler("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
                          "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).")
        spec = self.spec_shape
        graphs = [("target decode", 1)] if spec is None else [("target verify", spec.num_draft_tokens)]
        if spec is not None:
            if spec.steps > 1:
                graphs.append(("draft decode", spec.topk))
            graphs.append(("draft extend", spec.num_draft_tokens))
        share = mem.graph_gib / len(graphs)
        # capture time grows with the sizes captured: 0.3 of the start-up for SGLang's speculative default list
        # up to 16 (12 sizes), less for a shorter list (--cuda-graph-max-bs-decode), at most 0.3
        capture = 0.3 * min(1.0, len(bs) / 12)
        for name, per_bs in graphs:
            log.scheduler(f"Capture {name} CUDA graph begin. backend=full, num_tokens_per_bs={per_bs}, bs={bs}, "
                          f"avail mem={A.gb(avail)} GB")
            await self._phase(capture / len(graphs))
            if self.wiring.fatal and self.wiring.fatal.phase == "warmup":
                self._crash_scheduler(self.wiring.fatal)
            avail -= share
            log.scheduler(f"Capture {name} CUDA graph end. elapsed={self.sc.startup_s * capture / len(graphs):.2f} s, "
                          f"mem usage={A.gb(share)} GB, avail mem={A.gb(avail)} GB.")

    def _memory(self) -> A.Memory:
        sc = self.sc
        spec = self.spec_shape is not None
        tw = sc.target.weights_gib if sc.target.weights_gib is not None else estimate_weight_gib(self.target)
        dw = 0.0
        if spec and self.draft is not None:
            dw = sc.draft.weights_gib if sc.draft.weights_gib is not None else estimate_weight_gib(self.draft.model)
        dtype_bytes = 1 if str(self.args.get("kv_cache_dtype")).startswith("fp8") else 2
        bpt = sc.target.kv_bytes_per_token or A.kv_bytes_per_token(self.target.cfg, self.tp, dtype_bytes=dtype_bytes)
        dbpt = 0.0
        if spec and self.draft is not None:
            dbpt = A.kv_bytes_per_token(self.draft.model.cfg, self.tp, layers=int(
                self.draft.model.num_hidden_layers or 1), dtype_bytes=dtype_bytes)
        frac = float(self.args.get("mem_fraction_static") or A.auto_mem_fraction(spec))
        self.mem = A.compute_memory(
            gpu_total_mib=sc.gpu.memory_mib, context_reserve_mib=sc.gpu.context_reserve_mib,
            graph_reserve_mib=sc.gpu.graph_reserve_mib, fraction=frac, tp=self.tp, target_weights_gib_total=tw,
            draft_weights_gib_total=dw, bytes_per_token_target=bpt, bytes_per_token_draft=dbpt)
        self.max_total_num_tokens = self.mem.max_total_num_tokens
        return self.mem

    # -- step 3: engine + HTTP -------------------------------------------------------------------------
    def build_engine(self) -> None:
        """Create metrics and the scheduler for the resolved settings."""
        spec = self.spec_shape
        tpot = not parse_version(self.version) < parse_version(TPOT_SINCE)
        timer = A.device_timer_enabled(self.env, self.version)
        replicas = list(self.local_ranks) if self.args.get("enable_metrics_for_all_schedulers") else []
        self.metrics = SimMetrics(self.served_model_name, spec=spec is not None, tpot=tpot, device_timer=timer,
                                  replica_ranks=replicas) if self.enable_metrics else None
        w = self.wiring
        cfg = EngineConfig(
            spec=spec, max_running=self.max_running, graph_max_bs=getattr(self, "graph_max_bs", 0),
            time_scale=self.time_scale, decode_log_interval=int(self.args.get("decode_log_interval") or 40),
            max_total_tokens=max(1, self.max_total_num_tokens),
            max_prefill_tokens=int(self.args.get("max_prefill_tokens") or 16384), seed=self.opts.seed,
            alpha=self.sc.acceptance.alpha * w.alpha_factor, alpha_override=w.alpha_override,
            draft_max_position=w.draft_max_position if spec is not None else None,
            enable_metrics=self.enable_metrics, adaptive=self.adaptive.controller, device_timer=timer,
            simulate_acc_len=simulate_acc_len(self.env) if spec is not None else None,
        )
        self.engine = Engine(self.sc, cfg, self.log, self.metrics)
        m = self.metrics
        if m:
            m.max_total_num_tokens.set(self.max_total_num_tokens)
            m.page_size.set(int(self.args.get("page_size") or 1))
            m.num_pages.set(self.max_total_num_tokens)
            m.context_len.set(self.context_len)
            m.startup_gpu_mem.set(getattr(self, "available_end_gib", 0.0))
            live = spec is not None and self.adaptive.controller is None  # adaptive: 0 until the first decode log
            m.spec_num_steps.set(spec.steps if live else 0.0)
            m.spec_num_draft_tokens.set(spec.num_draft_tokens if live else 0.0)
            m.spec_accept_length.set(0.0)
            m.spec_accept_rate.set(0.0)
            m.new_token_ratio.set(0.7)

    async def warmup(self) -> None:
        """SGLang's warm-up request (a short /generate from the server itself)."""
        eng = self.engine
        r = eng.new_request("The capital city of France is", None, 8, temperature=0.0, internal="warmup")
        while not r.finished:
            r.event.clear()
            if r.finished:
                break
            await r.event.wait()
        port = getattr(self, "port", 0)
        self.log.line(f'INFO:     127.0.0.1:{40000 + port % 20000} - "POST /generate HTTP/1.1" 200 OK')


def banner(opts: A.SimOptions, scenario: Scenario, time_scale: float) -> str:
    """The simulator's first log line (so nobody mistakes it for a real server)."""
    return (f"specdash simulator (NOT a real SGLang server) emulating SGLang {opts.version}; scenario "
            f"{scenario.name!r}, seed {opts.seed}, time scale {time_scale:g}; all figures are simulated")


def scenario_path_hint() -> str:
    """Where bundled scenarios live (for --help)."""
    return str(Path(__file__).resolve().parent / "scenarios")
