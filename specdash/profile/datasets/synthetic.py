"""``random:in=N,out=M[,tokenizer=PATH]``: prompts of exactly N input tokens and ``max_tokens`` M.

Tokens are counted by :func:`~specdash.profile.datasets.tokens.token_counter` (the target's tokenizer,
or the simulator's own rule, exact there); with a tokenizer the words come from its vocabulary, else from
a fixed list of common English words.  The suite sets ``chat_template = "none"``: its exact counts are of
raw text.
"""

from __future__ import annotations

import random
import re

from specdash.profile.datasets.tokens import TokenCounter, token_counter
from specdash.profile.schema import Profile, ProfileError, Prompt, Suite, SuiteSection

DEFAULT_RANDOM_PROMPTS = 100
"""Prompts of a ``random:`` dataset without ``--num-prompts``."""


_RANDOM_RE = re.compile(r"^random:(.*)$")
_WORDS_TEXT = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name "
    "president team minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher force education "
    "river garden market signal engine bridge window letter music number summer winter forest paper")
_WORDS = tuple(_WORDS_TEXT.split())


def _parse_random(source: str) -> tuple[int, int, str | None]:
    body = _RANDOM_RE.match(source).group(1)
    fields: dict[str, str] = {}
    for part in filter(None, (s.strip() for s in body.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("in", "out", "tokenizer"):
            raise ProfileError(f"--dataset {source}: {part!r} is not in=N, out=M or tokenizer=PATH "
                               "(e.g. random:in=512,out=128)")
        fields[key.strip()] = value.strip()
    from specdash.bounded import MAX_RANDOM_INPUT_TOKENS, MAX_TOKENS

    for key, hi in (("in", MAX_RANDOM_INPUT_TOKENS), ("out", MAX_TOKENS)):
        if key not in fields:
            raise ProfileError(f"--dataset {source}: {key}= is missing (e.g. random:in=512,out=128)")
        v = fields[key]
        if not v.isdigit() or len(v) > 12 or int(v) < 1:
            raise ProfileError(f"--dataset {source}: {key}={v[:20]} is not a positive whole number of tokens")
        if int(v) > hi:
            raise ProfileError(f"--dataset {source}: {key}={int(v):,} is above {hi:,} tokens, the most a "
                               f"{'random prompt' if key == 'in' else 'request'} of specdash has")
    return int(fields["in"]), int(fields["out"]), fields.get("tokenizer")


def random_suite(source: str, *, num_prompts: int | None, seed: int, profile: Profile | None) -> tuple[Suite, dict]:
    """The suite of a ``random:`` source and its manifest record (``format`` = ``random``, ``input_tokens``,
    ``output_tokens``, ``token_count``).

    Raises:
        ProfileError: a malformed spec, an unreadable tokenizer, or no text of the asked length.
    """
    from specdash.bounded import MAX_RANDOM_TOTAL_TOKENS

    n_in, n_out, tokenizer = _parse_random(source)
    n = num_prompts or DEFAULT_RANDOM_PROMPTS
    if n * n_in > MAX_RANDOM_TOTAL_TOKENS:  # the texts are made in memory, ~3.6 characters a token
        raise ProfileError(f"--dataset {source} with {n:,} prompts: {n * n_in:,} input tokens in all, above the "
                           f"{MAX_RANDOM_TOTAL_TOKENS:,} specdash composes for one run; lower in= or --num-prompts")
    counter = token_counter(profile, tokenizer)
    rng = random.Random(seed)
    make = _exact_tokens if counter.method == "tokenizer" else _exact_chars
    texts = [make(counter, n_in, rng, source) for _ in range(n)]
    suite = Suite(
        suite=SuiteSection(name=f"random-in{n_in}-out{n_out}", max_tokens=n_out, chat_template="none",
                           description=f"{n} random prompts of {n_in} input tokens, {n_out} output tokens, "
                           f"seed {seed} (tokens counted by {counter.method})"),
        prompts=[Prompt(text=t, category="random", id=f"random-{i}") for i, t in enumerate(texts)],
    )
    record = {"source": source, "format": "random", "path": None, "rows": n, "skipped": 0, "num_prompts": n,
              "asked": num_prompts, "seed": seed, "input_tokens": n_in, "output_tokens": n_out, "token_count": counter.record()}
    return suite, record


def _exact_chars(counter: TokenCounter, n: int, rng: random.Random, source: str) -> str:
    """A text of exactly ``n`` tokens under ``1 + ceil(characters / 3.6)``: its length is
    ``floor((n - 1) × 3.6)`` characters of random words."""
    if n < 2:
        raise ProfileError(f"--dataset {source}: in={n} leaves no room for text (the count includes BOS): "
                           "use in=2 or more")
    length = (n - 1) * 36 // 10
    words: list[str] = []
    size = -1
    while size < length:
        w = rng.choice(_WORDS)
        words.append(w)
        size += len(w) + 1
    text = " ".join(words)[:length]
    if text.endswith(" "):
        text = text[:-1] + "a"
    return text


def _exact_tokens(counter: TokenCounter, n: int, rng: random.Random, source: str) -> str:
    """Random words whose encoding under the tokenizer is exactly ``n`` tokens: the longest word
    prefix at or under ``n``, then, if short, the character prefix of one more word that hits ``n``."""
    count = counter.count
    special = count("")
    if n <= special:
        raise ProfileError(f"--dataset {source}: in={n} leaves no room for text: the tokenizer adds {special} "
                           f"token(s) of its own (e.g. BOS) to every prompt; use in={special + 1} or more")
    pool = counter.pool if len(counter.pool) >= 8 else _WORDS
    for _ in range(20):
        words = [rng.choice(pool) for _ in range(n + 8)]
        while count(" ".join(words)) <= n:
            words += [rng.choice(pool) for _ in range(n + 8)]
        lo, hi = 0, len(words)  # count(words[:lo]) <= n < count(words[:hi])
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count(" ".join(words[:mid])) <= n:
                lo = mid
            else:
                hi = mid
        base = " ".join(words[:lo])
        if count(base) == n:
            return base
        longer = " ".join(words[:lo + 1])
        for cut in range(len(base) + 1, len(longer) + 1):
            if count(longer[:cut]) == n and longer[:cut].strip():
                return longer[:cut]
    raise ProfileError(f"--dataset {source}: could not compose a text of exactly {n} tokens with {counter.tokenizer} "
                       "in 20 tries; try another in= or --seed")


