"""SGLang's runtime adaptive speculation (``--speculative-adaptive``) as data, by release.

Everything here restates SGLang's own code (read from the PyPI wheels, ``pip download
--no-deps sglang==X``): ``sglang/srt/speculative/adaptive_spec_params.py`` (the config
loader, ``AdaptiveStepSlot`` / ``AdaptiveSpeculativeParams``: EMA, warm-up, update interval,
hysteresis, batch-size routing), ``adaptive_runtime_state.py`` (``AdaptiveController``: one
runtime state per candidate step count, switched atomically), ``eagle_worker_v2.py``
(``build_adaptive_runtime_state`` / ``apply_runtime_state`` and their log lines) and
``arg_groups/speculative_hook.py`` (``_maybe_disable_adaptive``,
``_init_adaptive_speculative_params``).  The version differences are rows of
:data:`specdash.sglang.versions.FEATURES` (``adaptive_*``).

How it works, in SGLang's terms:

* At start-up the worker registers the launch runtime state and builds (captures CUDA
  graphs for) one more per other candidate step count:
  ``Built adaptive runtime state steps=N: elapsed=…s, mem=…GB``.  A state for ``N`` steps
  verifies ``N + 1`` draft tokens (top-k 1 only).  From 0.5.13 a state's CUDA graphs cover
  only the captured batch sizes whose slot lists that step count.
* 0.5.11–0.5.12 read one flat config (``candidate_steps``, ``ema_alpha``, ``update_interval``,
  ``warmup_batches``, ``down_hysteresis``, ``up_hysteresis``).  From 0.5.13 the config is
  keyed by batch size (``{"1": {...}, "8": {...}}``; non-digit top-level keys are shared by
  every slot); each decode batch is padded to the next captured CUDA-graph batch size and
  routed to the slot with the largest key ≤ that size (the smallest slot below all keys).
* Each slot keeps an EMA of the accepted drafts per request (``ema_accept_len``, bonus token
  not counted), starting at ``steps − 1``; after ``warmup_batches`` verify batches it
  re-decides every ``update_interval`` batches: step down while ``ema ≤ prev − 0.5 +
  down_hysteresis``, else up while ``ema > cur − 0.5 + up_hysteresis``.
* From 0.5.14 a candidate may be 0 (no drafting: a plain decode through the verify graph);
  the EMA is frozen at steps 0 and the next decision probes one step up.
"""

from specdash.sglang.adaptive.config import *  # noqa: F403
from specdash.sglang.adaptive.config import __all__ as _config_all
from specdash.sglang.adaptive.launch import *  # noqa: F403
from specdash.sglang.adaptive.launch import __all__ as _launch_all
from specdash.sglang.adaptive.policy import *  # noqa: F403
from specdash.sglang.adaptive.policy import __all__ as _policy_all

__all__ = sorted([*_config_all, *_launch_all, *_policy_all])
