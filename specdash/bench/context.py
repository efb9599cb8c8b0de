"""Prompts that cannot fit the server's context, found before any is sent.

SGLang refuses a request whose input is as long as the context or longer ("The input (N tokens) is
longer than the model's context length (C tokens)", ``srt/managers/tokenizer_manager.py``
``_validate_one_request``, 0.5.x) and cuts ``max_new_tokens`` so that input + output fit
(``_validate_one_request`` again: ``max_new_tokens`` is clamped to the context left, or the request
fails where ``--allow-auto-truncate`` is off and the sum is past it).  A benchmark with such prompts
measures errors, or shorter outputs than asked, with nothing saying why.  :func:`context_problems`
checks every prompt of a suite against the server's context length with the target's own token count
(:func:`specdash.profile.datasets.token_counter`): exact with the target's tokenizer or on the simulator —
then the run is refused before the first request —, an estimate otherwise (a warning).

The context length (:func:`context_limit`): ``/server_info`` ``context_length`` when the server was started
with ``--context-length``; otherwise — real SGLang leaves it null then (0.5.14's ``/server_info``) — the
length SGLang derived from the model's own ``config.json`` (:func:`specdash.checkpoint.reader.derived_context_length`,
SGLang's ``get_context_length``), read from the target's directory (the launched profile's ``model_path``,
or the ``model_path`` ``/server_info`` names when it is a directory here); else ``/server_info``
``max_req_input_len`` + 6 (the scheduler's ``max_req_input_len = max_req_len − 5`` with ``max_req_len =
context − 1``, ``managers/tp_worker.py``).  Speculation reserves draft slots: SGLang's ``TokenizerManager``
adds ``reserve_input_token_num`` = ``speculative_num_draft_tokens`` (0 without speculation) to the input
before both of its checks, refusing ``input + reserve ≥ context`` and ``input + reserve + max_new_tokens ≥
context`` (``_validate_one_request``, ``managers/tokenizer_manager.py``, 0.5.x) — so a prompt fits when
prompt + max_tokens + draft slots ≤ context − 1 (:func:`draft_reserve`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: How many prompts a message lists before "… and N more".
SHOWN = 4


#: Where :func:`context_limit` found the context length, as messages and the manifest name it.
SERVER_SOURCE = "/server_info context_length"
CONFIG_SOURCE = "the model's config.json, as SGLang derives it (get_context_length)"
SCHEDULER_SOURCE = "/server_info max_req_input_len + 6"


def context_limit(info: dict | None, profile=None) -> tuple[int | None, str]:
    """``(context length in tokens, where it came from)`` for the checks of this module (see the module
    docstring for the order); ``(None, "")`` when nothing says."""
    from specdash.checkpoint.reader import derived_context_length, peek_config

    info = info if isinstance(info, dict) else {}
    v = info.get("context_length")
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v, SERVER_SOURCE
    paths = []
    if isinstance(info.get("model_path"), str):
        paths.append(info["model_path"])
    model = getattr(getattr(profile, "server", None), "model_path", None)
    if isinstance(model, str) and model != "(attached)":
        paths.append(model)
    for path in paths:
        try:
            n = derived_context_length(peek_config(path))
        except Exception:  # a config of any shape: the derivation is a best effort, never a failure
            n = None
        if n:
            return n, CONFIG_SOURCE
    m = info.get("max_req_input_len")
    if isinstance(m, int) and not isinstance(m, bool) and m > 0:
        return m + 6, SCHEDULER_SOURCE
    return None, ""


def draft_reserve(info: dict | None, profile=None) -> int:
    """The draft slots SGLang reserves per request: ``speculative_num_draft_tokens`` when a speculative
    algorithm runs (``/server_info``'s effective values, else the profile's), else 0 (``TokenizerManager``
    ``reserve_input_token_num``)."""
    info = info if isinstance(info, dict) else {}
    algo, n = info.get("speculative_algorithm"), info.get("speculative_num_draft_tokens")
    if "speculative_algorithm" not in info and profile is not None:
        spec = getattr(profile, "speculative", None)
        algo = getattr(spec, "algorithm", None)
        n = getattr(spec, "num_draft_tokens", None)
    if not algo or str(algo).upper() == "NONE":
        return 0
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 4096 else 0


@dataclass
class ContextCheck:
    """The outcome: ``too_long`` (prompt index, prompt tokens, max_tokens) of the prompts whose prompt +
    max_tokens + ``reserve`` draft slots reach ``context_length`` tokens (SGLang refuses ``≥``); ``exact``:
    counted with the target's tokenizer (or the simulator's rule), else estimated; ``method``: the
    counter's; ``source``: where the context length came from (:func:`context_limit`)."""

    context_length: int
    exact: bool
    method: str
    too_long: list[tuple[int, int, int]] = field(default_factory=list)
    reserve: int = 0
    source: str = SERVER_SOURCE

    def message(self, suite_name: str) -> str:
        """One line per finding, the fix last."""
        slots = f" + {self.reserve:,} draft slots" if self.reserve else ""
        shown = ", ".join(f"prompt {i} ({n:,} tokens + max_tokens {m:,}{slots} = {n + m + self.reserve:,})"
                          for i, n, m in self.too_long[:SHOWN])
        more = f" and {len(self.too_long) - SHOWN} more" if len(self.too_long) > SHOWN else ""
        how = "counted with the target's tokenizer" if self.exact else f"estimated ({self.method})"
        return (f"suite {suite_name}: {len(self.too_long)} prompt(s) do not fit the server's context length of "
                f"{self.context_length:,} tokens ({self.source}; SGLang refuses prompt + max_tokens"
                f"{' + draft slots' if self.reserve else ''} ≥ context; prompt tokens {how}): {shown}{more}. "
                "SGLang would refuse them or cut their output. Fix: lower max_tokens (--max-tokens), leave the long "
                "prompts out (--max-input-tokens with --dataset, or edit the suite), or serve a longer context "
                "(--context-length, where the model allows it)")


def context_problems(suite, profile, context_length: int | None, max_tokens: int, *, reserve: int = 0,
                     source: str = SERVER_SOURCE) -> ContextCheck | None:
    """Check every prompt of ``suite`` (its own ``max_tokens`` where set, else ``max_tokens``) against
    ``context_length`` (tokens; None or < 1: nothing to check → None), ``reserve`` draft slots added to each
    (:func:`draft_reserve`); a prompt is too long when prompt + max_tokens + reserve ≥ context_length, as
    SGLang refuses it.  Chat-API suites are counted on the prompt text alone (the template adds tokens),
    so their check is an estimate.

    Returns:
        None when nothing is checked, else a :class:`ContextCheck` (``too_long`` empty when all fit).
    """
    from specdash.profile.datasets import token_counter

    if not isinstance(context_length, int) or isinstance(context_length, bool) or context_length < 1:
        return None
    counter = token_counter(profile)
    exact = counter.method in ("tokenizer", "simulator") and suite.suite.api == "generate"
    out = ContextCheck(context_length, exact, counter.method, reserve=reserve, source=source)
    for i, p in enumerate(suite.prompts):
        m = p.max_tokens or max_tokens
        n = counter.count(p.text)
        if n + m + reserve >= context_length:
            out.too_long.append((i, n, m))
    return out
