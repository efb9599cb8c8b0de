"""Datasets as suites: ``specdash --bench … --dataset SOURCE`` in place of ``--suite``.

:func:`load_dataset_suite` turns a dataset into a :class:`~specdash.profile.schema.Suite`
(generate API, temperature 0, ``ignore_eos``, one repeat, one warm-up, concurrency 1,
:data:`DEFAULT_MAX_TOKENS` tokens unless ``random:`` says otherwise; ``--max-tokens``,
``--concurrency`` and ``--repeats`` override as for any suite) plus a record of where the
prompts came from, for the run's ``manifest.json``.  ``SOURCE`` is one of:

* a name: ``profiles/datasets/NAME.jsonl`` (searched like suites: the user's profile
  directory, the checkout, the presets shipped in the package), e.g. ``mixed-50``;
* ShareGPT JSON (``.json``): a list of ``{"conversations": [{"from": "human", "value": …},
  {"from": "gpt", …}, …], "category": …}`` — the first human (or ``user``) turn is the
  prompt, as SGLang's ``bench_serving.py`` reads ShareGPT (``role``/``content`` turns are
  read too); a JSON list of JSONL-style objects works as well;
* JSON Lines (``.jsonl``): one object a line with ``"prompt"``, ``"text"`` or ``"messages"``
  (an OpenAI chat list: the first ``user`` message's content is the raw-text prompt) and an
  optional ``"category"`` and ``"id"``; other keys are ignored;
* Parquet (``.parquet``): columns named as the JSONL keys (or ``conversations``); needs
  ``pyarrow``;
* a local Hugging Face dataset directory (written by ``Dataset.save_to_disk``): read with
  ``datasets.load_from_disk``, the ``train`` split of a ``DatasetDict`` (else its first);
  columns as for Parquet; needs ``datasets``;
* ``random:in=N,out=M[,tokenizer=PATH]``: prompts of exactly N input tokens (as the server's
  ``prompt_tokens`` counts them: special tokens the tokenizer adds, e.g. BOS, included) and
  ``max_tokens`` M.  Tokens are counted with the target's tokenizer (``tokenizer=PATH``, a
  ``tokenizer.json`` or a directory holding one; else the profile's ``--tokenizer-path`` or
  ``model_path`` when it is a local directory with ``tokenizer.json``), through the
  ``tokenizers`` library.  On the simulator (``launcher = "sim"``) counts follow the
  simulator's own rule, ``1 + ceil(characters / 3.6)`` (``specdash/sim/text.py``), so they are
  exact there.  Without a tokenizer for a real server the same rule is an *estimate*, and
  the record says so.  A ``random:`` suite sets ``chat_template = "none"``: its exact counts are
  of raw text (a chat target gets the run's raw-text warning).

Rows with ``messages`` keep the whole chat: the chat API sends it and a client-side chat template
(``chat_template = "auto"``, :mod:`specdash.profile.chat`) renders it; token counts and raw-text
sending use its first ``user`` message (``min_input_tokens`` / ``max_input_tokens`` count that raw text,
not the templated prompt a chat target is sent).

Sampling: ``num_prompts`` rows (default: all; 100 for ``random:``), chosen by a shuffle
seeded with ``seed`` (SGLang's ``bench_serving`` shuffles ShareGPT the same way) and kept in
file order; rows without a usable prompt are skipped and counted.  ``min_input_tokens`` /
``max_input_tokens`` keep prompts whose token count (counted as above) lies in the range.

Only the standard library and pydantic are imported here; ``pyarrow``, ``datasets`` and
``tokenizers`` are imported inside the functions that need them.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdash.profile.files import preset_dirs
from specdash.profile.schema import Profile, ProfileError, Prompt, Suite, SuiteSection, expand_path

DEFAULT_MAX_TOKENS = 256
"""``max_tokens`` of a file dataset's suite (``--max-tokens`` overrides)."""
DEFAULT_RANDOM_PROMPTS = 100
"""Prompts of a ``random:`` dataset without ``--num-prompts``."""
DATASET_SUFFIXES = (".jsonl", ".json", ".parquet")
"""Suffixes a dataset name is looked up with under ``profiles/datasets/``, in order."""
_PROMPT_KEYS = ("prompt", "text", "messages", "conversations")
_MAX_SHOWN = 6

