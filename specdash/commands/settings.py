"""Defaults for the options people repeat, from the environment or a config file.

Precedence: the command line, then the environment, then the config file, then the built-in default.

==================  =========================  ======================  ==========================================
option              environment                config key              used by
==================  =========================  ======================  ==========================================
``--out DIR``       ``SPECDASH_OUT``           ``out``                 ``--bench``, ``tune``
``--suite S``       ``SPECDASH_SUITE``         ``suite``               ``--bench`` / dashboard (not with
                                                                       ``--dataset``), ``tune``
``--sglang-version``  ``SPECDASH_SGLANG_VERSION``  ``sglang_version``  ``--bench``, ``doctor``, ``profile show``
``--gpu-exporter``  ``SPECDASH_GPU_EXPORTER``  ``gpu_exporter``        ``--bench`` / dashboard (NODE=URL, several
                    (space- or comma-separated)  (a list)                in the environment separated by spaces or
                                                                       commas)
==================  =========================  ======================  ==========================================

The config file is ``$SPECDASH_CONFIG``, else ``${XDG_CONFIG_HOME:-~/.config}/specdash/config.toml``; its
options sit in a ``[defaults]`` table::

    [defaults]
    out = "/data/specdash-runs"
    suite = "coding"
    sglang_version = "0.5.23"
    gpu_exporter = ["node1=http://node1:9400/metrics"]

No secret is read from it: an API key stays in ``SGLANG_API_KEY`` (or ``--api-key``), never on disk.
Only :mod:`tomllib` is imported (``specdash --help`` stays fast).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from specdash.commands.errors import UsageError

#: config key → (environment variable, is a list)
OPTIONS: dict[str, tuple[str, bool]] = {
    "out": ("SPECDASH_OUT", False),
    "suite": ("SPECDASH_SUITE", False),
    "sglang_version": ("SPECDASH_SGLANG_VERSION", False),
    "gpu_exporter": ("SPECDASH_GPU_EXPORTER", True),
}
#: keys that must never be in the file (secrets stay out of files and argv)
_SECRET_KEYS = {"api_key", "api-key", "token", "password"}


def config_path() -> Path:
    """The config file read (it need not exist)."""
    if os.environ.get("SPECDASH_CONFIG"):
        return Path(os.path.expanduser(os.environ["SPECDASH_CONFIG"]))
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "specdash" / "config.toml"


def _from_file() -> dict[str, Any]:
    import tomllib

    path = config_path()
    if not path.is_file():
        if os.environ.get("SPECDASH_CONFIG"):
            raise UsageError(f"SPECDASH_CONFIG={os.environ['SPECDASH_CONFIG']}: no such file")
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"config file {path}: cannot be read ({exc}); fix it or set SPECDASH_CONFIG") from None
    extra = sorted(set(data) - {"defaults"})
    if extra:
        raise UsageError(f"config file {path}: unknown table or key {', '.join(extra)} (options go in [defaults])")
    table = data.get("defaults", {})
    if not isinstance(table, dict):
        raise UsageError(f"config file {path}: defaults must be a table ([defaults])")
    out = {}
    for key, value in table.items():
        if key in _SECRET_KEYS:
            raise UsageError(f"config file {path}: [defaults] {key}: secrets are not read from files; export "
                             "SGLANG_API_KEY instead")
        if key not in OPTIONS:
            raise UsageError(f"config file {path}: [defaults] {key} is not an option read from the config "
                             f"(known: {', '.join(OPTIONS)})")
        is_list = OPTIONS[key][1]
        ok = (isinstance(value, list) and all(isinstance(v, str) and v for v in value)) if is_list \
            else (isinstance(value, str) and value.strip())
        if not ok:
            want = "a list of strings" if is_list else "a non-empty string"
            raise UsageError(f"config file {path}: [defaults] {key} = {value!r}: want {want}")
        out[key] = list(value) if is_list else value
    return out


def defaults(keys: tuple[str, ...] = tuple(OPTIONS)) -> dict[str, Any]:
    """The defaults for ``keys`` from the environment, else the config file (absent keys are left out).

    Raises:
        UsageError: an unreadable config file, an unknown or secret key, a value of the wrong type.
    """
    out = {k: v for k, v in _from_file().items() if k in keys}
    for key in keys:
        env, is_list = OPTIONS[key]
        raw = os.environ.get(env, "").strip()
        if raw:
            out[key] = [p for p in raw.replace(",", " ").split() if p] if is_list else raw
    return out


def fill(args: Any, keys: tuple[str, ...]) -> Any:
    """Set each attribute of ``args`` named in ``keys`` that the command line left None from :func:`defaults`
    (``suite`` not when ``--dataset`` is given: the dataset replaces it).  Returns ``args``."""
    found = defaults(keys)
    for key, value in found.items():
        if key == "suite" and getattr(args, "dataset", None):
            continue
        if getattr(args, key, None) in (None, []):
            setattr(args, key, value)
    return args
