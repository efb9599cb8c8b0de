"""The profile and suite schemas: pydantic models, strict validation, ``${VAR}`` expansion.

A profile says how to launch a server::

    # where the values came from
    name = "llama31-8b-eagle3"
    description = "…"
    testbed = true       # optional: a measurement testbed (simulated acceptance / dummy weights allowed)
    [server]             # launcher = "sglang" | "sim", model_path, tp_size, mem_fraction_static, host, port,
                         # context_length, enable_metrics, api_key, python, sglang_version, extra_args = [...]
    [speculative]        # algorithm, draft_model_path, num_steps, eagle_topk, num_draft_tokens, extra_args
    [env]                # NCCL_* / SGLANG_* variables for the server process
    [sim]                # scenario, seed, time_scale, sglang_version (simulator only)
    [[nodes]]            # multi-node only: host, node_rank, gpus, env, workdir, python, extra_args
                         # (with [server] nnodes, dist_init_addr, node_launcher, gpus_per_node)
    [[gpu_exporters]]    # GPU telemetry of other nodes: node = "node1", url = "http://node1:9400/metrics"
                         # (dcgm-exporter or nvitop-exporter; one table per node)

A suite says what to send it: ``[suite]`` (max_tokens, temperature, repeats, warmup,
concurrency, ignore_eos, api, chat_template, prompts_file) and ``[[prompts]]`` (``text``, or
``messages`` = a chat list; see :mod:`specdash.profile.chat` for how templates are applied).

Validation is strict: an unknown key is an error naming the file, the key and the
nearest valid key (:func:`parse_profile`, :func:`parse_suite`).  Paths may use
``${ENV_VAR}`` and ``~``; ``sim:NAME`` paths name the simulator's built-in virtual models.
Reading files and finding names is :mod:`specdash.profile.files`.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from specdash import bounded as B
from specdash.sglang.launchers import NODE_LAUNCHER_NAMES
from specdash.sglang.versions import resolve_version

#: The ``node_launcher`` values: the names of :data:`specdash.sglang.launchers.NODE_LAUNCHERS`.
NodeLauncherName = Literal[NODE_LAUNCHER_NAMES]  # type: ignore[valid-type]


class ProfileError(Exception):
    """A profile or suite cannot be used: the message says what, where and how to fix it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_path(value: str | None, *, where: str = "") -> str | None:
    """Expand ``${VAR}`` and ``~`` in a path; ``sim:`` paths are returned unchanged.

    Raises:
        ProfileError: a referenced variable is not set.
    """
    if value is None or value.startswith("sim:"):
        return value

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name not in os.environ:
            raise ProfileError(f"{where}: ${{{name}}} is used but not set in the environment; export {name}=…")
        return os.environ[name]

    return os.path.expanduser(_ENV_RE.sub(sub, value))


class ServerSection(_Strict):
    """``[server]``: how the server is started."""

    launcher: Literal["sglang", "sim"] = Field("sglang", description="'sglang' (real) or 'sim' (built-in simulator)")
    model_path: str = Field(description="target model directory (or sim:NAME for the simulator)")
    tp_size: int = Field(1, ge=1, description="--tp-size")
    mem_fraction_static: float | None = Field(None, gt=0, le=1, description="--mem-fraction-static")
    host: str = Field("127.0.0.1", description="--host")
    port: int = Field(30000, ge=0, le=65535, description="--port (0 = pick a free port)")
    context_length: int | None = Field(None, ge=1, description="--context-length")
    enable_metrics: bool = Field(True, description="--enable-metrics (specdash needs /metrics)")
    api_key: str | None = Field(None, description="--api-key; may be ${ENV_VAR}; never written to run files")
    python: str | None = Field(None, description="interpreter for sglang.launch_server (default python3)")
    sglang_version: str | None = Field(None, description="pin the SGLang version judgements use")
    extra_args: list[str] = Field(default_factory=list, description="further SGLang flags, as argv words")
    # Multi-node (SGLang: the same command on every node plus --nnodes / --node-rank / --dist-init-addr;
    # python/sglang/srt/server_args.py, srt/entrypoints/engine.py).  Checked by specdash.profile.nodes.
    nnodes: int | None = Field(None, ge=1, description="--nnodes: machines the server spans (= number of [[nodes]])")
    dist_init_addr: str | None = Field(
        None, description="--dist-init-addr HOST:PORT: node 0's rendezvous address for torch.distributed (every "
        "node connects to it; a port apart from the HTTP port)")
    node_launcher: NodeLauncherName | None = Field(
        None, description="how the nodes are started: 'attach' (you start them, specdash attaches with --url to "
        "node 0; the default), 'ssh' (specdash starts every node with the system ssh client, BatchMode) or "
        "'slurm' (specdash, inside an salloc/sbatch allocation, starts one srun job step per node; hosts are "
        "the allocation's Slurm node names)")
    ssh_options: list[str] = Field(default_factory=list, description="node_launcher = 'ssh': more ssh client "
                                   "options, as argv words (e.g. [\"-p\", \"2222\", \"-i\", \"~/.ssh/cluster\", "
                                   "\"-l\", \"root\"]); BatchMode=yes and no pty are always set")
    slurm_options: list[str] = Field(default_factory=list, description="node_launcher = 'slurm': more srun "
                                     "options for each node's job step, as argv words (e.g. [\"--gpus-per-node=8\", "
                                     "\"--cpus-per-task=32\", \"--overlap\"]); one task on the named node, "
                                     "--kill-on-bad-exit=1 and --unbuffered are always set")
    gpus_per_node: int | None = Field(None, ge=1, description="GPUs on each node (the doctor checks tp x pp against "
                                      "it); a node's own `gpus` wins")


