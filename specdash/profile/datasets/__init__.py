"""Datasets as suites: ``specdash --bench … --dataset SOURCE`` in place of ``--suite``.

:func:`load_dataset_suite` turns a dataset into a :class:`~specdash.profile.schema.Suite`
(generate API, temperature 0, ``ignore_eos``, one repeat, one warm-up, concurrency 1,
:data:`DEFAULT_MAX_TOKENS` tokens unless the source says otherwise; ``--max-tokens``,
``--concurrency`` and ``--repeats`` override as for any suite) plus a record of where the
prompts came from, for the run's ``manifest.json``.  ``SOURCE`` is one of (one reader module each,
chosen by :data:`NAMED` and :data:`FORMATS`, the one registry):

* a named benchmark, :data:`NAMED`: ``spec_bench[:PATH]`` (Spec-Bench's question set,
  :mod:`~specdash.profile.datasets.spec_bench`), ``speed_bench[:SUBSET]`` (NVIDIA SPEED-Bench from the
  Hugging Face cache, :mod:`~specdash.profile.datasets.speed_bench`), their categories kept;
* a Hugging Face hub dataset, ``hf:OWNER/NAME[:CONFIG[:SPLIT]][@REVISION]`` (``hf:`` optional), read
  from the local ``huggingface_hub`` cache — offline mode honoured — or downloaded into it
  (:mod:`~specdash.profile.datasets.hub`);
* a name under ``profiles/datasets/`` (``NAME.jsonl``, searched like suites: the user's profile
  directory, the checkout, the presets shipped in the package), e.g. ``mixed-50``;
* a file, by suffix (:data:`FORMATS`): JSON Lines / JSON / ShareGPT (:mod:`~specdash.profile.datasets.jsonl`),
  Parquet (:mod:`~specdash.profile.datasets.parquet`, needs ``pyarrow``);
* a local Hugging Face dataset directory written by ``Dataset.save_to_disk``
  (:mod:`~specdash.profile.datasets.hf_dir`, needs ``datasets``);
* ``random:in=N,out=M[,tokenizer=PATH]``: prompts of exactly N input tokens
  (:mod:`~specdash.profile.datasets.synthetic`; tokens counted by :mod:`~specdash.profile.datasets.tokens`).

Rows become prompts as :mod:`~specdash.profile.datasets.rows` says (``prompt`` / ``text`` /
``messages`` / ``conversations`` / ``turns``, ``category``, ``id`` / ``question_id``).  Rows with
``messages`` keep the whole chat: the chat API sends it and a client-side chat template
(``chat_template = "auto"``, :mod:`specdash.profile.chat`) renders it; token counts and raw-text sending
use its first ``user`` message.

Sampling: ``categories`` keeps rows of those categories only (``--dataset-category``); then
``num_prompts`` rows (default: all; 100 for ``random:``), chosen by a shuffle seeded with ``seed``
(SGLang's ``bench_serving`` shuffles ShareGPT the same way) and kept in file order; rows without a
usable prompt are skipped and counted.  ``min_input_tokens`` / ``max_input_tokens`` keep prompts whose
token count lies in the range.

Only the standard library and pydantic are imported at start-up; ``pyarrow``, ``datasets``,
``huggingface_hub``, ``httpx`` and ``tokenizers`` are imported inside the readers that need them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdash.profile.datasets import hf_dir, hub, jsonl, parquet, spec_bench, speed_bench
from specdash.profile.datasets.rows import HINT, first_row_hint, row_category, row_prompt, sample
from specdash.profile.datasets.synthetic import DEFAULT_RANDOM_PROMPTS, random_suite
from specdash.profile.datasets.tokens import (
    TokenCounter,
    _profile_tokenizer_path,
    sim_count,
    token_counter,
)
from specdash.profile.files import preset_dirs
from specdash.profile.schema import Profile, ProfileError, Suite, SuiteSection, expand_path

__all__ = [
    "DEFAULT_MAX_TOKENS", "DEFAULT_RANDOM_PROMPTS", "FORMATS", "NAMED", "TokenCounter", "_profile_tokenizer_path",
    "describe", "list_datasets", "load_dataset_suite", "resolve_dataset", "row_prompt", "sim_count", "token_counter",
]

DEFAULT_MAX_TOKENS = 256
"""``max_tokens`` of a file dataset's suite (``--max-tokens`` overrides)."""
DATASET_SUFFIXES = (".jsonl", ".json", ".parquet")
"""Suffixes a dataset name is looked up with under ``profiles/datasets/``, in order."""

