"""SGLang's own argument checks, run before a launch in the Python that will run SGLang.

:func:`run_argcheck` starts ``<python> argcheck_child.py`` (a self-contained script beside this module:
it imports nothing of specdash) in its own process group, hands it the exact argv on stdin (never on a
command line: the argv may hold ``--api-key``), and waits at most ``timeout`` seconds (then the whole
group is killed).  The child runs the release's ``prepare_server_args(argv)`` (argparse, then the
resolution hooks of ``srt/arg_groups/``: speculative, parallelism, memory, CUDA graphs, …) and
``check_server_args()`` (LoRA, parallel sizes), which is what ``python -m sglang.launch_server`` does
before any weights load (``srt/entrypoints/engine.py``), with no GPU allocation and no download
(``HF_HUB_OFFLINE=1``).  The result is an :class:`ArgCheck`: ``ok`` with the values SGLang resolved,
``refused`` with SGLang's exception, message and the source line that raised it, or ``unavailable`` /
``timeout`` with the reason.

:func:`sglang_python` finds the interpreter: the node's or ``[server] python``, else ``python3`` on
``PATH`` (what the launch runs), else this interpreter; one whose ``sglang`` distribution is installed
(read from its metadata, a fraction of a second).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CHILD = Path(__file__).resolve().parent / "argcheck_child.py"
MARK = "SPECDASH_ARGCHECK "
#: Seconds one check may take (torch and SGLang imports included; ≈ 5–15 s on a loaded host).
#: ``$SPECDASH_ARGCHECK_TIMEOUT`` overrides it.
DEFAULT_TIMEOUT_S = float(os.environ.get("SPECDASH_ARGCHECK_TIMEOUT", "90"))
#: Modules SGLang's parser imports at module level but never calls while parsing; stood in for only when
#: not installed (a CPU host, CI), said in :attr:`ArgCheck.stubbed`.
#: (Only modules whose absence breaks the import: optional ones SGLang probes for, such as flashinfer or
#: cuda-python, are never stood in for, so its own fall-backs run.)
STUBS = ("triton", "torchvision", "IPython", "partial_json_parser", "sentencepiece")
#: ServerArgs fields read back after resolution (what the server will use).
FIELDS = ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
          "speculative_num_draft_tokens", "speculative_adaptive", "max_running_requests", "page_size",
          "attention_backend", "mem_fraction_static", "chunked_prefill_size", "tp_size", "pp_size", "dp_size",
          "context_length", "cuda_graph_max_bs", "cuda_graph_config", "disable_overlap_schedule", "device",
          "enable_lora", "max_loras_per_batch")


@dataclass
class ArgCheck:
    """The outcome of one run of SGLang's argument checks.

    ``status``: ``ok`` | ``refused`` | ``unavailable`` (SGLang not importable there, or no Python) |
    ``timeout`` | ``error`` (the child gave no result); ``python``: the interpreter; ``sglang_version``;
    ``exception`` / ``message`` / ``where`` (``sglang/….py:line in func``) for a refusal or an import failure;
    ``argparse_error``: the ``error: …`` line argparse printed (exit 2); ``resolved``: ServerArgs field →
    the value SGLang will use; ``warnings``: WARNING lines SGLang logged while resolving; ``stubbed``:
    modules stood in for; ``seconds``: wall time, of which ``import_seconds`` went to importing SGLang's
    ``srt.server_args`` (torch included) in the child and ``stage_seconds`` to each of SGLang's steps after it
    (``prepare_server_args``, ``resolve_once``, ``check_server_args``; s), ``modules_imported_while_checking``
    the modules those steps imported on their own; ``standins``: the modules asked to be stood in for even where
    installed (``$SPECDASH_ARGCHECK_STANDIN``: comma-separated top-level names); ``device_added`` /
    ``gpu_memory_assumed``: the CUDA device was emulated (no GPU visible) and its memory assumed.
    """

    status: str
    python: str | None = None
    sglang_version: str | None = None
    exception: str | None = None
    message: str | None = None
    where: str | None = None
    argparse_error: str | None = None
    resolved: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    stubbed: list[str] = field(default_factory=list)
    seconds: float | None = None
    import_seconds: float | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    modules_imported_while_checking: int | None = None
    standins: list[str] = field(default_factory=list)
    device_added: bool = False
    gpu_memory_assumed: bool = False
    note: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def installed_sglang(python: str, timeout: float = 20.0, env: dict[str, str] | None = None) -> str | None:
    """The ``sglang`` version installed for ``python`` (its distribution metadata; nothing imported), or None.
    ``env``: the launch's environment additions (a ``PYTHONPATH`` there counts)."""
    code = ("import importlib.metadata as m\ntry:\n print(m.version('sglang'))\nexcept m.PackageNotFoundError:\n"
            " print('')")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL, env=dict(os.environ) | dict(env or {}))
    except (OSError, subprocess.TimeoutExpired):
        return None
    v = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    return v or None