#: A portable environment variable name (POSIX: letters, digits and ``_``, not starting with a digit) — what
#: ``export`` in the ssh node script and every shell accept.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_table(v: Any, where: str) -> Any:
    """An ``[env]`` / ``[nodes.env]`` table with its values as strings (``true`` → ``"1"``) and every name a
    portable variable name (:data:`_ENV_NAME`; not empty, no ``=``, NUL, space, ``;`` …: a process
    environment is ``NAME=value`` C strings, and a node's variables are ``export``-ed by a shell script
    over ssh), no NUL in a value.  Not a dict: returned as it is (pydantic says what it should be).

    Raises:
        ValueError: naming the table, the variable and the fix (shown as the profile's error).
    """
    if not isinstance(v, dict):
        return v
    out = {}
    for k, x in v.items():
        name, value = str(k), (str(int(x)) if isinstance(x, bool) else str(x))
        if not _ENV_NAME.match(name):
            raise ValueError(f"{where} name {name!r} cannot be an environment variable (empty, or holds '=', a NUL "
                             "byte, a space or another character a shell cannot export — a name is letters, digits "
                             "and '_', not starting with a digit): rename it, e.g. NCCL_SOCKET_IFNAME = \"eth0\"")
        if "\x00" in value:
            raise ValueError(f"{where} {name}: the value holds a NUL byte, which no environment variable can "
                             "carry: remove it")
        out[name] = value
    return out


class NodeSection(_Strict):
    """``[[nodes]]``: one machine of a multi-node server (node 0 first; it alone serves the HTTP API)."""

    host: str = Field(min_length=1, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?)$",
                      description="the machine's address or name (node 0's is the API's host): a hostname, IPv4 "
                      "or [IPv6] address — letters, digits, '.', '-', ':' (it goes into URLs and, later, ssh)")
    node_rank: int = Field(ge=0, strict=True, description="--node-rank of this machine: 0 … nnodes-1, each once")
    gpus: int | None = Field(None, ge=1, description="GPUs this node gives the server (default [server] gpus_per_node)")
    env: dict[str, str] = Field(default_factory=dict, description="variables added for this node only, over [env] "
                                "(NCCL_SOCKET_IFNAME, NCCL_IB_HCA, GLOO_SOCKET_IFNAME …)")
    workdir: str | None = Field(None, description="directory the command runs in on this node")
    python: str | None = Field(None, description="interpreter on this node (default [server] python)")
    extra_args: list[str] = Field(default_factory=list, description="SGLang flags for this node only (never model, "
                                  "parallelism or speculative flags: the doctor's NODES check refuses those)")

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, v: Any) -> Any:
        """As ``[env]``'s (:func:`env_table`): this node's variables go to its shell script over ssh."""
        return env_table(v, "[nodes.env]")


class SpeculativeSection(_Strict):
    """``[speculative]``: the speculative-decoding flags."""

    algorithm: str | None = Field(None, description="EAGLE3, EAGLE, NEXTN, STANDALONE, NGRAM, … or 'none'")
    draft_model_path: str | None = None
    # Upper bounds far beyond any useful setting but below what makes SGLang (and the simulator) allocate
    # without end: every step is a draft forward pass, every draft token a verified position per request.
    num_steps: int | None = Field(None, ge=0, le=64, description="0 ≤ steps ≤ 64")
    eagle_topk: int | None = Field(None, ge=0, le=64, description="0 ≤ topk ≤ 64")
    num_draft_tokens: int | None = Field(None, ge=0, le=1024, description="0 ≤ draft tokens ≤ 1024")
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("algorithm")
    @classmethod
    def _none_is_off(cls, v: str | None) -> str | None:
        return None if v is None or v.strip().lower() in ("", "none", "off") else v.strip().upper()


