#!/usr/bin/env python3
"""Training and evaluation prompts for the real-draft test bed, generated, not downloaded.

The GPU machine reaches no network, so the prompts the EAGLE3 draft is trained on are made here from
task templates crossed with topics (standard library only, a fixed seed: the same list on every
machine).  Each prompt has a category (``facts``, ``explanations``, ``how-to``, ``writing``,
``coding``, ``math``, ``lists``, ``dialogue``) that is kept through the data file, the suite and the
results, because acceptance depends on the kind of text.

Split: the prompt list is shuffled once with ``SEED``; the first ``EVAL`` prompts are held out (never
trained on) and make the evaluation suite ``profiles/suites/real-smol.toml``; the rest are the
training prompts.

Usage::

    python3 benchmarks/real/prompts.py --train FILE.jsonl [--n N]   # one {"id","category","text"} a line
    python3 benchmarks/real/prompts.py --eval-suite FILE.toml        # the held-out suite
    python3 benchmarks/real/prompts.py --stats
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys

SEED = 20261202
EVAL = 48

TOPICS = [
    "photosynthesis", "black holes", "the French Revolution", "volcanoes", "the immune system",
    "climate change", "the printing press", "honey bees", "the Roman Empire", "plate tectonics",
    "electric cars", "the internet", "coral reefs", "the water cycle", "vaccines", "the Moon",
    "democracy", "inflation", "the human heart", "solar panels", "the Great Wall of China",
    "rainforests", "antibiotics", "the stock market", "earthquakes", "the Renaissance", "DNA",
    "recycling", "the Olympic Games", "glaciers", "machine learning", "the piano", "coffee",
    "the Amazon river", "tea ceremonies", "bicycles", "the telescope", "sleep", "chess", "bread",
    "the Sahara desert", "whales", "nuclear power", "the violin", "sharks", "wind turbines",
    "the ancient Egyptians", "gardening", "public libraries", "trains", "the human brain",
    "rainbows", "the periodic table", "pandas", "the Silk Road", "cheese", "hurricanes",
    "the Industrial Revolution", "octopuses", "the metric system", "mountains", "penguins",
    "paper money", "jazz", "the Arctic", "mushrooms", "the camera", "volunteering", "kites",
    "the solar system", "dinosaurs", "electricity", "the ocean tides", "castles", "yoga",
]

TEMPLATES = {
    "facts": [
        "What is {t}? Answer in two sentences.",
        "Give three interesting facts about {t}.",
        "When and where did people first learn about {t}?",
        "What are the most important things to know about {t}?",
    ],
    "explanations": [
        "Explain {t} to a ten-year-old.",
        "Explain how {t} works, step by step.",
        "Why does {t} matter? Explain briefly.",
        "Describe {t} in simple terms.",
        "What are the main causes and effects related to {t}?",
    ],
    "how-to": [
        "How can a beginner learn more about {t}? Give practical steps.",
        "Write a short guide for a student writing a school report on {t}.",
        "What questions should I ask an expert on {t}?",
    ],
    "writing": [
        "Write a short story that involves {t}.",
        "Write a four-line poem about {t}.",
        "Write a short blog post introduction about {t}.",
        "Write a friendly letter to a friend describing {t}.",
    ],
    "lists": [
        "List five words associated with {t} and explain each one.",
        "List the pros and cons of {t}.",
        "Make a numbered list of common misconceptions about {t}.",
    ],
    "dialogue": [
        "Write a short dialogue between a teacher and a student about {t}.",
        "Pretend you are a tour guide and talk about {t}.",
    ],
}

CODING = [
    "Write a Python function that {c}.",
    "Write a Python function that {c}, with a docstring and an example.",
    "Explain, then write in Python, a function that {c}.",
]
CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "counts the vowels in a sentence",
    "returns the factorial of n", "merges two sorted lists", "finds the largest number in a list",
    "removes duplicates from a list while keeping the order", "computes the Fibonacci numbers up to n",
    "converts Celsius to Fahrenheit", "checks whether a word is a palindrome", "sums the digits of an integer",
    "counts how often each word appears in a text", "flattens a nested list", "implements binary search",
    "validates an email address with a simple rule", "computes the average of a list of numbers",
    "sorts a list of dictionaries by a key", "returns the n most common letters in a string",
    "reads a text file and prints its lines in reverse order", "computes the greatest common divisor of two numbers",
    "capitalises the first letter of every word", "rotates a list by k positions", "checks balanced parentheses",
    "converts a decimal number to binary", "transposes a matrix given as a list of lists",
]
MATH = [
    "What is {a} plus {b}? Show your work.",
    "What is {a} times {b}? Explain step by step.",
    "If I have {a} apples and give away {b}, how many are left?",
    "A train travels {a} kilometres in {b} hours. What is its average speed?",
    "What is {b} percent of {a}?",
]


def all_prompts() -> list[dict]:
    """Every prompt once, shuffled with ``SEED``: ``[{"id", "category", "text"}]``."""
    out: list[tuple[str, str]] = []
    for cat, templates in TEMPLATES.items():
        for tpl, topic in itertools.product(templates, TOPICS):
            out.append((cat, tpl.format(t=topic)))
    for tpl, task in itertools.product(CODING, CODE_TASKS):
        out.append(("coding", tpl.format(c=task)))
    rng = random.Random(SEED)
    for tpl in MATH:
        for _ in range(40):
            a, b = rng.randint(12, 480), rng.randint(2, 60)
            out.append(("math", tpl.format(a=a, b=b)))
    rng.shuffle(out)
    return [{"id": i, "category": c, "text": t} for i, (c, t) in enumerate(out)]


def split() -> tuple[list[dict], list[dict]]:
    """(held-out evaluation prompts, training prompts)."""
    prompts = all_prompts()
    return prompts[:EVAL], prompts[EVAL:]


def eval_suite_toml(max_tokens: int = 256) -> str:
    """The held-out prompts as a specdash suite (greedy, one stream, stop at EOS)."""
    held, _ = split()
    lines = [
        "# Held-out prompts of the real-draft test bed (benchmarks/real/prompts.py writes this file: do not edit).",
        "# The draft in benchmarks/real/ never trained on them; the target is SmolLM2-135M-Instruct.",
        "[suite]",
        'name = "real-smol"',
        f'description = "{len(held)} held-out everyday prompts x {max_tokens} tokens, greedy, stops at EOS"',
        f"max_tokens = {max_tokens}",
        "temperature = 0.0",
        "repeats = 1",
        "warmup = 8",
        "concurrency = 1",
        "ignore_eos = false",
        "",
    ]
    for p in held:
        lines += ["[[prompts]]", f"text = {json.dumps(p['text'])}", f'category = "{p["category"]}"', ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", help="write the training prompts as JSON lines to this file")
    ap.add_argument("--n", type=int, default=0, help="at most this many training prompts (0: all)")
    ap.add_argument("--eval-suite", help="write the held-out suite (TOML) to this file")
    ap.add_argument("--stats", action="store_true")
    a = ap.parse_args(argv)
    held, train = split()
    if a.n:
        train = train[: a.n]
    if a.train:
        with open(a.train, "w", encoding="utf-8") as f:
            for p in train:
                f.write(json.dumps(p) + "\n")
    if a.eval_suite:
        with open(a.eval_suite, "w", encoding="utf-8") as f:
            f.write(eval_suite_toml())
    if a.stats or not (a.train or a.eval_suite):
        cats: dict[str, int] = {}
        for p in train:
            cats[p["category"]] = cats.get(p["category"], 0) + 1
        print(json.dumps({"train": len(train), "held_out": len(held), "by_category": cats}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
