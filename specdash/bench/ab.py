"""A/B runs: two profiles (and an optional no-speculation baseline), each in its own launch.

The launch order alternates by round (A, B then B, A) so drift on a shared machine favours
neither side; the baseline runs once and is paired with every round by prompt.  The
comparison (``comparison.json`` + CSV + Markdown) goes to ``DIR/<stamp>-compare/``.
"""

from __future__ import annotations

from dataclasses import replace

from specdash.bench.runner import RunOptions, run_one
from specdash.profile import Profile, Suite


async def run_ab(prof_a: Profile, prof_b: Profile, prof_r: Profile | None, suite: Suite, opts: RunOptions,
                 rounds: int) -> tuple[list[dict], dict]:
    """Run A and B (speedup = B over A) ``rounds`` times, and the baseline ``prof_r`` once.

    Each run's manifest gets ``ab`` = ``{"stamp", "side": "a"|"b"|"r", "round"}``.

    Returns:
        (the RUN dicts in launch order, the comparison dict with ``runs`` (their run
        directories) and ``compare_dir`` added).

    Raises:
        As :func:`specdash.bench.runner.run_one` (the first side that fails ends the A/B).
    """
    from specdash.bench.compare import build_comparison
    from specdash.bench.report import write_comparison
    from specdash.bench.rundir import RunDir, utc_stamp

    stamp = utc_stamp()
    repeats = opts.repeats or suite.suite.repeats
    recs: dict[str, list[dict]] = {"a": [], "b": [], "r": []}
    runs: list[dict] = []
    sides_run: list[str] = []  # the side of each RUN in ``runs``
    sides = {"a": prof_a, "b": prof_b}
    for rnd in range(max(1, rounds)):
        order = ["a", "b"] if rnd % 2 == 0 else ["b", "a"]
        if prof_r is not None and rnd == 0:
            order = ["r"] + order
        for side in order:
            prof = prof_r if side == "r" else sides[side]
            o = replace(opts, repeat_offset=rnd * repeats, stamp=None, resume=None,
                        side=(f"side {side.upper()}: {prof.name}" if side != "r" else f"baseline: {prof.name}")
                        + (f", round {rnd + 1} of {rounds}" if rounds > 1 else ""),
                        extra_manifest={**opts.extra_manifest, "ab": {"stamp": stamp, "side": side, "round": rnd}})
            run, records = await run_one(prof, suite, o)
            runs.append(run)
            sides_run.append(side)
            recs[side].extend(records)
    if prof_r is not None and rounds > 1:
        # the baseline ran once: pair it with every round by prompt only (repeat index modulo).
        base = recs["r"]
        recs["r"] = [dict(r, repeat=r["repeat"] + k * repeats) for k in range(rounds) for r in base]
    cmp = build_comparison(
        recs["a"], recs["b"], a_name=prof_a.name, b_name=prof_b.name,
        baseline_records=recs["r"] if prof_r is not None else None,
        baseline_name=prof_r.name if prof_r is not None else None,
        a_effective=next((r.get("effective") for r, sd in zip(runs, sides_run) if sd == "a"), None),
        b_effective=next((r.get("effective") for r, sd in zip(runs, sides_run) if sd == "b"), None),
    )
    cmp["runs"] = [r["run_dir"] for r in runs]
    cdir = RunDir.create(opts.out_dir, "compare", stamp=stamp)
    write_comparison(cdir.path, cmp)
    cmp["compare_dir"] = str(cdir.path)
    return runs, cmp
