"""``--dataset speed_bench[:SUBSET]``: NVIDIA's SPEED-Bench (https://huggingface.co/datasets/nvidia/SPEED-Bench),
the benchmark vLLM's ``bench serve --dataset-name speed_bench`` and AIPerf's ``speed_bench_*`` datasets send.

SUBSET is one of the dataset's configurations (:data:`SUBSETS`; vLLM's ``--speed-bench-dataset-subset``,
AIPerf's ``hf_subset``): ``qualitative`` (default; 880 prompts, 80 in each of 11 semantic domains — built
for acceptance) or ``throughput_1k`` … ``throughput_32k`` (1,536 prompts of about that many input tokens
in three entropy tiers, ``low_entropy``, ``mixed``, ``high_entropy`` — built for throughput at a fixed
input length).  Its one split is ``test``.  The dataset is read from the local Hugging Face cache as any
hub dataset is (:mod:`specdash.profile.datasets.hub`: offline mode honoured; downloaded once otherwise;
``hf download nvidia/SPEED-Bench --repo-type dataset --include 'qualitative/*'`` fetches one subset).

Schema (the card's ``dataset_info``; AIPerf's ``SpeedBenchRow`` in ``src/aiperf/dataset/loader/speed_bench.py``):
``question_id`` (32 hex characters), ``category``, ``sub_category``, ``turns`` (list of strings),
``source``, ``src_id``, ``difficulty``, ``multiturn``.  The first turn is the prompt (vLLM and AIPerf's
single-turn mode read the same); ``category`` — the semantic domain (``coding``, ``humanities``,
``math``, ``multilingual``, ``qa``, ``rag``, ``reasoning``, ``roleplay``, ``stem``, ``summarization``,
``writing``) or the entropy tier — becomes the prompt's category, so acceptance is reported per
SPEED-Bench category; ``question_id`` is its id.

Some rows hold, instead of text, the placeholder :data:`PLACEHOLDER` (text whose source does not allow
redistribution; NVIDIA's ``prepare.py`` in NeMo-Skills, ``nemo_skills/dataset/speed-bench/``, fills it
in from the sources).  Such rows are left out and counted (``placeholders`` in the record), as AIPerf
refuses to benchmark placeholder text; a prepared JSONL (``{question_id, category, messages}`` or
``turns``) is read as a plain file: ``--dataset prepared.jsonl``.
"""

from __future__ import annotations

from typing import Any

from specdash.profile.datasets import hub
from specdash.profile.schema import ProfileError

NAME = "speed_bench"
REPO_ID = "nvidia/SPEED-Bench"
SPLIT = "test"
SUBSETS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
DEFAULT_SUBSET = "qualitative"
DEFAULT_MAX_TOKENS = 4096
"""Output tokens of a SPEED-Bench suite without ``--max-tokens`` (vLLM's ``--speed-bench-output-len``)."""
PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
DESCRIPTION = "NVIDIA SPEED-Bench (first turn of each prompt; its categories kept)"


def is_placeholder(row: Any) -> bool:
    """Whether a row's first turn (or message) is SPEED-Bench's placeholder instead of text."""
    if not isinstance(row, dict):
        return False
    turns = row.get("turns")
    first = turns[0] if isinstance(turns, (list, tuple)) and turns else None
    if first is None and isinstance(row.get("messages"), list) and row["messages"]:
        m = row["messages"][0]
        first = m.get("content") if isinstance(m, dict) else None
    return isinstance(first, str) and first.startswith(PLACEHOLDER)


def read(arg: str | None) -> tuple[str, list, dict]:
    """``("speed_bench", rows, record)``: the rows of one SUBSET without its placeholders; ``record`` adds
    ``subset`` and ``placeholders`` to the hub record.

    Raises:
        ProfileError: an unknown SUBSET; what :func:`specdash.profile.datasets.hub.read` raises; every
            row a placeholder (how to prepare them).
    """
    subset = arg or DEFAULT_SUBSET
    if subset not in SUBSETS:
        raise ProfileError(f"--dataset {NAME}:{subset}: SPEED-Bench has no subset {subset!r}; choose one of "
                           f"{', '.join(SUBSETS)} (e.g. --dataset {NAME}:throughput_1k)")
    _, rows, record = hub.read(hub.HubSource(REPO_ID, subset, SPLIT))
    kept = [r for r in rows if not is_placeholder(r)]
    holes = len(rows) - len(kept)
    if rows and not kept:
        raise ProfileError(f"--dataset {NAME}:{subset}: all {holes} row(s) are placeholders for text SPEED-Bench does "
                           "not redistribute: fill them in with NVIDIA's prepare script (NeMo-Skills, "
                           "nemo_skills/dataset/speed-bench/prepare.py) and pass its output: --dataset FILE.jsonl")
    return NAME, kept, {**record, "subset": subset, "placeholders": holes}
