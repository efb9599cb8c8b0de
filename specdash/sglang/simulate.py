"""SGLang's benchmark-only stand-ins for a real model: simulated acceptance and random weights.

Both let SGLang run (and be timed) without a trained draft or real weights, and both make its
numbers say nothing about a real deployment.  Read from the wheels (``pip download --no-deps
sglang==X``):

* ``SGLANG_SIMULATE_ACC_LEN`` — ``srt/environ.py`` declares it ``EnvFloat(-1)`` (off while ≤ 0;
  a value that is not a float is a ``ValueError`` at import); ``srt/speculative/spec_utils.py``
  reads it once at import (``SIMULATE_ACC_LEN``) and, when it is > 0, the EAGLE verify
  (``srt/speculative/eagle_utils.py``) replaces the real verify result with
  ``generate_simulated_accept_index``: every round accepts a length drawn by
  ``_sample_simulated_acc_len`` and clamped to ``[1, steps + 1]`` — ``SGLANG_SIMULATE_ACC_METHOD``
  ``match-expected`` (the default from 0.5.11; ``multinomial`` on 0.5.10) draws ⌊L⌋ or ⌈L⌉ so the
  mean is L — and the tokens are overwritten with id 100 (``predict.fill_(100)``).  Accept length,
  accept rate and the output text are then the variable's, not the model's.
* ``--load-format dummy`` — ``srt/model_loader/loader.py`` ``DummyModelLoader`` fills every
  parameter with random values.  The draft follows ``--load-format`` unless
  ``--speculative-draft-load-format`` is given (``srt/managers/scheduler.py`` sets ``load_format``
  to it before it builds the draft worker).

:func:`acceptance_simulated` is the one test for "acceptance was simulated" (the bench's and the
dashboard's ``acceptance_simulated`` summary field, the doctor's SIMULATED rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "SIMULATE_ACC_LEN_ENV",
    "SIMULATE_ACC_METHOD_ENV",
    "acceptance_simulated",
    "dummy_weights",
    "load_format",
    "parse_simulate_acc_len",
    "simulate_acc_len",
]

#: The variable that replaces every verify result with a drawn accept length (``environ.py``).
SIMULATE_ACC_LEN_ENV = "SGLANG_SIMULATE_ACC_LEN"
#: How the length is drawn: ``match-expected`` (0.5.11+ default) or ``multinomial``.
SIMULATE_ACC_METHOD_ENV = "SGLANG_SIMULATE_ACC_METHOD"


def parse_simulate_acc_len(value: str | None) -> float | None:
    """The accept length SGLang simulates for ``value`` (None: unset, or ≤ 0 = off).

    Raises:
        ValueError: SGLang's own ``'"abc" is not a valid float value'`` (``EnvFloat.parse``).
    """
    if value is None:
        return None
    try:
        x = float(str(value).strip())
    except ValueError:
        raise ValueError(f'"{value}" is not a valid float value') from None
    return x if x > 0 else None


def simulate_acc_len(*envs: Mapping[str, str] | None) -> float | None:
    """The simulated accept length in effect, or None.

    ``envs`` in order of precedence: the first mapping that holds ``SGLANG_SIMULATE_ACC_LEN``
    decides (pass the profile's ``[env]`` before the environment the server inherits: a launch
    applies the profile's variables over it).  A value SGLang cannot read counts as None here.
    """
    for env in envs:
        if env and SIMULATE_ACC_LEN_ENV in env:
            try:
                return parse_simulate_acc_len(env[SIMULATE_ACC_LEN_ENV])
            except ValueError:
                return None
    return None


def acceptance_simulated(*envs: Mapping[str, str] | None) -> bool:
    """True when ``SGLANG_SIMULATE_ACC_LEN`` is set to a length SGLang simulates (> 0) in the first
    of ``envs`` that sets it — e.g. ``acceptance_simulated(profile.env, os.environ)`` for a server
    specdash launches (the child inherits ``os.environ``, the profile's ``[env]`` wins).  SGLang's
    own "off" value (-1, its default, or any value ≤ 0) is not simulated.
    """
    return simulate_acc_len(*envs) is not None


def load_format(flags: Mapping[str, Any], role: str) -> str | None:
    """The load format SGLang uses for ``role`` (``"target"`` | ``"draft"``) given canonical server
    flags: the draft's own ``--speculative-draft-load-format`` wins, else ``--load-format``."""
    fmt = flags.get("--load-format")
    if role == "draft" and flags.get("--speculative-draft-load-format") not in (None, True, False):
        fmt = flags.get("--speculative-draft-load-format")
    return str(fmt).strip().lower() if fmt not in (None, True, False) else None


def dummy_weights(flags: Mapping[str, Any], role: str) -> bool:
    """True when SGLang fills ``role``'s weights with random values (load format ``dummy``)."""
    return load_format(flags, role) == "dummy"