class SimSection(_Strict):
    """``[sim]``: simulator settings (``launcher = "sim"`` only)."""

    scenario: str = Field("healthy", description="scenario name (specdash/sim/scenarios) or a TOML path")
    seed: int = 0
    time_scale: float | None = Field(
        None, gt=0, description=">1 runs faster than real time (default: the scenario's own time_scale)"
    )
    sglang_version: str | None = Field(None, description="SGLang version the simulator emulates")

    def scenario_ref(self, profile: Profile) -> str:
        """The scenario as the simulator's ``--sim-scenario`` expects it (paths made absolute)."""
        ref = self.scenario
        if ref.endswith(".toml") and profile.path is not None:
            p = Path(expand_path(ref, where=f"{profile.path}: sim.scenario"))
            if not p.is_absolute():
                p = profile.path.parent / p
            return str(p)
        return ref


class GpuExporterEntry(_Strict):
    """``[[gpu_exporters]]``: one node's Prometheus GPU exporter (dcgm-exporter, nvitop-exporter),
    read by :mod:`specdash.collect.exporter`."""

    node: str = Field(min_length=1, description="the node's name in the GPU panel (the exporter's own host "
                      "label wins when it has one)")
    url: str = Field(min_length=1, description="http(s)://host:port/metrics, or host[:port] (http, port 9400, "
                     "/metrics implied)")

    @field_validator("node", "url")
    @classmethod
    def _stripped(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("must not be empty")
        return v

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if "://" in v and not v.lower().startswith(("http://", "https://")):
            raise ValueError(f"an exporter is read over http or https, not {v.split('://', 1)[0]}://")
        if any(c.isspace() for c in v):
            raise ValueError("a URL has no spaces")
        hostport = v.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
        port = hostport.rsplit("]", 1)[-1].rpartition(":")[2] if ":" in hostport.rsplit("]", 1)[-1] else ""
        if port and (not port.isdigit() or not 1 <= int(port) <= 65535):
            raise ValueError(f"port {port!r} is not 1–65535 (dcgm-exporter listens on 9400)")
        return v


class Profile(_Strict):
    """A launch profile (see the module docstring for the file format)."""

    name: str
    description: str = ""
    testbed: bool | None = Field(
        None, description="true: a measurement testbed, not a deployment (SGLANG_SIMULATE_ACC_LEN and dummy "
        "weights are expected; the doctor reports them as info instead of errors)")
    server: ServerSection
    speculative: SpeculativeSection | None = None
    env: dict[str, str] = Field(default_factory=dict)
    sim: SimSection = Field(default_factory=SimSection)
    nodes: list[NodeSection] = Field(default_factory=list, description="multi-node: one entry per machine")
    gpu_exporters: list[GpuExporterEntry] = Field(
        default_factory=list, description="GPU exporters of other nodes (the local host is read through NVML)")

    _path: Path | None = PrivateAttr(default=None)

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, v: Any) -> Any:
        """Values as strings (``true`` → ``"1"``), names and values checked (:func:`env_table`)."""
        return env_table(v, "[env]")

    @property
    def path(self) -> Path | None:
        """The file this profile was read from, if any."""
        return self._path

    @property
    def multi_node(self) -> bool:
        """True when the server spans several machines (``[[nodes]]`` or ``nnodes`` > 1)."""
        return bool(self.nodes) or (self.server.nnodes or 1) > 1

    @property
    def num_nodes(self) -> int:
        """Machines the server spans (1 for a single-node profile)."""
        return len(self.nodes) or self.server.nnodes or 1

    def node(self, rank: int) -> NodeSection | None:
        """The ``[[nodes]]`` entry of ``node_rank`` ``rank`` (None: single-node or no such rank)."""
        return next((n for n in self.nodes if n.node_rank == rank), None)

    @property
    def spec_enabled(self) -> bool:
        """True when the profile turns speculation on."""
        return self.speculative is not None and self.speculative.algorithm is not None

    def judged_version(self, cli: str | None = None, server: str | None = None) -> tuple[str, str]:
        """The SGLang version judgements use, with its source: ``cli`` (``--sglang-version``),
        then the profile's pin (``[server] sglang_version``; for the simulator also
        ``[sim] sglang_version``), then the attached ``server``'s ``/server_info.version``,
        then the installed ``sglang`` (real launcher only) — see
        :func:`specdash.sglang.versions.resolve_version`."""
        pin = self.server.sglang_version
        if self.server.launcher == "sim":
            pin = pin or self.sim.sglang_version
        return resolve_version(cli=cli, profile=pin, server=server, installed=self.server.launcher == "sglang")

    def expanded(self) -> Profile:
        """A copy with ``${VAR}``/``~`` expanded in paths, the API key and ``[env]`` values that are a
        whole ``${VAR}`` reference (how ``profile import`` keeps a secret out of the file).

        Raises:
            ProfileError: a variable is not set.
        """
        where = str(self._path or self.name)
        data = self.model_dump()
        data["server"]["model_path"] = expand_path(data["server"]["model_path"], where=f"{where}: server.model_path")
        if data["server"].get("api_key"):
            data["server"]["api_key"] = expand_path(data["server"]["api_key"], where=f"{where}: server.api_key")
        for k, v in (data.get("env") or {}).items():  # a secret kept as a reference: [env] X = "${X}"
            if isinstance(v, str) and v.startswith("${") and v.endswith("}") and "$" not in v[2:]:
                data["env"][k] = expand_path(v, where=f"{where}: env.{k}")
        if data.get("speculative") and data["speculative"].get("draft_model_path"):
            data["speculative"]["draft_model_path"] = expand_path(
                data["speculative"]["draft_model_path"], where=f"{where}: speculative.draft_model_path"
            )
        out = Profile.model_validate(data)
        out._path = self._path
        return out


