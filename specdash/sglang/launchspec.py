"""What starts an SGLang server and how it may be shown: argv, environment, spec resolution.

A :class:`LaunchSpec` is built by :func:`specdash.profile.build_launch` and started by
:class:`~specdash.sglang.process.ServerProcess`; its ``redacted_*`` views and
:meth:`LaunchSpec.shell_line` are what screens, manifests and ``profile show`` print
(secrets hidden by :mod:`specdash.sglang.secrets`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from specdash.sglang.secrets import redact_argv, redact_env
from specdash.sglang.speculative import SpecResolution


@dataclass
class LaunchSpec:
    """Everything needed to start a server from a profile, and to show it.

    ``argv``/``env``: exactly what is executed (``env`` holds only the profile's
    variables; the child also inherits the caller's environment).  ``spec``: the
    speculative resolution (asked vs effective).  ``base_url``: where it will listen.
    """

    argv: list[str]
    env: dict[str, str]
    spec: SpecResolution
    host: str
    port: int
    api_key: str | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the server."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def redacted_argv(self) -> list[str]:
        """``argv`` with secret flag values replaced by ``***``
        (:func:`~specdash.sglang.secrets.redact_argv`)."""
        return redact_argv(self.argv)

    def redacted_env(self) -> dict[str, str]:
        """``env`` with values of secret-looking variables replaced by ``***``
        (:func:`~specdash.sglang.secrets.redact_env`)."""
        return redact_env(self.env)

    def shell_line(self) -> str:
        """A copy-pasteable, redacted shell line (env assignments, then argv)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.redacted_env().items())
        cmd = " ".join(shlex.quote(w) for w in self.redacted_argv())
        return f"{env} {cmd}".strip()

