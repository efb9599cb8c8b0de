"""Dataset rows → :class:`~specdash.profile.schema.Prompt` and the seeded sample of them.

A row is a dict (a string is read as ``{"text": …}``).  Its prompt is, in order of the keys found:

* ``prompt`` / ``text``: a string;
* ``messages``: an OpenAI chat list — the first ``user`` message is the raw-text prompt and the
  whole chat is kept (the chat API sends it; a client-side chat template renders it);
* ``conversations``: ShareGPT turns — the first ``human`` (or ``user``) turn, as SGLang's
  ``bench_serving.py`` reads ShareGPT;
* ``turns``: a list of strings, one per user turn — the first one, as vLLM's ``SpecBench`` loader
  (``vllm/benchmarks/datasets/datasets.py``, ``row["turns"][0]``) and AIPerf's single-turn
  ``SpecBenchLoader`` / ``SpeedBenchPublicLoader`` read Spec-Bench and SPEED-Bench.

``category`` (a string) becomes the prompt's category — the per-category acceptance table of the
bench, the report and ``compare`` group by it — and ``id`` (or ``question_id``) its id.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from specdash.profile.datasets.tokens import TokenCounter
from specdash.profile.schema import Prompt

PROMPT_KEYS = ("prompt", "text", "messages", "conversations", "turns")
"""The keys a row's prompt is read from (see the module docstring)."""
_MAX_SHOWN = 6
HINT = ("expected ShareGPT JSON (a list of {\"conversations\": [{\"from\": \"human\", \"value\": …}, …]}), "
        "JSONL/Parquet rows with \"prompt\", \"text\", \"messages\" or \"turns\" (and optionally \"category\"), "
        "a Hugging Face dataset directory or hub id, spec_bench, speed_bench[:SUBSET], or random:in=N,out=M")
"""What a dataset file should hold: the tail of every shape error."""


def _content_text(content: Any) -> str | None:
    """An OpenAI message ``content``: a string, or a list of parts whose ``text`` parts are joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


def _first_turn(turns: Any, roles: tuple[str, ...]) -> str | None:
    if not isinstance(turns, list):
        return None
    for t in turns:
        if not isinstance(t, dict):
            continue
        role = t.get("from", t.get("role"))
        if isinstance(role, str) and role.lower() in roles:
            return _content_text(t.get("value", t.get("content")))
    return None


def _first_string(turns: Any) -> str | None:
    """The first element of a ``turns`` list of strings (None when it is not one)."""
    if isinstance(turns, (list, tuple)) and turns and isinstance(turns[0], str):
        return turns[0]
    return None


def row_prompt(row: Any, index: int) -> Prompt | None:
    """The prompt of one row (None when it has none; see the module docstring for the keys read)."""
    if isinstance(row, str):
        row = {"text": row}
    if not isinstance(row, dict):
        return None
    text = None
    for key in ("prompt", "text"):
        if isinstance(row.get(key), str):
            text = row[key]
            break
    if text is None and row.get("messages") is not None:
        text = _first_turn(row["messages"], ("user",))
    if text is None and row.get("conversations") is not None:
        text = _first_turn(row["conversations"], ("human", "user"))
    if text is None and row.get("turns") is not None:
        text = _first_string(row["turns"])
    if not text or not text.strip():
        return None
    cat = row.get("category")
    rid = row.get("id", row.get("question_id"))
    messages = _messages(row.get("messages")) if not any(isinstance(row.get(k), str) for k in ("prompt", "text")) else None
    return Prompt(text=text, messages=messages, category=None if cat is None else str(cat),
                  id=str(rid) if rid is not None else str(index))


def row_category(row: Any) -> str | None:
    """A row's ``category`` as a string (None without one)."""
    cat = row.get("category") if isinstance(row, dict) else None
    return None if cat is None else str(cat)


def _messages(turns: Any) -> list[dict] | None:
    """An OpenAI chat list as ``{role, content}`` dicts (content parts joined), None when any turn is not one."""
    if not isinstance(turns, list) or not turns:
        return None
    out = []
    for t in turns:
        if not isinstance(t, dict) or not isinstance(t.get("role"), str) or not t["role"]:
            return None
        content = _content_text(t.get("content"))
        if content is None:
            return None
        out.append({"role": t["role"], "content": content})
    return out


def first_row_hint(rows: Sequence[Any]) -> str:
    """`` (the first row has keys …)``: what a dataset without a usable prompt looks like."""
    if not len(rows):
        return " (the dataset is empty)"
    first = rows[0]
    if isinstance(first, dict):
        return f" (the first row has keys {', '.join(list(first)[:_MAX_SHOWN]) or 'none'})"
    return f" (the first row is a {type(first).__name__})"


@dataclass
class Sample:
    """The prompts chosen (in file order) and what was left out: rows without a usable prompt
    (``skipped``), outside the token range (``filtered``), of another category (``other_category``)."""

    prompts: list[Prompt]
    skipped: int = 0
    filtered: int = 0
    other_category: int = 0


def sample(rows: Sequence[Any], *, num_prompts: int | None, seed: int, counter: TokenCounter | None,
           lo: int | None, hi: int | None, categories: Collection[str] | None = None) -> Sample:
    """``num_prompts`` prompts of ``rows`` (all when None) chosen by a shuffle seeded with ``seed`` (as
    SGLang's ``bench_serving`` samples ShareGPT), kept in file order; rows of a category outside
    ``categories`` (when given), without a prompt, or whose token count (``counter``) lies outside
    [``lo``, ``hi``] are left out and counted."""
    order = list(range(len(rows)))
    if num_prompts is not None and num_prompts < len(rows):
        random.Random(seed).shuffle(order)
    chosen: list[tuple[int, Prompt]] = []
    out = Sample([])
    wanted = set(categories) if categories else None
    for i in order:
        if num_prompts is not None and len(chosen) >= num_prompts:
            break
        if wanted is not None and row_category(rows[i]) not in wanted:
            out.other_category += 1
            continue
        p = row_prompt(rows[i], i)
        if p is None:
            out.skipped += 1
            continue
        if counter is not None:
            n = counter.count(p.text)
            if (lo and n < lo) or (hi and n > hi):
                out.filtered += 1
                continue
        chosen.append((i, p))
    out.prompts = [p for _, p in sorted(chosen, key=lambda ip: ip[0])]
    return out
