"""Fake tokenizer and text for the simulator: token counts, output words, prompt categories.

No real tokenizer is loaded (the simulator stays light).  Prompt length is estimated at
~3.6 characters per token plus a BOS token (a tiny Llama served by real SGLang 0.5.14 tokenised
"The quick brown fox jumps over the lazy dog. The server" — 55 characters — into 17
tokens in its ``/generate`` stream).  Output tokens follow that server's recorded structure: greedy ids advance by one in the "hot" range
[1000, 9000) (``output_ids`` 1323, 1324, … there), starting at an id derived from the
seed and the prompt, so the same prompt gives the same text with and without
speculation (lossless, as the golden runs show).  Each id maps to a deterministic
pseudo-word.
"""

from __future__ import annotations

import hashlib
import re

HOT_LO, HOT_HI = 1000, 9000
_SYLLABLES = (
    "ka", "lo", "mi", "ter", "an", "sub", "con", "ex", "val", "ro", "ne", "ist", "ing", "ed", "or",
    "pre", "data", "fl", "ow", "ser", "ver", "ch", "ain", "ut", "re", "al", "ic", "ly", "um", "ent",
)


def _make_table() -> list[str]:
    table = []
    n = len(_SYLLABLES)
    for i in range(HOT_HI - HOT_LO):
        a, b, c = _SYLLABLES[i % n], _SYLLABLES[(i // n) % n], _SYLLABLES[(i // (n * n)) % n]
        word = a + b if i % 4 else a + b + c
        if i % 97 == 13:
            piece = ".\n"
        elif i % 5 == 0:
            piece = word
        else:
            piece = " " + word
        table.append(piece)
    return table


_TABLE = _make_table()


def token_text(token_id: int) -> str:
    """The text piece of an output token id (deterministic; ids outside the hot range map into it)."""
    return _TABLE[(int(token_id) - HOT_LO) % (HOT_HI - HOT_LO)]


def output_id(start: int, i: int) -> int:
    """The ``i``-th (0-based) output token id of a request whose first id is ``start``."""
    return HOT_LO + (start - HOT_LO + i) % (HOT_HI - HOT_LO)


def count_tokens(text: str) -> int:
    """Estimated prompt tokens of ``text`` (BOS included): ``1 + ceil(len / 3.6)``."""
    n = len(text or "")
    return 1 + (-(-n * 10 // 36))


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of the parts that is stable across processes (unlike ``hash``)."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(str(p).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return int.from_bytes(h.digest(), "little")


def first_output_id(seed: int, prompt_key: str) -> int:
    """The first output id for a prompt (depends on the prompt only, not on the seed,
    so runs with different seeds still produce the same greedy text)."""
    return HOT_LO + stable_hash("first", prompt_key) % (HOT_HI - HOT_LO)


def unit_uniform(seed: int, prompt_key: str) -> float:
    """A deterministic uniform in (0, 1) per (seed, prompt)."""
    return (stable_hash("prompt-factor", seed, prompt_key) % (2**52) + 0.5) / 2**52


_CODE = re.compile(
    r"(```|\bdef |\bclass |\bfunction\b|\bpython\b|\bjavascript\b|\btypescript\b|\brust\b|\bjava\b|\bc\+\+|"
    r"\bsql\b|\bcode\b|\bimplement|\balgorithm|\bsort\b|\bsorting\b|\bmerge sort\b|\bcompile|\bregex\b|"
    r"\bapi\b|\bbug\b|\bscript\b|\bprogram\b|\blru\b|\bcache class\b|[{};]\s*$)",
    re.IGNORECASE | re.MULTILINE,
)
_MATH = re.compile(
    r"(\bsolve\b|\bequation|\bcalculate|\bcompute\b|\bintegral|\bderivative|\bprove\b|\btheorem|"
    r"\bprobability|\d+\s*[-+*/^=]\s*\d+)",
    re.IGNORECASE,
)
_WRITING = re.compile(r"(\bstory\b|\bpoem\b|\bessay\b|\bletter\b|\bnarrative|\bfiction)", re.IGNORECASE)


def detect_category(text: str) -> str:
    """A prompt category from its text: ``coding``, ``math``, ``writing`` or ``general``
    (keyword heuristics; the server never sees a suite's own category labels)."""
    t = text or ""
    if _CODE.search(t):
        return "coding"
    if _MATH.search(t):
        return "math"
    if _WRITING.search(t):
        return "writing"
    return "general"


def chat_prompt(messages: list[dict]) -> str:
    """The text a ``<|role|>`` chat template would produce (the golden tiny model's template)."""
    parts = []
    for m in messages or []:
        content = m.get("content", "")
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        parts.append(f"<|{m.get('role', 'user')}|>\n{content}\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)