# --- suites ------------------------------------------------------------------------------------


class SuiteSection(_Strict):
    """``[suite]``: how the prompts are sent."""

    name: str
    description: str = ""
    max_tokens: int = Field(1024, ge=1, le=B.MAX_TOKENS)
    temperature: float = Field(0.0, ge=0, le=100, allow_inf_nan=False)
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling (SGLang sampling_params.top_p)")
    top_k: int | None = Field(None, ge=-1, description="top-k sampling, -1 = off (SGLang sampling_params.top_k)")
    sampling_seed: int | None = Field(None, description="per-request sampling seed (SGLang sampling_params."
                                      "sampling_seed; the chat API's seed)")
    extra_request_body: dict[str, Any] = Field(
        default_factory=dict, description="fields merged into every request as SGLang's bench_serving "
        "--extra-request-body merges them; its sampling_params go into /generate's sampling_params")
    repeats: int = Field(1, ge=1, le=B.MAX_REPEATS)
    warmup: int = Field(1, ge=0, le=B.MAX_WARMUP, description="warm-up requests, excluded from results")
    concurrency: int = Field(1, ge=1, le=B.MAX_CONCURRENCY, description="requests in flight (SGLang's default "
                             "max_running_requests tops out at 4,096)")
    ignore_eos: bool = True
    api: Literal["generate", "chat"] = "generate"
    chat_template: Literal["auto", "none", "require"] = Field(
        "auto", description="api = \"generate\" only: 'auto' renders each prompt with the target's chat template "
        "client-side when its tokenizer directory has one (raw text otherwise, e.g. on the simulator); 'none' "
        "sends the text as written; 'require' fails without a template (specdash/profile/chat.py)")
    prompts_file: str | None = Field(None, description="JSONL file of {text, category}, relative to the suite")

    @field_validator("top_k")
    @classmethod
    def _top_k(cls, v: int | None) -> int | None:
        if v == 0:  # SGLang's SamplingParams.verify: "top_k must be -1 (disable), or at least 1"
            raise ValueError("top_k must be -1 (off) or at least 1, got 0")
        return v


class Message(_Strict):
    """One chat message of a prompt (OpenAI ``{role, content}``)."""

    role: str = Field(min_length=1)
    content: str