_HINT = ("expected ShareGPT JSON (a list of {\"conversations\": [{\"from\": \"human\", \"value\": …}, …]}), "
         "JSONL/Parquet rows with \"prompt\", \"text\" or \"messages\" (and optionally \"category\"), "
         "a Hugging Face dataset directory, or random:in=N,out=M")


@dataclass
class TokenCounter:
    """How prompt tokens are counted: ``method`` = ``tokenizer`` (``count`` is exact for that
    tokenizer), ``simulator`` (exact on the simulator) or ``estimate``; ``note`` says which."""

    method: str
    count: Callable[[str], int]
    note: str
    tokenizer: str | None = None
    pool: tuple[str, ...] = ()

    def record(self) -> dict:
        """The counter as the manifest records it."""
        return {"method": self.method, "tokenizer": self.tokenizer, "note": self.note}


def sim_count(text: str) -> int:
    """The simulator's prompt token count of ``text``: ``1 + ceil(len / 3.6)`` (BOS included),
    the rule of ``specdash/sim/text.py`` (which this floor cannot import)."""
    return 1 + (-(-len(text or "") * 10 // 36))


# --- the entry point ---------------------------------------------------------------------------


def load_dataset_suite(
    source: str,
    *,
    num_prompts: int | None = None,
    seed: int = 0,
    profile: Profile | None = None,
    min_input_tokens: int | None = None,
    max_input_tokens: int | None = None,
) -> tuple[Suite, dict]:
    """The suite of a dataset and the record of it for the manifest (see the module docstring).

    Args:
        source: a dataset name, file, Hugging Face dataset directory or ``random:…`` spec.
        num_prompts: how many prompts (None: all rows; 100 for ``random:``).
        seed: the sampling (and ``random:`` text) seed.
        profile: the target's profile: where the tokenizer is found, and whether it is the simulator.
        min_input_tokens: keep prompts of at least this many tokens.
        max_input_tokens: keep prompts of at most this many tokens.

    Returns:
        ``(suite, record)``; ``record`` has ``source``, ``format``, ``path``, ``rows``,
        ``skipped``, ``num_prompts``, ``seed``, ``filters`` and, when tokens were counted,
        ``token_count`` {method, tokenizer, note}.

    Raises:
        ProfileError: the source is missing, unreadable, of the wrong shape, needs a library
            that is not installed, or leaves no prompt; the message names it and the fix.
    """
    from specdash.bounded import MAX_PROMPTS

    if num_prompts is not None and num_prompts < 1:
        raise ProfileError(f"--num-prompts must be at least 1 (got {num_prompts})")
    if num_prompts is not None and num_prompts > MAX_PROMPTS:
        raise ProfileError(f"--num-prompts must be at most {MAX_PROMPTS:,} (got {num_prompts:,})")
    for flag, v in (("--min-input-tokens", min_input_tokens), ("--max-input-tokens", max_input_tokens)):
        if v is not None and v < 1:
            raise ProfileError(f"{flag} must be at least 1 (got {v})")
    if min_input_tokens and max_input_tokens and min_input_tokens > max_input_tokens:
        raise ProfileError(f"--min-input-tokens {min_input_tokens} is above --max-input-tokens {max_input_tokens}")
    if source.startswith("random:"):
        return _random_suite(source, num_prompts=num_prompts, seed=seed, profile=profile)
    path = resolve_dataset(source)
    fmt, rows, extra = _read_rows(path)
    counter = token_counter(profile) if (min_input_tokens or max_input_tokens) else None
    prompts, skipped, filtered = _sample(rows, num_prompts=num_prompts, seed=seed, counter=counter,
                                         lo=min_input_tokens, hi=max_input_tokens)
    if not prompts:
        if filtered:
            raise ProfileError(
                f"dataset {path}: no prompt has between {min_input_tokens or 1} and {max_input_tokens or '∞'} "
                f"input tokens ({filtered} row(s) outside the range; counted by {counter.note}); "
                "widen --min-input-tokens / --max-input-tokens")
        raise ProfileError(f"dataset {path}: no usable prompt in {len(rows)} row(s)"
                           f"{_first_row_hint(rows)}; {_HINT}")
    name = path.stem if path.is_file() else path.name
    suite = Suite(
        suite=SuiteSection(name=name, description=f"dataset {source}: {len(prompts)} of {len(rows)} row(s), "
                           f"seed {seed}", max_tokens=DEFAULT_MAX_TOKENS),
        prompts=prompts,
    )
    suite._path = path
    record = {"source": source, "format": fmt, "path": str(path), "rows": len(rows), "skipped": skipped,
              "num_prompts": len(prompts), "asked": num_prompts, "seed": seed,
              "filters": {"min_input_tokens": min_input_tokens, "max_input_tokens": max_input_tokens}} | extra
    if counter is not None:
        record["token_count"] = counter.record()
        record["filtered_out"] = filtered
    return suite, record


def resolve_dataset(source: str) -> Path:
    """The file or directory of a dataset source: an existing path, else a name under
    ``profiles/datasets/`` (``NAME.jsonl``, ``.json``, ``.parquet``).

    Raises:
        ProfileError: neither exists (the message lists the known names).
    """
    p = Path(expand_path(source, where=f"--dataset {source}") or "")
    if p.exists():
        return p
    if os.sep not in source and not p.suffix:
        for d in preset_dirs():
            for suf in DATASET_SUFFIXES:
                cand = d / "datasets" / f"{source}{suf}"
                if cand.is_file():
                    return cand
    known = ", ".join(n for n, _ in list_datasets()) or "none"
    raise ProfileError(
        f"dataset {source!r} does not exist (no such file or directory, and no dataset of that name under "
        f"{', '.join(str(d / 'datasets') for d in preset_dirs())}; known datasets: {known}); give a ShareGPT "
        "JSON, JSONL or Parquet file, a Hugging Face dataset directory, or random:in=N,out=M")


def list_datasets() -> list[tuple[str, Path]]:
    """The named datasets found (name, path); the user's shadow the presets."""
    out: dict[str, Path] = {}
    for d in preset_dirs():
        base = d / "datasets"
        if base.is_dir():
            for f in sorted(base.iterdir()):
                if f.suffix in DATASET_SUFFIXES and f.is_file():
                    out.setdefault(f.stem, f)
    return sorted(out.items())


# --- reading rows ------------------------------------------------------------------------------


def _read_rows(path: Path) -> tuple[str, Sequence[Any], dict]:
    """(format, rows, extra record fields) of a dataset file or directory.  A file must be a regular file
    (a FIFO or ``/dev/zero`` is refused before a byte is read) of at most
    :data:`specdash.bounded.DATASET_BYTES`; JSON Lines are read a line at a time, JSON values nested
    more than :data:`specdash.bounded.JSON_MAX_DEPTH` levels are refused (:mod:`specdash.bounded`)."""
    from specdash.bounded import DATASET_BYTES, InputError, check_file, read_bytes

    if path.is_dir():
        return _read_hf_dir(path)
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            check_file(path, limit=DATASET_BYTES, what="dataset")
            return "parquet", _read_parquet(path), {}
        if suffix in (".jsonl", ".ndjson"):
            return "jsonl", _parse_jsonl(path), {}
        raw = read_bytes(path, limit=DATASET_BYTES, what="dataset")
    except InputError as exc:
        raise ProfileError(f"{exc}; {_HINT}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ProfileError(f"dataset {path}: not UTF-8 text; {_HINT}") from None
    del raw
    head = text.lstrip()[:1]
    if not head:
        raise ProfileError(f"dataset {path}: the file is empty; {_HINT}")
    if suffix != ".json" and head == "{":
        return "jsonl", _parse_jsonl(path), {}
    data = _loads(text, path)
    if isinstance(data, _ExtraData):  # a .json file holding JSON Lines
        return "jsonl", _parse_jsonl(path), {}
    if not isinstance(data, list):
        keys = f" with keys {', '.join(map(str, list(data)[:_MAX_SHOWN]))}" if isinstance(data, dict) else ""
        raise ProfileError(f"dataset {path}: the JSON is a {type(data).__name__}{keys}, not a list of "
                           f"conversations or prompt objects; {_HINT}")
    fmt = "sharegpt" if data and isinstance(data[0], dict) and "conversations" in data[0] else "json"
    return fmt, data, {}


class _ExtraData:
    """:func:`_loads`' answer for JSON followed by more JSON (JSON Lines in a ``.json`` file)."""


def _loads(text: str, path: Path) -> Any:
    from specdash.bounded import InputError, loads_json

    try:
        return loads_json(text, what=f"dataset {path}")
    except InputError as exc:
        if text.lstrip()[:1] == "{" and ("Extra data" in str(exc) or "trailing" in str(exc).lower()):
            return _ExtraData()
        raise ProfileError(f"{exc}; {_HINT}") from None


def _parse_jsonl(path: Path) -> list[Any]:
    """The rows of a JSON Lines file, read a line at a time (each line at most
    :data:`specdash.bounded.RECORD_LINE_BYTES`, nested at most :data:`specdash.bounded.JSON_MAX_DEPTH`)."""
    from specdash.bounded import (
        DATASET_BYTES,
        RECORD_LINE_BYTES,
        InputError,
        iter_lines,
        loads_json,
        size_text,
    )

    rows = []
    try:
        for n, (_, line) in enumerate(iter_lines(path, line_limit=RECORD_LINE_BYTES, what="dataset",
                                                 total_limit=DATASET_BYTES), 1):
            if line == b"":
                raise ProfileError(f"dataset {path}:{n}: a line longer than {size_text(RECORD_LINE_BYTES)}; each "
                                   "line of a JSONL dataset is one prompt object")
            if n == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.strip():
                continue
            try:
                rows.append(loads_json(line, what=f"dataset {path}:{n}"))
            except InputError as exc:
                why = str(exc).removeprefix(f"dataset {path}:{n}: ")
                raise ProfileError(f"dataset {path}:{n}: not a JSON object ({why}); each line of a JSONL dataset is one object such as "
                                   "{\"prompt\": \"…\", \"category\": \"coding\"}") from None
    except InputError as exc:
        raise ProfileError(f"{exc}; {_HINT}") from None
    if not rows:
        raise ProfileError(f"dataset {path}: the file is empty; {_HINT}")
    return rows


def _read_parquet(path: Path) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ProfileError(f"dataset {path}: reading Parquet needs pyarrow, which is not installed: "
                           "pip install pyarrow (or convert the file to JSONL)") from None
    try:
        names = pq.read_schema(path).names
        wanted = [c for c in (*_PROMPT_KEYS, "category", "id") if c in names]
        if not any(c in names for c in _PROMPT_KEYS):
            raise ProfileError(f"dataset {path}: no column named {', '.join(_PROMPT_KEYS)} (columns: "
                               f"{', '.join(names[:12])}); {_HINT}")
        return pq.read_table(path, columns=wanted).to_pylist()
    except ProfileError:
        raise
    except Exception as exc:  # pyarrow's errors (ArrowInvalid, OSError) for a file that is not Parquet
        raise ProfileError(f"dataset {path}: not a readable Parquet file ({exc})") from None


def _read_hf_dir(path: Path) -> tuple[str, Sequence[Any], dict]:
    marks = ("dataset_info.json", "state.json", "dataset_dict.json")
    if not any((path / m).is_file() for m in marks):
        raise ProfileError(f"dataset {path}: a directory, but not a Hugging Face dataset saved with "
                           f"save_to_disk (none of {', '.join(marks)} there); give the dataset's directory, "
                           "or a ShareGPT JSON / JSONL / Parquet file")
    try:
        import datasets
    except ImportError:
        raise ProfileError(f"dataset {path}: reading a Hugging Face dataset directory needs the datasets "
                           "library, which is not installed: pip install datasets (or export it to JSONL "
                           "with Dataset.to_json)") from None
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as exc:  # the library's own errors for a damaged or foreign directory
        raise ProfileError(f"dataset {path}: datasets.load_from_disk failed: {exc}") from None
    extra: dict = {}
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        if not splits:
            raise ProfileError(f"dataset {path}: the DatasetDict has no split")
        split = "train" if "train" in splits else splits[0]
        ds, extra = ds[split], {"split": split, "splits": splits}
    cols = list(getattr(ds, "column_names", []) or [])
    if not any(c in cols for c in _PROMPT_KEYS):
        raise ProfileError(f"dataset {path}: no column named {', '.join(_PROMPT_KEYS)} (columns: "
                           f"{', '.join(cols[:12])}); {_HINT}")
    return "hf-dir", ds, extra


# --- rows → prompts ----------------------------------------------------------------------------


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


def row_prompt(row: Any, index: int) -> Prompt | None:
    """The prompt of one row (None when it has none): ``prompt`` / ``text`` (a string),
    ``messages`` (first ``user`` message), ``conversations`` (first ``human``/``user`` turn);
    ``category`` and ``id`` carried."""
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
    if not text or not text.strip():
        return None
    cat, rid = row.get("category"), row.get("id")
    messages = _messages(row.get("messages")) if not any(isinstance(row.get(k), str) for k in ("prompt", "text")) else None
    return Prompt(text=text, messages=messages, category=None if cat is None else str(cat),
                  id=str(rid) if rid is not None else str(index))


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


def _first_row_hint(rows: Sequence[Any]) -> str:
    if not len(rows):
        return " (the dataset is empty)"
    first = rows[0]
    if isinstance(first, dict):
        return f" (the first row has keys {', '.join(list(first)[:_MAX_SHOWN]) or 'none'})"
    return f" (the first row is a {type(first).__name__})"


def _sample(rows: Sequence[Any], *, num_prompts: int | None, seed: int, counter: TokenCounter | None,
            lo: int | None, hi: int | None) -> tuple[list[Prompt], int, int]:
    """(prompts in file order, rows skipped for having no prompt, rows filtered out by length)."""
    order = list(range(len(rows)))
    if num_prompts is not None and num_prompts < len(rows):
        random.Random(seed).shuffle(order)
    chosen: list[tuple[int, Prompt]] = []
    skipped = filtered = 0
    for i in order:
        if num_prompts is not None and len(chosen) >= num_prompts:
            break
        p = row_prompt(rows[i], i)
        if p is None:
            skipped += 1
            continue
        if counter is not None:
            n = counter.count(p.text)
            if (lo and n < lo) or (hi and n > hi):
                filtered += 1
                continue
        chosen.append((i, p))
    return [p for _, p in sorted(chosen, key=lambda ip: ip[0])], skipped, filtered


# --- token counting ----------------------------------------------------------------------------


def _profile_tokenizer_path(profile: Profile) -> str | None:
    args = list(profile.server.extra_args)
    for i, a in enumerate(args):
        if a == "--tokenizer-path" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--tokenizer-path="):
            return a.split("=", 1)[1]
    return profile.server.model_path


def _tokenizer_file(path: str) -> Path | None:
    p = Path(os.path.expanduser(path))
    if p.is_file() and p.name.endswith(".json"):
        return p
    if p.is_dir() and (p / "tokenizer.json").is_file():
        return p / "tokenizer.json"
    return None


def token_counter(profile: Profile | None, tokenizer: str | None = None) -> TokenCounter:
    """How this target's prompt tokens are counted (see the module docstring for the order).

    Raises:
        ProfileError: ``tokenizer`` was given but is not a ``tokenizer.json`` (or a directory
            with one), or ``tokenizers`` is not installed for it.
    """
    if tokenizer is not None:
        f = _tokenizer_file(expand_path(tokenizer, where="random: tokenizer") or "")
        if f is None:
            raise ProfileError(f"random: tokenizer={tokenizer}: not a tokenizer.json file nor a directory holding "
                               "one (the target model's directory usually has it)")
        return _tokenizers_counter(f, required=True)
    if profile is not None and profile.server.launcher == "sim":
        return TokenCounter("simulator", sim_count, "the simulator's own rule, 1 + ceil(characters / 3.6) "
                            "(BOS included): exact on the simulator")
    src = None
    if profile is not None:
        src = expand_path(_profile_tokenizer_path(profile), where=f"{profile.path or profile.name}: tokenizer")
        f = _tokenizer_file(src) if src and not src.startswith("sim:") else None
        if f is not None:
            counter = _tokenizers_counter(f, required=False)
            if counter is not None:
                return counter
            why = f"the tokenizers library is not installed (pip install tokenizers) to read {f}"
        else:
            why = f"no tokenizer.json at {src}"
    else:
        why = "no profile to find the target's tokenizer in (an attached server)"
    return TokenCounter("estimate", sim_count, f"an ESTIMATE, 1 + ceil(characters / 3.6) per prompt, since {why}; "
                        "pass random:…,tokenizer=PATH (a tokenizer.json) for exact counts")


def _tokenizers_counter(f: Path, *, required: bool) -> TokenCounter | None:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        if not required:
            return None
        raise ProfileError(f"counting tokens with {f} needs the tokenizers library, which is not installed: "
                           "pip install tokenizers (or pip install 'specdash[datasets]')") from None
    from specdash.bounded import DATASET_BYTES, InputError, check_file

    try:
        check_file(f, limit=DATASET_BYTES, what="tokenizer")  # never a FIFO or a device
        tok = Tokenizer.from_file(str(f))
    except InputError as exc:
        raise ProfileError(str(exc)) from None
    except Exception as exc:  # the library's error for a file it cannot parse
        raise ProfileError(f"{f}: not a tokenizer the tokenizers library can read ({exc})") from None

    def count(text: str) -> int:
        return len(tok.encode(text).ids)

    return TokenCounter("tokenizer", count, f"the tokenizer {f} (special tokens it adds, e.g. BOS, included)",
                        tokenizer=str(f), pool=_vocab_words(tok))


def _vocab_words(tok: Any) -> tuple[str, ...]:
    """Plain alphabetic words of a tokenizer's vocabulary (byte-level ``Ġ`` / SentencePiece ``▁``
    markers stripped), sorted: the material of random prompts."""
    words = set()
    for piece in tok.get_vocab(with_added_tokens=False):
        w = piece.lstrip("Ġ▁")
        if len(w) >= 2 and w.isascii() and w.isalpha():
            words.add(w.lower())
    return tuple(sorted(words))


# --- random prompts ----------------------------------------------------------------------------

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


def _random_suite(source: str, *, num_prompts: int | None, seed: int, profile: Profile | None) -> tuple[Suite, dict]:
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


def describe(record: dict) -> str:
    """One line about a dataset record, for the bench's progress output."""
    tc = record.get("token_count")
    where = record.get("path") or record.get("source")
    line = f"dataset {record['source']} ({record['format']}, {where}): {record['num_prompts']} prompt(s)"
    if record.get("format") != "random":
        line += f" of {record['rows']} row(s), seed {record['seed']}"
        if record.get("skipped"):
            line += f", {record['skipped']} row(s) without a prompt skipped"
    if tc:
        line += f"; tokens counted by {tc['note']}"
    return line

