#!/usr/bin/env python3
"""The target's own answers to the training prompts, from a running SGLang server (the draft's data).

EAGLE3 drafts are trained on what the target itself says (self-distillation), so every training prompt
(``benchmarks/real/prompts.py``) is rendered with the target's chat template here, sent to SGLang's
native ``POST /generate`` as ``input_ids``, and the answer's ``output_ids`` are kept exactly as SGLang
produced them (SGLang 0.5.14 returns them beside ``text``).  Each prompt is answered ``--samples`` times:
the first greedy (temperature 0, the setting the test bed measures), the others at ``--temperature``.

Usage (on the GPU machine, with the target served at URL)::

    python3 benchmarks/real/gen_data.py --url http://127.0.0.1:30000 --tokenizer DIR \
        --prompts train.jsonl --out data.jsonl [--samples 2] [--max-new-tokens 320] [--concurrency 128]

Writes one JSON line per answer as it arrives: ``{"id", "sample", "category", "prompt_ids", "output_ids",
"finish"}``; prints a summary (answers, tokens, seconds) as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time


async def run(a: argparse.Namespace) -> dict:
    import httpx
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    prompts = [json.loads(line) for line in open(a.prompts, encoding="utf-8") if line.strip()]
    jobs = []
    for p in prompts:
        ids = tok.apply_chat_template([{"role": "user", "content": p["text"]}], add_generation_prompt=True,
                                      tokenize=True)
        if hasattr(ids, "keys"):  # transformers 5 hands back a BatchEncoding
            ids = ids["input_ids"]
        for s in range(a.samples):
            jobs.append((p, s, list(ids)))
    sem = asyncio.Semaphore(a.concurrency)
    t0 = time.time()
    stats = {"answers": 0, "output_tokens": 0, "failed": 0}
    with open(a.out, "w", encoding="utf-8") as out:
        async with httpx.AsyncClient(base_url=a.url, timeout=httpx.Timeout(120.0)) as client:

            async def one(p: dict, s: int, ids: list[int]) -> None:
                temp = 0.0 if s == 0 else a.temperature
                body = {"input_ids": ids, "sampling_params": {"temperature": temp, "max_new_tokens": a.max_new_tokens}}
                async with sem:
                    try:
                        r = await client.post("/generate", json=body)
                        r.raise_for_status()
                        res = r.json()
                    except Exception as exc:
                        stats["failed"] += 1
                        print(f"gen_data: prompt {p['id']} sample {s}: {exc}", file=sys.stderr)
                        return
                oids = res.get("output_ids") or tok(res["text"], add_special_tokens=False)["input_ids"]
                fin = (res.get("meta_info") or {}).get("finish_reason")
                out.write(json.dumps({"id": p["id"], "sample": s, "category": p["category"], "prompt_ids": ids,
                                      "output_ids": oids, "finish": fin if isinstance(fin, (str, type(None)))
                                      else fin.get("type")}) + "\n")
                stats["answers"] += 1
                stats["output_tokens"] += len(oids)

            await asyncio.gather(*(one(*j) for j in jobs))
    stats["seconds"] = round(time.time() - t0, 1)
    stats["prompts"] = len(prompts)
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-new-tokens", type=int, default=320)
    ap.add_argument("--concurrency", type=int, default=128)
    a = ap.parse_args(argv)
    stats = asyncio.run(run(a))
    print(json.dumps(stats))
    return 0 if stats["answers"] else 1


if __name__ == "__main__":
    sys.exit(main())
