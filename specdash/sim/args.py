"""SGLang's launch flags and ``ServerArgs`` as the simulator emulates them.

* Flags are split into SGLang flags and the simulator's own (``--sim-*``, ``--time-scale``,
  ``--expected``, ``--concurrency`` …), parsed with
  :func:`specdash.sglang.cmdline.parse_command_line`, then checked against the emulated
  release's long options (:func:`specdash.sglang.versions.known_flags`) with argparse's
  rules: exact names pass, a unique prefix is expanded, a prefix of several options exits 2
  with ``ambiguous option``, an option that other releases have but this one lacks exits 2
  with ``unrecognized arguments``.  Options no stored release knows are accepted and echoed
  into the server args (the brief's leniency; real argparse would refuse them).
* ``ServerArgs`` fields and defaults come from a real 0.5.14 server's ``/server_info``
  (``server_args_0_5_14.json``); the speculative values come from
  :func:`specdash.sglang.speculative.resolve_flags` (the single source of SGLang's adjustments).
* Memory follows the golden run's arithmetic (the scheduler-init log line, golden ``server.log``):
  ``--mem-fraction-static`` × memory available at start = weights + KV pool (target and
  draft), the KV pool split by bytes per token; CUDA graphs and activations come on top.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdash.sglang.cmdline import ParsedCommand, parse_command_line
from specdash.sglang.speculative import SpecResolution
from specdash.sglang.versions import deprecated_flags, flag_versions, has_feature, known_flags, parse_version

DEFAULTS_FILE = Path(__file__).resolve().parent / "server_args_0_5_14.json"

#: The simulator's own options (value-taking unless listed in SIM_BOOL).
SIM_OPTIONS = ("--sim-scenario", "--sim-seed", "--time-scale", "--sim-sglang-version", "--expected",
               "--concurrency", "--max-new-tokens", "--prompt-tokens")
SIM_BOOL = ("--expected",)

#: Releases from which ``/server_info`` carries ``launch_command``, ``startup_time`` and
#: ``frontend`` (``utils/common.py::build_server_info`` in 0.5.23; the 0.5.14 recording has none of them).
SERVER_INFO_LAUNCH_COMMAND_SINCE = "0.5.22"


class UsageError(Exception):
    """A command line argparse would refuse (the simulator exits 2 like SGLang)."""


@dataclass
class SimOptions:
    """The simulator's own options (see ``python -m specdash.sim --help``)."""

    scenario: str = "healthy"
    seed: int = 0
    time_scale: float | None = None
    version: str = "0.5.23"
    expected: bool = False
    concurrency: int = 1
    max_new_tokens: int = 1024
    prompt_tokens: int = 20