Reader = Callable[[Path], tuple[str, Sequence[Any], dict]]
FORMATS: dict[str, Reader] = {**{s: jsonl.read for s in jsonl.SUFFIXES}, **{s: parquet.read for s in parquet.SUFFIXES}}
"""File readers by suffix (any other suffix is read as JSON / JSON Lines text); a directory is
:func:`specdash.profile.datasets.hf_dir.read`."""


@dataclass(frozen=True)
class NamedDataset:
    """A benchmark known by name: ``read(arg)`` (``arg`` = what follows ``NAME:``, or None) returns
    ``(format, rows, record fields)``; ``max_tokens`` is its suite's default output length."""

    name: str
    read: Callable[[str | None], tuple[str, list, dict]]
    description: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    arg: str = ""


NAMED: dict[str, NamedDataset] = {
    spec_bench.NAME: NamedDataset(spec_bench.NAME, spec_bench.read, spec_bench.DESCRIPTION, arg="[:PATH]"),
    speed_bench.NAME: NamedDataset(speed_bench.NAME, speed_bench.read, speed_bench.DESCRIPTION,
                                   speed_bench.DEFAULT_MAX_TOKENS, arg=f"[:{'|'.join(speed_bench.SUBSETS)}]"),
}
"""The named benchmarks, ``NAME[:ARG]`` (a new one is one module plus one entry here)."""


# --- the entry point ---------------------------------------------------------------------------


def load_dataset_suite(
    source: str,
    *,
    num_prompts: int | None = None,
    seed: int = 0,
    profile: Profile | None = None,
    min_input_tokens: int | None = None,
    max_input_tokens: int | None = None,
    categories: Sequence[str] | None = None,
) -> tuple[Suite, dict]:
    """The suite of a dataset and the record of it for the manifest (see the module docstring).

    Args:
        source: a named benchmark, hub id, dataset name, file, Hugging Face dataset directory or ``random:…``.
        num_prompts: how many prompts (None: all rows; 100 for ``random:``).
        seed: the sampling (and ``random:`` text) seed.
        profile: the target's profile: where the tokenizer is found, and whether it is the simulator.
        min_input_tokens: keep prompts of at least this many tokens.
        max_input_tokens: keep prompts of at most this many tokens.
        categories: keep rows of these categories only (None: all).

    Returns:
        ``(suite, record)``; ``record`` has ``source``, ``format``, ``path``, ``rows``, ``skipped``,
        ``num_prompts``, ``asked``, ``seed``, ``filters``, the reader's own fields (a hub dataset's
        ``repo_id``, ``config``, ``split``, ``revision``, ``files``; SPEED-Bench's ``placeholders``), the
        ``categories`` the prompts carry (``{category: prompts}``) and, when tokens were counted,
        ``token_count`` {method, tokenizer, note}.

    Raises:
        ProfileError: the source is missing, unreadable, not cached in offline mode, of the wrong shape,
            needs a library that is not installed, or leaves no prompt; the message names it and the fix.
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
    cats = [c.strip() for c in categories or [] if c.strip()] or None
    if source.startswith("random:"):
        if cats:
            raise ProfileError("--dataset-category filters a dataset's rows by category; random: prompts have none")
        return random_suite(source, num_prompts=num_prompts, seed=seed, profile=profile)
    fmt, rows, extra, name, path, max_tokens = _read_source(source)
    counter = token_counter(profile) if (min_input_tokens or max_input_tokens) else None
    s = sample(rows, num_prompts=num_prompts, seed=seed, counter=counter, lo=min_input_tokens, hi=max_input_tokens,
               categories=cats)
    where = path or source
    if not s.prompts:
        if cats and s.other_category == len(rows):
            have = sorted({c for c in map(row_category, rows) if c is not None})
            raise ProfileError(f"dataset {where}: no row of category {', '.join(cats)} (its categories: "
                               f"{', '.join(have) or 'none'}); fix --dataset-category")
        if s.filtered:
            raise ProfileError(
                f"dataset {where}: no prompt has between {min_input_tokens or 1} and {max_input_tokens or '∞'} "
                f"input tokens ({s.filtered} row(s) outside the range; counted by {counter.note}); "
                "widen --min-input-tokens / --max-input-tokens")
        raise ProfileError(f"dataset {where}: no usable prompt in {len(rows)} row(s){first_row_hint(rows)}; {HINT}")
    suite = Suite(
        suite=SuiteSection(name=name, description=f"dataset {source}: {len(s.prompts)} of {len(rows)} row(s), "
                           f"seed {seed}", max_tokens=max_tokens),
        prompts=s.prompts,
    )
    suite._path = path
    by_cat: dict[str, int] = {}
    for p in s.prompts:
        by_cat[p.category or "uncategorized"] = by_cat.get(p.category or "uncategorized", 0) + 1
    record = {"source": source, "format": fmt, "path": str(path) if path else None, "rows": len(rows),
              "skipped": s.skipped, "num_prompts": len(s.prompts), "asked": num_prompts, "seed": seed,
              "filters": {"min_input_tokens": min_input_tokens, "max_input_tokens": max_input_tokens,
                          "categories": cats}} | extra | {"categories": dict(sorted(by_cat.items()))}
    if cats:
        record["other_category"] = s.other_category
    if counter is not None:
        record["token_count"] = counter.record()
        record["filtered_out"] = s.filtered
    return suite, record


def _read_source(source: str) -> tuple[str, Sequence[Any], dict, str, Path | None, int]:
    """``(format, rows, record fields, suite name, path or None, default max_tokens)`` of a non-random source."""
    head, _, arg = source.partition(":")
    named = NAMED.get(head)
    if named is not None:
        fmt, rows, extra = named.read(arg or None)
        path = extra.pop("path", None)
        return fmt, rows, extra, source.replace(":", "-").replace("/", "-"), Path(path) if path else None, \
            named.max_tokens
    hs = hub.parse_source(source) if not Path(os.path.expanduser(source)).exists() else None
    if hs is not None and not _is_preset_name(source):
        fmt, rows, extra = hub.read(hs)
        return fmt, rows, extra, hs.repo_id.replace("/", "-") + (f"-{extra['config']}" if extra.get("config") else ""), \
            None, DEFAULT_MAX_TOKENS
    path = resolve_dataset(source)
    fmt, rows, extra = read_path(path)
    return fmt, rows, extra, path.stem if path.is_file() else path.name, path, DEFAULT_MAX_TOKENS


def _is_preset_name(source: str) -> bool:
    return any((d / "datasets" / f"{source}{suf}").is_file() for d in preset_dirs() for suf in DATASET_SUFFIXES)


def read_path(path: Path) -> tuple[str, Sequence[Any], dict]:
    """``(format, rows, extra record fields)`` of a dataset file (by :data:`FORMATS`) or directory."""
    if path.is_dir():
        return hf_dir.read(path)
    return FORMATS.get(path.suffix.lower(), jsonl.read)(path)


def resolve_dataset(source: str) -> Path:
    """The file or directory of a dataset source: an existing path, else a name under
    ``profiles/datasets/`` (``NAME.jsonl``, ``.json``, ``.parquet``).

    Raises:
        ProfileError: neither exists (the message lists the known names and the named benchmarks).
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
    named = ", ".join(f"{n.name}{n.arg}" for n in NAMED.values())
    raise ProfileError(
        f"dataset {source!r} does not exist (no such file or directory, and no dataset of that name under "
        f"{', '.join(str(d / 'datasets') for d in preset_dirs())}; known datasets: {known}; named benchmarks: "
        f"{named}); give a ShareGPT JSON, JSONL or Parquet file, a Hugging Face dataset directory or hub id "
        "(hf:OWNER/NAME), or random:in=N,out=M")


