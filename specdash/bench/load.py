"""The load driver: the suite's requests sent closed loop (:func:`send_suite`, N in flight) or open loop
(:func:`send_suite_rate`, on a seeded arrival schedule), each finished request handed on as a record.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import Callable

from specdash.profile import Suite
from specdash.profile.chat import prompt_messages


def work_items(suite: Suite, repeats: int, offset: int = 0) -> list[tuple[int, int]]:
    """(prompt_index, repeat) pairs in send order: repeat-major, prompts in suite order."""
    return [(p, offset + r) for r, p in itertools.product(range(repeats), range(len(suite.prompts)))]


def sampling_params(suite: Suite, max_tokens: int) -> dict:
    """SGLang ``sampling_params`` for a suite (strict keys only: SGLang 0.5.23 rejects unknown ones):
    ``max_new_tokens``, ``temperature``, ``ignore_eos``, and ``top_p`` / ``top_k`` / ``sampling_seed`` when
    the suite sets them (SGLang's ``SamplingParams`` names, ``python/sglang/srt/sampling/sampling_params.py``),
    then the ``sampling_params`` of the suite's ``extra_request_body`` over them."""
    s = suite.suite
    out = {"max_new_tokens": int(max_tokens), "temperature": float(s.temperature), "ignore_eos": bool(s.ignore_eos)}
    for key, v in (("top_p", s.top_p), ("top_k", s.top_k), ("sampling_seed", s.sampling_seed)):
        if v is not None:
            out[key] = v
    extra = s.extra_request_body.get("sampling_params")
    return {**out, **extra} if isinstance(extra, dict) else out


def request_extra(suite: Suite, api: str) -> dict:
    """Top-level request fields beyond the prompt and its sampling parameters: the suite's
    ``extra_request_body`` (merged into the request as SGLang's ``bench_serving.py
    --extra-request-body`` merges it, ``**extra_request_body``; its ``sampling_params`` go into
    :func:`sampling_params` on ``/generate``), and for the chat API ``top_p`` / ``top_k`` / ``seed``
    (OpenAI's fields; ``top_k`` is SGLang's extension of them)."""
    s = suite.suite
    if api != "chat":
        return {k: v for k, v in s.extra_request_body.items() if k != "sampling_params"}
    out = {k: v for k, v in (("top_p", s.top_p), ("top_k", s.top_k), ("seed", s.sampling_seed)) if v is not None}
    return {**out, **s.extra_request_body}


async def send_one(client, suite: Suite, p_idx: int, max_tokens: int):
    """Send prompt ``p_idx`` of ``suite`` (its own ``max_tokens`` when it has one) through the suite's API;
    the client's ``GenerateResult``."""
    prompt = suite.prompts[p_idx]
    n = prompt.max_tokens or max_tokens
    api = suite.suite.api
    if api == "chat":
        return await client.chat_stream(prompt_messages(prompt), max_tokens=n, temperature=suite.suite.temperature,
                                        ignore_eos=suite.suite.ignore_eos, extra=request_extra(suite, api) or None)
    return await client.generate_stream(prompt.text, sampling_params(suite, n), rid=f"specdash-{uuid.uuid4().hex[:16]}",
                                        extra=request_extra(suite, api) or None)


def request_shape(suite: Suite, max_tokens: int) -> dict:
    """What a run asked of the server, for telling whether two runs are comparable
    (:func:`specdash.bench.compare.shape_differences`): ``api`` (``generate`` / ``chat``),
    ``sampling`` (:func:`sampling_params`: max_new_tokens, temperature, ignore_eos …), ``prompts`` (how
    many) and ``prompts_sha256`` (of every prompt's text or messages and its own max_tokens, in order: the
    same number means the same requests, whatever the suite or dataset is called)."""
    import hashlib
    import json

    h = hashlib.sha256()
    for pr in suite.prompts:
        body = [m.model_dump() for m in pr.messages] if pr.messages else pr.text
        h.update(json.dumps([body, pr.max_tokens], ensure_ascii=False, sort_keys=True).encode("utf-8"))
        h.update(b"\n")
    return {"api": suite.suite.api, "sampling": sampling_params(suite, max_tokens), "prompts": len(suite.prompts),
            "prompts_sha256": h.hexdigest()}


async def send_suite(
    client,
    suite: Suite,
    items: list[tuple[int, int]],
    *,
    concurrency: int,
    max_tokens: int,
    segment: int = 0,
    on_record: Callable[[dict], None] | None = None,
    stop: asyncio.Event | None = None,
    keep: bool = True,
) -> list[dict]:
    """Send ``items`` with at most ``concurrency`` requests in flight; return the records.

    Each record is the client's ``GenerateResult.to_json()`` plus ``prompt_index``,
    ``repeat``, ``category``, ``segment``.  ``on_record`` sees each as it finishes (the
    run directory appends it there).  A failed request is recorded with ``ok: false``.
    ``keep=False`` returns [] and holds no record once ``on_record`` had it (a dashboard's
    looping load: memory flat however many requests a call sends).
    """
    queue: asyncio.Queue = asyncio.Queue()
    for it in items:
        queue.put_nowait(it)
    records: list[dict] = []

    async def worker() -> None:
        while not queue.empty():
            if stop is not None and stop.is_set():
                return
            p_idx, rep = queue.get_nowait()
            res = await send_one(client, suite, p_idx, max_tokens)
            rec = res.to_json()
            rec.update({"prompt_index": p_idx, "repeat": rep, "category": suite.prompts[p_idx].category,
                        "segment": segment})
            if keep:
                records.append(rec)
            if on_record is not None:
                on_record(rec)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(items))))))  # never idle workers
    return records


async def send_suite_rate(
    client,
    suite: Suite,
    items: list[tuple[int, int]],
    *,
    request_rate: float,
    burstiness: float = 1.0,
    max_concurrency: int | None = None,
    seed: int | None = 0,
    max_tokens: int,
    segment: int = 0,
    on_record: Callable[[dict], None] | None = None,
    stop: asyncio.Event | None = None,
) -> list[dict]:
    """Open loop: send ``items`` on a seeded arrival schedule (:func:`~specdash.bench.arrivals.arrival_offsets`:
    ``request_rate`` requests/s, gamma gaps of shape ``burstiness``; ``inf`` = all at once), whether
    or not earlier ones have finished; return the records (as :func:`send_suite`'s).

    ``max_concurrency`` caps the requests in flight as vLLM's ``--max-concurrency`` does: an
    arrival that finds the cap reached waits for a slot (so the achieved rate falls below the
    asked one when the cap binds).  Send times are kept against the schedule's start, so a late
    send does not delay the ones after it.  ``stop`` ends the sending; requests in flight finish.
    """
    from specdash.bench.arrivals import arrival_offsets

    offsets = arrival_offsets(len(items), request_rate, burstiness, seed=seed)
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    records: list[dict] = []

    async def one(p_idx: int, rep: int) -> None:
        async with sem if sem is not None else contextlib.nullcontext():
            res = await send_one(client, suite, p_idx, max_tokens)
        rec = res.to_json()
        rec.update({"prompt_index": p_idx, "repeat": rep, "category": suite.prompts[p_idx].category,
                    "segment": segment})
        records.append(rec)
        if on_record is not None:
            on_record(rec)

    tasks: list[asyncio.Task] = []
    t0 = time.perf_counter()
    try:
        for (p_idx, rep), off in zip(items, offsets):
            delay = t0 + off - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if stop is not None and stop.is_set():
                break
            tasks.append(asyncio.create_task(one(p_idx, rep)))
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()  # only those still running: cancelled with the load
    return records