def expand_config(argv: list[str]) -> list[str]:
    """SGLang's ``--config FILE.yaml``: the file's mapping as flags, placed before the other arguments
    (``ConfigArgumentMerger.merge_config_with_args`` in ``srt/server_args_config_parser.py``, 0.5.14:
    ``--key value`` per scalar, ``--key v1 v2`` per list, ``--key`` for a true boolean, nothing for a
    false one).  Read with PyYAML when it is installed, else as JSON (specdash's own secret files are
    JSON, which YAML reads too).

    Raises:
        UsageError: two ``--config``, no path after it, not ``.yaml``/``.yml``, unreadable, or not a
            mapping — SGLang's own wording where it has one.
    """
    idx = [i for i, a in enumerate(argv) if a == "--config"]
    if not idx:
        return list(argv)
    if len(idx) > 1:
        raise UsageError("Multiple config files specified! Only one allowed.")
    i = idx[0]
    if i == len(argv) - 1:
        raise UsageError("No config file specified after --config flag!")
    path = Path(argv[i + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise UsageError(f"Config file must be YAML format, got: {path.suffix}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"Config file not found: {path} ({exc.strerror})") from None
    try:
        import yaml

        data = yaml.safe_load(text)
    except ImportError:
        try:
            data = json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise UsageError(f"{path}: not JSON, and PyYAML is not installed to read YAML ({exc})") from None
    except Exception as exc:  # yaml.YAMLError and friends
        raise UsageError(f"{path}: {exc}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise UsageError("Config file must contain a dictionary at root level")
    extra: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            if value:
                extra.append(f"--{key}")
        elif isinstance(value, list):
            if value:
                extra += [f"--{key}", *map(str, value)]
        else:
            extra += [f"--{key}", str(value)]
    return extra + argv[:i] + argv[i + 2:]


def split_argv(argv: list[str]) -> tuple[list[str], SimOptions]:
    """Separate the simulator's options from SGLang's flags.

    Raises:
        UsageError: a simulator option lacks its value or has a bad one.
    """
    from specdash.sglang.versions import DEFAULT_VERSION

    opts = SimOptions(version=DEFAULT_VERSION)
    rest: list[str] = []
    i = 0
    while i < len(argv):
        w = argv[i]
        name, eq, val = w.partition("=")
        if name in SIM_OPTIONS:
            if name in SIM_BOOL and not eq:
                value: str | None = "1"
                i += 1
            elif eq:
                value = val
                i += 1
            else:
                if i + 1 >= len(argv):
                    raise UsageError(f"argument {name}: expected one argument")
                value = argv[i + 1]
                i += 2
            try:
                _set_sim(opts, name, value)
            except ValueError:
                raise UsageError(f"argument {name}: invalid value: {value!r}") from None
            continue
        rest.append(w)
        i += 1
    return rest, opts


def _set_sim(opts: SimOptions, name: str, value: str) -> None:
    if name == "--sim-scenario":
        opts.scenario = value
    elif name == "--sim-seed":
        opts.seed = int(value)
    elif name == "--time-scale":
        opts.time_scale = float(value)
        if opts.time_scale <= 0:
            raise ValueError(value)
    elif name == "--sim-sglang-version":
        opts.version = str(parse_version(value))
    elif name == "--expected":
        opts.expected = value not in ("0", "false", "False")
    elif name == "--concurrency":
        opts.concurrency = max(1, int(value))
    elif name == "--max-new-tokens":
        opts.max_new_tokens = max(1, int(value))
    elif name == "--prompt-tokens":
        opts.prompt_tokens = max(1, int(value))


@dataclass
class CheckedFlags:
    """SGLang flags after argparse's checks: canonical long name → value, plus the
    deprecation lines SGLang prints for deprecated aliases it still accepts."""

    flags: dict[str, Any]
    order: list[str]
    env: dict[str, str]
    deprecations: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def check_flags(argv: list[str], version: str) -> CheckedFlags:
    """Parse SGLang flags and apply argparse's option matching for ``version``.

    Raises:
        UsageError: an ambiguous abbreviation, an option this release does not have, or
            words argparse would not accept (message as argparse prints it, without the
            ``usage:`` line).
    """
    try:
        parsed: ParsedCommand = parse_command_line(list(argv)) if argv else ParsedCommand({}, [], {}, [])
    except ValueError as exc:
        raise UsageError(f"unrecognized arguments: {exc}") from None
    if parsed.program:
        raise UsageError(f"unrecognized arguments: {' '.join(parsed.program)}")
    known = known_flags(version) or set()
    everywhere: set[str] = set()
    for v in flag_versions():
        everywhere |= known_flags(str(v)) or set()
    deprecated = deprecated_flags(version)
    out: dict[str, Any] = {}
    order: list[str] = []
    notes: list[str] = []
    unknown: list[str] = []
    for name in parsed.order:
        value = parsed.flags[name]
        full = name
        if known and name not in known:
            matches = sorted(k for k in known if k.startswith(name))
            if len(matches) > 1:
                raise UsageError(f"ambiguous option: {name} could match {', '.join(matches)}")
            if len(matches) == 1:
                full = matches[0]
            elif name in everywhere:
                shown = name if value is True else f"{name} {value}"
                raise UsageError(f"unrecognized arguments: {shown}")
            else:
                unknown.append(name)
        if full in deprecated:
            repl = deprecated[full]
            notes.append(f"The argument {full} is deprecated" + (f"; use {repl} instead." if repl else "."))
            if repl and repl.startswith("--") and "=" not in repl and "{" not in repl:
                full = repl
        out[full] = value
        if full not in order:
            order.append(full)
    return CheckedFlags(out, order, dict(parsed.env), notes, unknown)


def device_timer_enabled(env: dict[str, str], version: str) -> bool:
    """``SGLANG_ENABLE_METRICS_DEVICE_TIMER`` is true on a release that reads it (0.5.11+, SGLang
    ``environ.py``): per-phase ``sglang:forward_execution_seconds_total`` and ``fwd occupancy``."""
    val = str(env.get("SGLANG_ENABLE_METRICS_DEVICE_TIMER", "")).strip().lower()
    return val in ("1", "true", "yes", "on") and has_feature("metrics_device_timer", version)


# -- ServerArgs ------------------------------------------------------------------------------

def load_defaults() -> dict[str, Any]:
    """ServerArgs fields → defaults, in declaration order (0.5.14 field list)."""
    data = json.loads(DEFAULTS_FILE.read_text(encoding="utf-8"))
    return dict(data["fields"])


def field_name(flag: str) -> str:
    """``--mem-fraction-static`` → ``mem_fraction_static``."""
    return flag.lstrip("-").replace("-", "_")


def coerce(value: Any, default: Any) -> Any:
    """Convert a command-line word to the type of the field's default (argparse's ``type=``)."""
    if value is True:
        return True
    s = str(value)
    if isinstance(default, bool):
        return s.lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        try:
            return int(s)
        except ValueError:
            return s
    if isinstance(default, float):
        try:
            return float(s)
        except ValueError:
            return s
    if isinstance(default, (list, dict)):
        try:
            return json.loads(s)
        except ValueError:
            return s.split() if isinstance(default, list) else s
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    if s[:1] in "[{":
        try:
            return json.loads(s)
        except ValueError:
            return s
    return s


def parse_context_length(value: Any) -> int | None:
    """``--context-length`` accepts ``32768``, ``32k``, ``1m`` (``arg_groups/fields/``)."""
    if value is None or value is True:
        return None
    s = str(value).strip().lower()
    mult = 1
    if s.endswith("k"):
        mult, s = 1024, s[:-1]
    elif s.endswith("m"):
        mult, s = 1024 * 1024, s[:-1]
    try:
        return int(float(s) * mult)
    except ValueError:
        return None


def default_graph_max_bs(gpu_mem_gib: float, tp: int) -> int:
    """Decode CUDA-graph max batch from GPU memory (``memory_hook.py`` / ``cuda_graph_hook.py``)."""
    if gpu_mem_gib < 20:
        return 8
    if gpu_mem_gib < 35:
        return 48 if tp < 4 else 160
    if gpu_mem_gib < 60:
        return 32 if tp < 4 else 160
    if gpu_mem_gib < 160:
        return 256 if tp < 4 else 512
    return 512


def graph_batch_sizes(max_bs: int, spec: bool) -> list[int]:
    """Captured decode batch sizes up to ``max_bs``: the speculative list is finer
    (1–8, 10–32 step 2, 40–64 step 4, 72–256 step 8, then step 16; ``cuda_graph_hook.py``);
    without speculation ``[1, 2, 4, 8]`` then step 8 to 256, then 16 (golden baseline: [1, 2, 4, 8])."""
    if spec:
        sizes = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
    else:
        sizes = [1, 2, 4, 8, *list(range(16, 257, 8))]
    sizes += list(range(272, 4097, 16))
    return [s for s in sizes if s <= max_bs] or [1]


PREFILL_GRAPH_BS = [4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
                    288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 832, 896, 960, 1024, 1280, 1536, 1792,
                    2048, 2304, 2560, 2816, 3072, 3328, 3584, 3840, 4096, 4608, 5120, 5632, 6144, 6656, 7168, 7680,
                    8192]


@dataclass
class Memory:
    """Per-device memory in GiB (SGLang's log says GB and means GiB) and the KV pool."""

    total_gib: float
    avail_start_gib: float
    fraction: float
    target_weights_gib: float
    draft_weights_gib: float
    kv_target_gib: float
    kv_draft_gib: float
    max_total_num_tokens: int
    graph_gib: float
    bytes_per_token_target: float
    bytes_per_token_draft: float

    @property
    def static_gib(self) -> float:
        """Weights + KV pool (what ``--mem-fraction-static`` covers)."""
        return self.target_weights_gib + self.draft_weights_gib + self.kv_target_gib + self.kv_draft_gib

    @property
    def avail_after_pool_gib(self) -> float:
        """Memory left after weights and the KV pool (``Memory pool end. avail mem=``)."""
        return self.avail_start_gib - self.static_gib

    @property
    def avail_end_gib(self) -> float:
        """Left after CUDA graphs too (``available_gpu_mem=`` of the scheduler's init line)."""
        return self.avail_after_pool_gib - self.graph_gib


def kv_bytes_per_token(cfg_get, tp: int, *, layers: int | None = None, dtype_bytes: int = 2) -> float:
    """K+V bytes per token on one rank: ``2 × layers × kv_heads/rank × head_dim × dtype``."""
    hidden = int(cfg_get("hidden_size") or 4096)
    heads = int(cfg_get("num_attention_heads") or 32)
    kv_heads = int(cfg_get("num_key_value_heads") or heads)
    head_dim = int(cfg_get("head_dim") or hidden // heads)
    n_layers = int(layers if layers is not None else (cfg_get("num_hidden_layers") or 32))
    per_rank_heads = max(1.0, kv_heads / max(1, tp))
    return 2.0 * n_layers * per_rank_heads * head_dim * dtype_bytes


def auto_mem_fraction(spec: bool) -> float:
    """The simulator's stand-in for SGLang's automatic ``--mem-fraction-static``
    (0.88, or 0.85 with a draft model; an approximation of the GPU-memory hook)."""
    return 0.85 if spec else 0.88


def random_seed_for(seed: int) -> int:
    """``random_seed`` reported in ServerArgs (SGLang draws one; here derived from ``--sim-seed``)."""
    return random.Random(seed * 7919 + 17).randrange(1, 2**30)


def python_repr(value: Any) -> str:
    """A value as Python's dataclass ``repr`` prints it in the ``server_args=`` line."""
    if isinstance(value, dict) and set(value) == {"decode", "prefill"} and all(isinstance(v, dict) for v in
                                                                               value.values()):
        def phase(p: dict) -> str:
            return "PhaseConfig(" + ", ".join(f"{k}={python_repr(v)}" for k, v in p.items()) + ")"
        return f"CudaGraphConfig(decode={phase(value['decode'])}, prefill={phase(value['prefill'])})"
    return repr(value)


def server_args_line(args: dict[str, Any]) -> str:
    """``server_args=ServerArgs(model_path='…', …)`` as SGLang logs it at start-up."""
    return "server_args=ServerArgs(" + ", ".join(f"{k}={python_repr(v)}" for k, v in args.items()) + ")"


def version_fields(fields_: dict[str, Any], version: str) -> dict[str, Any]:
    """Adapt the 0.5.14 field list to ``version`` where the flag tables say it differs
    (before 0.5.14: ``cuda_graph_max_bs`` / ``cuda_graph_bs`` instead of the per-phase fields)."""
    if has_feature("cuda_graph_max_bs_decode_flag", version):
        return fields_
    out: dict[str, Any] = {}
    dropped = {"cuda_graph_config", "cuda_graph_backend_decode", "cuda_graph_backend_prefill",
               "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill", "cuda_graph_bs_decode",
               "cuda_graph_bs_prefill", "cuda_graph_tc_compiler", "disable_prefill_cuda_graph",
               "disable_decode_cuda_graph"}
    for k, v in fields_.items():
        if k == "cuda_graph_config":
            out["cuda_graph_max_bs"] = None
            out["cuda_graph_bs"] = None
        if k in dropped:
            continue
        out[k] = v
    return out


def is_hopper(name: str) -> bool:
    """H100/H200/H800/H20 (the default attention backend there is fa3, ``model_override_base.py::get_default_attn_backend``)."""
    n = name.upper()
    return any(t in n for t in ("H100", "H200", "H800", "H20", "GH200"))


def build_server_args(
    checked: CheckedFlags,
    res: SpecResolution,
    *,
    version: str,
    seed: int,
    gpu_name: str,
    gpu_mem_gib: float,
    context_len: int,
    draft_path: str | None,
) -> dict[str, Any]:
    """The resolved ``ServerArgs`` (top-level ``/server_info`` keys and the ``server_args=`` line).

    ``context_length`` stays as given (None when not given, as on the real server; the
    resolved length is in ``internal_states``).
    """
    defaults = version_fields(load_defaults(), version)
    args = dict(defaults)
    for flag in checked.order:
        name = field_name(flag)
        args[name] = coerce(checked.flags[flag], defaults.get(name))
    model = str(args.get("model_path") or "")
    args["model_path"] = model
    if not args.get("tokenizer_path"):
        args["tokenizer_path"] = model
    if not args.get("served_model_name"):
        args["served_model_name"] = model
    if "context_length" in args and args["context_length"] is not None:
        args["context_length"] = parse_context_length(args["context_length"])
    spec = res.enabled
    if args.get("mem_fraction_static") is None:
        args["mem_fraction_static"] = auto_mem_fraction(spec)
    if args.get("random_seed") is None:
        args["random_seed"] = random_seed_for(seed)
    tp = int(args.get("tp_size") or 1)
    if args.get("attention_backend") is None:
        if is_hopper(gpu_name):
            args["attention_backend"] = "fa3"
        elif "B200" in gpu_name.upper() or "B300" in gpu_name.upper():
            topk_given = checked.flags.get("--speculative-eagle-topk")
            args["attention_backend"] = "trtllm_mha" if (not spec or (topk_given and int(topk_given) <= 1)) \
                else "flashinfer"
        else:
            args["attention_backend"] = "flashinfer"
    if args.get("sampling_backend") is None:
        args["sampling_backend"] = "flashinfer"
    if args.get("grammar_backend") is None:
        args["grammar_backend"] = "xgrammar"
    # Speculative values from command.py (the single source of SGLang's adjustments).
    args["speculative_algorithm"] = res.algorithm
    args["speculative_num_steps"] = res.num_steps
    args["speculative_eagle_topk"] = res.eagle_topk
    args["speculative_num_draft_tokens"] = res.num_draft_tokens
    args["speculative_draft_model_path"] = draft_path if spec else args.get("speculative_draft_model_path")
    if spec and draft_path and args.get("speculative_draft_model_revision") is None:
        args["speculative_draft_model_revision"] = "main"
    args["max_running_requests"] = res.max_running_requests
    # CUDA graphs.
    user_max_running = "--max-running-requests" in checked.flags
    decode_disabled = bool(args.get("disable_cuda_graph")) or bool(args.get("disable_decode_cuda_graph")) or \
        str(args.get("cuda_graph_backend_decode") or "") == "disabled"
    given = args.get("cuda_graph_max_bs_decode") if "cuda_graph_max_bs_decode" in args else args.get(
        "cuda_graph_max_bs")
    cfg_json = args.get("cuda_graph_config") if isinstance(args.get("cuda_graph_config"), dict) else None
    if cfg_json and isinstance(cfg_json.get("decode"), dict) and cfg_json["decode"].get("max_bs"):
        given = cfg_json["decode"]["max_bs"]
    max_bs = int(given) if isinstance(given, (int, float)) else default_graph_max_bs(gpu_mem_gib, tp)
    if user_max_running and res.max_running_requests:
        max_bs = min(max_bs, int(res.max_running_requests))
    bs = graph_batch_sizes(max_bs, spec)
    if has_feature("cuda_graph_max_bs_decode_flag", version):
        prefill_disabled = bool(args.get("disable_prefill_cuda_graph")) or bool(args.get("disable_cuda_graph"))
        args["cuda_graph_config"] = {
            "decode": {"backend": "disabled" if decode_disabled else "full", "max_bs": max_bs, "bs": bs,
                       "tc_compiler": "eager"},
            "prefill": {"backend": "disabled" if prefill_disabled else "tc_piecewise", "max_bs": 8192,
                        "bs": PREFILL_GRAPH_BS, "tc_compiler": "eager"},
        }
    else:
        args["cuda_graph_max_bs"] = max_bs
        args["cuda_graph_bs"] = bs
    return args


def graph_max_bs(args: dict[str, Any]) -> int:
    """The largest captured decode batch (0 when decode CUDA graphs are off)."""
    cfg = args.get("cuda_graph_config")
    if isinstance(cfg, dict):
        dec = cfg.get("decode") or {}
        if dec.get("backend") == "disabled":
            return 0
        return int(dec.get("max_bs") or 0)
    if args.get("disable_cuda_graph"):
        return 0
    return int(args.get("cuda_graph_max_bs") or 0)


def compute_memory(
    *,
    gpu_total_mib: float,
    context_reserve_mib: float,
    graph_reserve_mib: float,
    fraction: float,
    tp: int,
    target_weights_gib_total: float,
    draft_weights_gib_total: float,
    bytes_per_token_target: float,
    bytes_per_token_draft: float,
) -> Memory:
    """The KV pool SGLang would allocate on each rank (see the module docstring).

    The numbers reproduce the golden tiny run: 139.13 GB available × 0.5 − 0.31 − 0.15 GB
    of weights = 69.1 GB of KV at 8192 + 1024 bytes per token → ≈ 8.05 M tokens.
    """
    total = gpu_total_mib / 1024.0
    avail = total - context_reserve_mib / 1024.0
    tw = target_weights_gib_total / max(1, tp)
    dw = draft_weights_gib_total / max(1, tp)
    kv = avail * fraction - tw - dw
    per_tok = bytes_per_token_target + bytes_per_token_draft
    tokens = int(max(0.0, kv) * 2**30 // per_tok) if per_tok > 0 else 0
    kv_t = tokens * bytes_per_token_target / 2**30
    kv_d = tokens * bytes_per_token_draft / 2**30
    return Memory(total, avail, fraction, tw, dw, kv_t, kv_d, tokens, graph_reserve_mib / 1024.0,
                  bytes_per_token_target, bytes_per_token_draft)


def gb(x: float) -> str:
    """Two decimals, as SGLang prints GB figures."""
    return f"{x:.2f}"


def finite(x: float) -> float:
    """``x`` or 0.0 when not finite (JSON has no NaN)."""
    return x if math.isfinite(x) else 0.0