def list_datasets() -> list[tuple[str, Path]]:
    """The named datasets found under ``profiles/datasets/`` (name, path); the user's shadow the presets."""
    out: dict[str, Path] = {}
    for d in preset_dirs():
        base = d / "datasets"
        if base.is_dir():
            for f in sorted(base.iterdir()):
                if f.suffix in DATASET_SUFFIXES and f.is_file():
                    out.setdefault(f.stem, f)
    return sorted(out.items())


def describe(record: dict) -> str:
    """One line about a dataset record, for the bench's progress output."""
    tc = record.get("token_count")
    where = record.get("path") or (f"{record['repo_id']}, {record.get('config') or 'default'} / {record.get('split')}, "
                                   f"revision {str(record.get('revision'))[:12]}" if record.get("repo_id")
                                   else record.get("source"))
    line = f"dataset {record['source']} ({record['format']}, {where}): {record['num_prompts']} prompt(s)"
    if record.get("format") != "random":
        line += f" of {record['rows']} row(s), seed {record['seed']}"
        if record.get("skipped"):
            line += f", {record['skipped']} row(s) without a prompt skipped"
        if record.get("placeholders"):
            line += (f", {record['placeholders']} placeholder row(s) left out (text SPEED-Bench does not "
                     "redistribute: NeMo-Skills' speed-bench prepare.py fills it in)")
        cats = record.get("categories") or {}
        if len(cats) > 1 or (cats and "uncategorized" not in cats):
            line += "; categories " + ", ".join(f"{c} {n}" for c, n in cats.items())
    if tc:
        line += f"; tokens counted by {tc['note']}"
    return line
