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
``allow_abbrev``).  Environment variables are secret when their *name* contains one of
:data:`SECRET_ENV_MARKERS` (``HF_TOKEN``, ``OPENAI_API_KEY``, …).  Hidden values become
:data:`MASK`.
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
#: Upper-case substrings that mark an environment variable's name as secret.
SECRET_ENV_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")

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
    """True when the environment variable ``name`` looks secret (see :data:`SECRET_ENV_MARKERS`)."""
    upper = name.upper()
    return any(m in upper for m in SECRET_ENV_MARKERS)


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
    """A copy of ``env`` with the values of secret-looking variables replaced by :data:`MASK`."""
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
