"""Prompts that cannot fit the server's context, found before any is sent.

SGLang refuses a request whose input is as long as the context or longer ("The input (N tokens) is
longer than the model's context length (C tokens)", ``srt/managers/tokenizer_manager.py``
``_validate_one_request``, 0.5.x) and cuts ``max_new_tokens`` so that input + output fit
(``_validate_one_request`` again: ``max_new_tokens`` is clamped to the context left, or the request
fails where ``--allow-auto-truncate`` is off and the sum is past it).  A benchmark with such prompts
measures errors, or shorter outputs than asked, with nothing saying why.  :func:`context_problems`
checks every prompt of a suite against ``/server_info`` ``context_length`` with the target's own token
count (:func:`specdash.profile.datasets.token_counter`): exact with the target's tokenizer or on the
simulator — then the run is refused before the first request —, an estimate otherwise (a warning).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: How many prompts a message lists before "… and N more".
SHOWN = 4


@dataclass
class ContextCheck:
    """The outcome: ``too_long`` (prompt index, prompt tokens, max_tokens) of the prompts whose input +
    max_tokens exceed ``context_length`` tokens; ``exact``: counted with the target's tokenizer (or the
    simulator's rule), else estimated; ``method``: the counter's."""

    context_length: int
    exact: bool
    method: str
    too_long: list[tuple[int, int, int]] = field(default_factory=list)

    def message(self, suite_name: str) -> str:
        """One line per finding, the fix last."""
        shown = ", ".join(f"prompt {i} ({n:,} tokens + max_tokens {m:,} = {n + m:,})"
                          for i, n, m in self.too_long[:SHOWN])
        more = f" and {len(self.too_long) - SHOWN} more" if len(self.too_long) > SHOWN else ""
        how = "counted with the target's tokenizer" if self.exact else f"estimated ({self.method})"
        return (f"suite {suite_name}: {len(self.too_long)} prompt(s) do not fit the server's context length of "
                f"{self.context_length:,} tokens (/server_info context_length; prompt tokens {how}): {shown}{more}. "
                "SGLang would refuse them or cut their output. Fix: lower max_tokens (--max-tokens), leave the long "
                "prompts out (--max-input-tokens with --dataset, or edit the suite), or serve a longer context "
                "(--context-length, where the model allows it)")


def context_problems(suite, profile, context_length: int | None, max_tokens: int) -> ContextCheck | None:
    """Check every prompt of ``suite`` (its own ``max_tokens`` where set, else ``max_tokens``) against
    ``context_length`` (tokens; None or < 1: nothing to check → None).  Chat-API suites are counted on
    the prompt text alone (the template adds tokens), so their check is an estimate.

    Returns:
        None when nothing is checked, else a :class:`ContextCheck` (``too_long`` empty when all fit).
    """
    from specdash.profile.datasets import token_counter

    if not isinstance(context_length, int) or isinstance(context_length, bool) or context_length < 1:
        return None
    counter = token_counter(profile)
    exact = counter.method in ("tokenizer", "simulator") and suite.suite.api == "generate"
    out = ContextCheck(context_length, exact, counter.method)
    for i, p in enumerate(suite.prompts):
        m = p.max_tokens or max_tokens
        n = counter.count(p.text)
        if n + m > context_length:
            out.too_long.append((i, n, m))
    return out
