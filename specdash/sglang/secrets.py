"""What counts as a secret of an SGLang launch, and the one way to hide it.

Every place that shows or stores what was launched or what the server said goes through
here: a :class:`~specdash.sglang.launchspec.LaunchSpec`'s rendering, the client's error
messages (:class:`~specdash.sglang.client.SGLangClient`), the server log copied by
:class:`~specdash.sglang.process.ServerProcess`, the simulator's ``launch_command`` and
the profile data written to a run's manifest.

Secret flags are SGLang's ``--api-key`` and ``--admin-api-key`` (``ServerArgs.api_key`` /
``admin_api_key``; SGLang prints both in its ``server_args=ServerArgs(…)`` start-up log
line).  A flag is recognised as argparse would accept it: ``--flag value``,
``--flag=value``, and unique abbreviations (``--api-k value``; ``ArgumentParser``'s
``allow_abbrev``).  Environment variables are hidden by default: a value is shown only when its
name is known to be harmless (:data:`SHOWN_ENV_PREFIXES` / :data:`SHOWN_ENV_NAMES`: NCCL, CUDA,
PyTorch, SGLang tuning knobs …) *and* does not contain one of :data:`SECRET_ENV_MARKERS`
(``HF_TOKEN``, ``SGLANG_API_KEY``, …) — a name pattern alone misses ``DB_PASS`` or ``WANDB_CREDS``.
Hidden values become :data:`MASK`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "MASK",
    "SECRET_ENV_MARKERS",
    "SECRET_FLAGS",
    "is_secret_env",
    "is_secret_flag",
    "redact_argv",
    "redact_bytes",
    "redact_env",
    "redact_text",
    "redact_url",
    "secret_values",
]

#: What a hidden value is replaced with.
MASK = "***"
#: SGLang flags whose value is a credential.
SECRET_FLAGS = ("--api-key", "--admin-api-key")
#: Upper-case substrings that mark an environment variable's name as secret (never shown).
SECRET_ENV_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
#: Name prefixes of variables whose values are tuning knobs, not credentials (shown).
SHOWN_ENV_PREFIXES = ("NCCL_", "CUDA_", "NVSHMEM_", "TORCH_", "PYTORCH_", "SGLANG_", "SGL_", "OMP_", "MKL_",
                      "TRITON_", "FLASHINFER_", "NVIDIA_", "UCX_", "GLOO_", "TORCHINDUCTOR_", "HF_HUB_",
                      "TRANSFORMERS_", "TOKENIZERS_", "OUTLINES_", "XGRAMMAR_")
#: Single names shown as they are.
SHOWN_ENV_NAMES = frozenset({"HF_HOME", "HF_DATASETS_OFFLINE", "PYTHONPATH", "PYTHONUNBUFFERED", "PATH",
                             "LD_LIBRARY_PATH", "TZ", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME"})

_MASK_BYTES = MASK.encode()
_USERINFO = re.compile(r"//[^/@]*@")


def is_secret_flag(word: str) -> bool:
    """True when ``word`` (a ``--flag``, without ``=value``) names a secret flag as SGLang's
    argparse would read it: the full name, an abbreviation of it, or with ``_`` for ``-``."""
    if not word.startswith("--") or len(word) <= 2:
        return False
    name = "--" + word[2:].replace("_", "-")
    return any(flag.startswith(name) for flag in SECRET_FLAGS)


def is_secret_env(name: str) -> bool:
    """True when the environment variable ``name``'s value must not be shown: its name holds a
    :data:`SECRET_ENV_MARKERS` word, or it is not a known-harmless knob (deny by default, see the
    module docstring)."""
    upper = name.upper()
    if any(m in upper for m in SECRET_ENV_MARKERS):
        return True
    return not (upper.startswith(SHOWN_ENV_PREFIXES) or upper in SHOWN_ENV_NAMES)


def secret_values(argv: Sequence[str]) -> list[str]:
    """The non-empty values of the secret flags in ``argv`` (both ``--flag v`` and
    ``--flag=v`` forms), in order."""
    out: list[str] = []
    for i, w in enumerate(argv):
        name, eq, value = w.partition("=")
        if not is_secret_flag(name):
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        if value:
            out.append(value)
    return out


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A copy of ``argv`` with the values of secret flags replaced by :data:`MASK`
    (``--api-key v`` → ``--api-key ***``; ``--api-key=v`` → ``--api-key=***``)."""
    out = list(argv)
    for i, w in enumerate(out):
        name, eq, _ = w.partition("=")
        if not is_secret_flag(name):
            continue
        if eq:
            out[i] = f"{name}={MASK}"
        elif i + 1 < len(out):
            out[i + 1] = MASK
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with every value :func:`is_secret_env` hides replaced by :data:`MASK`."""
    return {k: (MASK if is_secret_env(k) else v) for k, v in env.items()}


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each non-empty secret replaced by :data:`MASK`."""
    for s in secrets:
        if s and s in text:
            text = text.replace(s, MASK)
    return text


def redact_bytes(data: bytes, secrets: Iterable[bytes]) -> bytes:
    """:func:`redact_text` for raw bytes (server output as read from its pipe)."""
    for s in secrets:
        if s and s in data:
            data = data.replace(s, _MASK_BYTES)
    return data


def redact_url(url: str) -> str:
    """``url`` with its userinfo (``//user:password@``) replaced by ``//***@``."""
    return _USERINFO.sub(f"//{MASK}@", url)