class Prompt(_Strict):
    """One prompt of a suite: ``text``, or ``messages`` (a chat; ``text`` is then its first ``user``
    message, what a raw-text suite without a template sends)."""

    text: str = Field(min_length=1)
    messages: list[Message] | None = Field(None, min_length=1, description="a chat: sent as given to the chat "
                                           "API or rendered with the chat template")
    category: str | None = None
    id: str | None = None
    max_tokens: int | None = Field(None, ge=1, le=B.MAX_TOKENS)

    @model_validator(mode="before")
    @classmethod
    def _text_of_messages(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("text") is None and isinstance(data.get("messages"), list):
            user = next((m.get("content") for m in data["messages"] if isinstance(m, dict)
                         and m.get("role") == "user" and isinstance(m.get("content"), str)), None)
            if user is not None:
                data = {**data, "text": user}
            elif data["messages"]:
                roles = ", ".join(sorted({str(m.get("role")) for m in data["messages"] if isinstance(m, dict)}))
                raise ValueError(f"messages has no user message with text content (roles: {roles or 'none'}): a chat "
                                 'prompt needs at least one {role = "user", content = "..."} — its raw-text form, '
                                 "what a suite without a chat template sends — or give the prompt a text")
        return data


class Suite(_Strict):
    """A prompt suite: ``[suite]`` plus ``[[prompts]]`` (and/or a JSONL ``prompts_file``)."""

    suite: SuiteSection
    prompts: list[Prompt] = Field(default_factory=list)
    _path: Path | None = PrivateAttr(default=None)

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.suite.name

    @property
    def path(self) -> Path | None:
        """The file this suite was read from."""
        return self._path


# --- validation --------------------------------------------------------------------------------


def _valid_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names valid at ``loc`` (a pydantic error location) of ``model``."""
    cur: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fld = getattr(cur, "model_fields", {}).get(part)
        if fld is None:
            return []
        ann = fld.annotation
        for cand in getattr(ann, "__args__", ()) or (ann,):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                cur = cand
                break
        else:
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                cur = ann
            else:
                return []
    return list(getattr(cur, "model_fields", {}))


def _format_validation(exc: ValidationError, model: type[BaseModel], path: Path | str) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        dotted = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            valid = _valid_keys(model, loc)
            near = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            lines.append(f"{path}: unknown key {dotted!r}{hint} (valid here: {', '.join(valid)})")
        elif err["type"] == "missing":
            lines.append(f"{path}: missing required key {dotted!r}")
        else:
            lines.append(f"{path}: {dotted}: {err['msg']} (got {err.get('input')!r})")
    return "\n".join(lines)


def parse_profile(data: dict, path: Path | str = "<profile>") -> Profile:
    """Validate a profile dict (and, for ``[[nodes]]``, its multi-node structure:
    :func:`specdash.profile.nodes.node_problems`).

    Raises:
        ProfileError: unknown keys (with the nearest valid key), wrong types, missing keys, a broken
            multi-node structure (ranks, ``nnodes``, ``dist_init_addr``).
    """
    try:
        prof = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(_format_validation(exc, Profile, path)) from None
    from specdash.profile.nodes import node_problems

    if errs := node_problems(prof):
        raise ProfileError("\n".join(f"{path}: {e}" for e in errs))
    prof._path = Path(path) if not str(path).startswith("<") else None
    return prof


def parse_suite(data: dict, path: Path | str = "<suite>") -> Suite:
    """Validate a suite dict and load its ``prompts_file`` (JSONL) if any.

    Raises:
        ProfileError: invalid keys or values, unreadable/invalid JSONL, no prompts.
    """
    try:
        suite = Suite.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(_format_validation(exc, Suite, path)) from None
    real = Path(path) if not str(path).startswith("<") else None
    suite._path = real
    if suite.suite.prompts_file:
        pf = Path(expand_path(suite.suite.prompts_file, where=f"{path}: suite.prompts_file"))
        if not pf.is_absolute() and real is not None:
            pf = real.parent / pf
        from specdash.bounded import PROMPTS_FILE_BYTES, InputError, loads_json, read_bytes

        try:  # a regular file of at most PROMPTS_FILE_BYTES (a FIFO or /dev/zero is refused unread)
            raw = read_bytes(pf, limit=PROMPTS_FILE_BYTES, what="prompts_file")
        except InputError as exc:
            raise ProfileError(f"{path}: {exc}") from None
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start:exc.start + 1].hex()
            raise ProfileError(f"{path}: prompts_file {pf}: unreadable: not UTF-8 text (byte 0x{bad} at "
                               f"offset {exc.start}); save it as UTF-8") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = loads_json(line, what=f"{pf}:{n}")  # nested at most JSON_MAX_DEPTH levels
                suite.prompts.append(Prompt.model_validate(obj if isinstance(obj, dict) else {"text": obj}))
            except (ValueError, ValidationError) as exc:
                raise ProfileError(f"{pf}:{n}: not a prompt object {{\"text\": …, \"category\": …}}: {exc}") from None
    if not suite.prompts:
        raise ProfileError(f"{path}: the suite has no prompts; add [[prompts]] entries or suite.prompts_file")
    return suite
