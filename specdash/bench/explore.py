"""Cheaper server launches for a tune's exploration: what SGLang offers to start faster, applied only
to the launches that explore settings (never to the baseline, the final A/B or the adaptive schedule's
verification, whose figures are the ones a user keeps).

Two of SGLang's own options, and only where they cannot change what a launch measures at the tune's
concurrency ``c``:

* ``--skip-server-warmup`` (``python/sglang/srt/entrypoints/http_server.py`` ``_wait_and_warmup``, 0.5.x):
  the server marks itself up without its own warm-up request.  specdash's runner sends its own
  warm-up at the measured concurrency before every measurement (``specdash.bench.runner``), so the
  first measured round never pays a first-request cost either way.
* A smaller decode CUDA-graph capture list: ``--cuda-graph-max-bs-decode N`` (``--cuda-graph-max-bs``
  before 0.5.14), ``N`` the smallest entry ≥ ``c`` of the list SGLang captures by default for
  speculative decoding (``ServerArgs._generate_decode_cuda_graph_batch_sizes`` in
  ``python/sglang/srt/server_args.py``, 0.5.14: 1–8, then every 2 to 32, every 4 to 64, every 8 to 256,
  every 16 beyond; capped at ``max_bs`` with ``max_bs`` appended).  With that ``N`` the captured sizes ≤ N
  are exactly the default ones, and a closed-loop run at concurrency ``c`` never batches more than
  ``c ≤ N`` requests, so every round it runs replays the same graph it would have replayed.  Applied
  only when the capture list that would otherwise be used is known to reach ``N`` (the profile's own
  ``--cuda-graph-max-bs(-decode)``, or the list an earlier speculative launch of this tune reported)
  and is larger; never with ``--cuda-graph-bs(-decode)``, ``--disable-cuda-graph(-padding)`` or
  ``--disable-decode-cuda-graph`` in the profile, and never for an open-loop run (its batch is not
  bounded by a concurrency).

What it saves is measured on the H200 (``benchmarks/results/``): graph capture and the warm-up request
are the parts of a launch these options remove; imports and weight loading are not touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: The decode CUDA-graph flags that fix the capture list by other means (left alone when present).
_GRAPH_OFF_FLAGS = ("--cuda-graph-bs-decode", "--cuda-graph-bs", "--disable-cuda-graph", "--disable-cuda-graph-padding",
                    "--disable-decode-cuda-graph")


def default_spec_capture_bs(max_bs: int) -> list[int]:
    """SGLang's default decode CUDA-graph batch sizes for speculative decoding up to ``max_bs``
    (ascending, ``max_bs`` included).

    Read from SGLang when it is importable (``ServerArgs._generate_decode_cuda_graph_batch_sizes``),
    else the 0.5.14 rule it implements (module docstring).

    Raises:
        ValueError: ``max_bs`` < 1.
    """
    if max_bs < 1:
        raise ValueError(f"max_bs must be >= 1, not {max_bs}")
    try:
        from types import SimpleNamespace

        from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

        gen = ServerArgs._generate_decode_cuda_graph_batch_sizes
        ns = SimpleNamespace(disable_cuda_graph_padding=False, speculative_algorithm="EAGLE3")
        got = gen(ns, max_bs)
        if isinstance(got, list) and got and all(isinstance(b, int) for b in got):
            return sorted(set(got))
    except Exception:  # not installed, or another release's shape: the stored rule
        pass
    bs = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
          + list(range(272, max_bs + 1, 16)))
    bs = [b for b in bs if b <= max_bs]
    if max_bs not in bs:
        bs.append(max_bs)
    return bs


def graph_bs_for(concurrency: int) -> int:
    """The smallest entry ≥ ``concurrency`` of SGLang's default speculative capture list (see
    :func:`default_spec_capture_bs`): a ``max_bs`` that keeps every batch of a closed-loop run at
    that concurrency on the graph it would use by default."""
    c = max(1, int(concurrency))
    return next(b for b in default_spec_capture_bs(max(c, 512)) if b >= c)


@dataclass
class ExplorePlan:
    """What :func:`exploration_flags` adds (``flags``: argv words) and why (``notes``, one line each);
    ``saved``: what each flag saves, for the report; ``full_capture``: the decode batch sizes the launch
    would have captured without the capture-list change (None when the list is kept) — what the
    adaptive schedule plans over, not the cut list the launch reports."""

    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    full_capture: list[int] | None = None


def exploration_flags(server_flags: dict, *, version: str | None, concurrency: int | None,
                      captured_bs: Sequence[int] | None = None, open_loop: bool = False) -> ExplorePlan:
    """The flags that make an exploration launch cheaper without changing what it measures.

    Args:
        server_flags: the profile's launch flags, canonical name → value
            (:func:`specdash.profile.server_flags`).
        version: the SGLang release judged for the launch (its flag list decides which options exist;
            None: the newest stored list).
        concurrency: the closed-loop concurrency the launch is measured at (requests).
        captured_bs: the decode batch sizes an earlier speculative launch of the same profile captured
            (its manifest's ``cuda_graph_bs``), when known.
        open_loop: the run sends at a request rate (no concurrency bound): no capture-list change.

    Returns:
        An :class:`ExplorePlan`; empty flags when nothing applies (the notes say why).
    """
    from specdash.sglang.versions import flag_versions, known_flags

    plan = ExplorePlan()
    known = known_flags(version) if version else None
    if known is None:
        known = known_flags(str(flag_versions()[-1])) or set()
    if "--skip-server-warmup" in known and not server_flags.get("--skip-server-warmup"):
        plan.flags.append("--skip-server-warmup")
        plan.saved.append("SGLang's warm-up request (specdash warms up at the measured concurrency itself)")
    if open_loop or not concurrency:
        plan.notes.append("CUDA-graph capture list kept: an open-loop run's batch has no concurrency bound")
        return plan
    if any(f in server_flags for f in _GRAPH_OFF_FLAGS):
        plan.notes.append("CUDA-graph capture list kept: the profile sets it itself ("
                          + ", ".join(f for f in _GRAPH_OFF_FLAGS if f in server_flags) + ")")
        return plan
    name = "--cuda-graph-max-bs-decode" if "--cuda-graph-max-bs-decode" in known else "--cuda-graph-max-bs"
    if name not in known:
        plan.notes.append(f"CUDA-graph capture list kept: SGLang {version} has no {name}")
        return plan
    given = server_flags.get("--cuda-graph-max-bs-decode", server_flags.get("--cuda-graph-max-bs"))
    try:
        current = int(given) if given is not None else None
    except (TypeError, ValueError):
        current = None
    if current is None and captured_bs:
        current = max(int(b) for b in captured_bs)
    want = graph_bs_for(int(concurrency))
    if current is None:
        plan.notes.append("CUDA-graph capture list kept: its size is not known before a speculative launch has "
                          "reported it")
    elif current <= want:
        plan.notes.append(f"CUDA-graph capture list kept: it already ends at batch {current} "
                          f"(concurrency {concurrency} needs {want})")
    else:
        plan.flags += [name, str(want)]
        plan.full_capture = default_spec_capture_bs(current)
        n_default = len(plan.full_capture)
        n_now = len(default_spec_capture_bs(want))
        plan.saved.append(f"decode CUDA graphs captured for batch ≤ {want} ({n_now} sizes instead of {n_default} "
                          f"up to {current}; concurrency {concurrency} replays the same graphs)")
    return plan


def exploration_profile(profile, *, version: str | None, concurrency: int | None,
                        captured_bs: Sequence[int] | None = None, open_loop: bool = False):
    """``(profile copy with the flags of :func:`exploration_flags`, plan)``; the profile itself when no
    flag applies.

    Raises:
        ProfileError: the copy does not validate (it always does for a valid profile).
    """
    from specdash.bench.live import with_flags
    from specdash.profile import server_flags

    plan = exploration_flags(server_flags(profile), version=version, concurrency=concurrency,
                             captured_bs=captured_bs, open_loop=open_loop)
    if not plan.flags:
        return profile, plan
    return with_flags(profile, extra=plan.flags), plan