def sglang_python(preferred: str | None, env: dict[str, str] | None = None) -> tuple[str | None, str | None,
                                                                                   list[str]]:
    """``(python, sglang version, tried)``: the first of ``preferred`` (a node's or ``[server] python``),
    ``python3`` on ``PATH``, this interpreter whose ``sglang`` is installed; ``(None, None, tried)`` when none."""
    tried: list[str] = []
    cands = [preferred] if preferred else []
    cands += ["python3", sys.executable] if not preferred else []
    seen: set[str] = set()
    for c in cands:
        path = shutil.which(c) or (c if Path(c).exists() else None)
        if path is None:
            tried.append(f"{c} (not found)")
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        v = installed_sglang(path, env=env)
        tried.append(f"{path} ({'sglang ' + v if v else 'no sglang'})")
        if v:
            return path, v, tried
    return None, None, tried


def run_argcheck(python: str, argv: list[str], env: dict[str, str] | None = None, *,
                 gpu_memory_mib: float | None = None, timeout: float | None = None,
                 stubs: tuple[str, ...] = STUBS, fields: tuple[str, ...] = FIELDS) -> ArgCheck:
    """Run SGLang's own parsing and validation of ``argv`` (server flags, no program) in ``python``.

    Args:
        python: the interpreter that has SGLang.
        argv: the flags ``sglang.launch_server`` will get, exactly (``--model-path …``).
        env: the launch's environment additions (the profile's ``[env]``), put over this process's.
        gpu_memory_mib: memory of one GPU (answers SGLang's ``get_device_memory_capacity`` so no CUDA context
            is created); None: 80 GB assumed when no GPU is visible, else SGLang's own query.
        timeout: seconds before the child's process group is killed (``status = "timeout"``); None:
            ``$SPECDASH_ARGCHECK_TIMEOUT``, else :data:`DEFAULT_TIMEOUT_S`.

    Returns:
        An :class:`ArgCheck`; never raises for a refusal, a missing interpreter or a hang.
    """
    if timeout is None:
        timeout = float(os.environ.get("SPECDASH_ARGCHECK_TIMEOUT", DEFAULT_TIMEOUT_S))
    e = dict(os.environ) | dict(env or {})
    e.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    e.setdefault("TOKENIZERS_PARALLELISM", "false")
    standins = [r.strip() for r in os.environ.get("SPECDASH_ARGCHECK_STANDIN", "").split(",") if r.strip()]
    req = json.dumps({"argv": [str(a) for a in argv], "gpu_memory_mib": gpu_memory_mib, "stubs": list(stubs),
                      "fields": list(fields), "standins": standins})
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([python, str(CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=e, start_new_session=True)
    except OSError as exc:
        return ArgCheck("unavailable", python, note=f"{python} cannot be started: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(req, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return ArgCheck("timeout", python, seconds=round(time.monotonic() - t0, 1),
                        note=f"SGLang's argument check did not finish within {timeout:g} s and was stopped "
                             "($SPECDASH_ARGCHECK_TIMEOUT raises the bound)")
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        tail = (err or out).strip().splitlines()[-3:]
        return ArgCheck("error", python, seconds=round(time.monotonic() - t0, 1),
                        note=f"the check gave no result (exit {proc.returncode}): {' | '.join(tail)[:500]}")
    try:
        data = json.loads(line[len(MARK):])
    except ValueError as exc:
        return ArgCheck("error", python, note=f"unreadable result: {exc}")
    res = ArgCheck(**{k: v for k, v in data.items() if k in ArgCheck.__dataclass_fields__ and k != "standins"}, standins=standins)
    res.seconds = round(time.monotonic() - t0, 1)
    if data.get("exception") == "SystemExit":
        m = [ln for ln in err.splitlines() if ": error: " in ln]
        res.argparse_error = m[-1].split(": error: ", 1)[1].strip() if m else None
        res.message = res.argparse_error or res.message
    if res.status == "unavailable":
        res.note = f"sglang cannot be imported by {python}: {data.get('exception')}: {(data.get('message') or '')[:300]}"
    return res


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


_FLAG_RE = re.compile(r"--[a-z0-9][a-z0-9-]*|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def flags_named(message: str, argv: list[str], dest_to_flag: dict[str, str]) -> list[str]:
    """The flags of ``argv`` a refusal message names: ``--flag`` spellings, ServerArgs field names
    (``speculative_num_draft_tokens`` → its flag), and for LoRA messages the LoRA flags given."""
    given = [a.split("=", 1)[0] for a in argv if a.startswith("--")]
    out: list[str] = []
    for tok in _FLAG_RE.findall(message or ""):
        flag = tok if tok.startswith("--") else dest_to_flag.get(tok)
        if flag and flag in given and flag not in out:
            out.append(flag)
    low = (message or "").lower()
    for key in ("lora", "adaptive", "dflash", "eagle", "speculative"):
        if key in low:
            out += [g for g in given if key in g and g not in out and (key != "speculative" or not out)]
    return out


__all__ = ["CHILD", "DEFAULT_TIMEOUT_S", "FIELDS", "STUBS", "ArgCheck", "flags_named", "installed_sglang",
           "run_argcheck", "sglang_python"]
