"""``--dataset spec_bench[:PATH]``: the Spec-Bench question set (https://github.com/hemingkx/Spec-Bench,
``data/spec_bench/question.jsonl``), the prompts vLLM's ``bench serve --dataset-name spec_bench`` and
AIPerf's ``spec_bench`` sends.

Schema (one JSON object a line, as vLLM's ``SpecBench`` loader in ``vllm/benchmarks/datasets/datasets.py``
and AIPerf's ``SpecBenchLoader`` in ``src/aiperf/dataset/loader/spec_bench.py`` read it):
``{"question_id": …, "category": "…", "turns": ["first user turn", …]}``.  The first turn is the prompt
(both read ``turns[0]``); ``category`` — Spec-Bench's task families (multi-turn conversation from
MT-bench, translation, summarization, question answering, mathematical reasoning, retrieval-augmented
generation) as the file spells them — becomes the prompt's category, so the bench, the report and
``compare`` show acceptance per Spec-Bench task; ``question_id`` is the prompt's id.

Where the file comes from: ``spec_bench:PATH`` reads a local copy.  ``spec_bench`` alone reads the copy
in specdash's cache, ``${XDG_CACHE_HOME:-~/.cache}/specdash/datasets/spec_bench-<commit>.jsonl``, and
when it is not there downloads it once from :data:`URL` — the commit AIPerf pins
(:data:`COMMIT`) — unless offline mode is on (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``, as for hub
datasets), in which case the error gives the ``curl`` line that fetches it.
"""

from __future__ import annotations

import os
from pathlib import Path

from specdash.profile.datasets import hub, jsonl
from specdash.profile.schema import ProfileError, expand_path

NAME = "spec_bench"
COMMIT = "fd2c1cd7d2201ef71db4c5f4e455008f017967bf"
"""The Spec-Bench commit whose ``question.jsonl`` is fetched (the one AIPerf's loader pins)."""
URL = f"https://raw.githubusercontent.com/hemingkx/Spec-Bench/{COMMIT}/data/spec_bench/question.jsonl"
DESCRIPTION = "Spec-Bench's question set (first turn of each question; its task categories kept)"


def cache_path() -> Path:
    """Where the downloaded ``question.jsonl`` is kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "specdash" / "datasets" / f"spec_bench-{COMMIT[:12]}.jsonl"


def locate(arg: str | None) -> tuple[Path, dict]:
    """The ``question.jsonl`` to read (``arg``: a local path, else the cached or downloaded copy) and its
    record fields (``path``, ``url``, ``commit``, ``downloaded``).

    Raises:
        ProfileError: ``arg`` does not exist; not cached in offline mode; the download fails.
    """
    if arg:
        p = Path(expand_path(arg, where=f"--dataset {NAME}:{arg}") or "")
        if not p.is_file():
            raise ProfileError(f"--dataset {NAME}:{arg}: no such file (a local copy of Spec-Bench's "
                               f"data/spec_bench/question.jsonl, e.g. from {URL})")
        return p, {"url": None, "commit": None, "downloaded": False}
    p = cache_path()
    if p.is_file():
        return p, {"url": URL, "commit": COMMIT, "downloaded": False}
    fetch = f"curl -L --create-dirs -o {p} {URL}"
    if hub.offline():
        raise ProfileError(f"--dataset {NAME}: Spec-Bench's question.jsonl is not cached at {p} and offline mode is on "
                           f"({hub._offline_var()}): fetch it once with `{fetch}` (or unset it to let specdash "
                           f"download it), or give a local copy: --dataset {NAME}:PATH")
    _download(p, fetch)
    return p, {"url": URL, "commit": COMMIT, "downloaded": True}


def _download(dest: Path, fetch: str) -> None:
    import httpx

    try:
        resp = httpx.get(URL, timeout=60.0, follow_redirects=True)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise ProfileError(f"--dataset {NAME}: could not download {URL} ({type(exc).__name__}: {exc}); fetch it "
                           f"yourself with `{fetch}`, or give a local copy: --dataset {NAME}:PATH") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.part{os.getpid()}")
    tmp.write_bytes(resp.content)
    try:  # a page that is not JSON Lines (a proxy's error page) never lands in the cache
        jsonl.parse_lines(tmp)
    except ProfileError as exc:
        tmp.unlink(missing_ok=True)
        raise ProfileError(f"--dataset {NAME}: what {URL} sent is not Spec-Bench's JSON Lines ({exc}); nothing was "
                           f"cached; fetch it yourself with `{fetch}`, or give a local copy: --dataset {NAME}:PATH") from None
    tmp.replace(dest)


def read(arg: str | None) -> tuple[str, list, dict]:
    """``("spec_bench", rows, record)``: the rows of the question set (see the module docstring).

    Raises:
        ProfileError: as :func:`locate`, or a file that is not JSON Lines.
    """
    path, extra = locate(arg)
    _, rows, _ = jsonl.read(path)
    return NAME, list(rows), {"path": str(path), **extra}
