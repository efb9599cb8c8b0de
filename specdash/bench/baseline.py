"""``specdash tune --baseline-from RUN_DIR``: an earlier run directory's no-speculation RUN standing in
for the tune's baseline launch, refused where it was measured with another set-up."""

from __future__ import annotations

from pathlib import Path

from specdash.results import output_tok_s


class BaselineRunError(ValueError):
    """``--baseline-from``: the run directory cannot stand in for this tune's baseline (the message
    says what differs and how to fix it)."""


def load_baseline_run(run_dir: Path, profile, suite) -> tuple[dict, list[str]]:
    """The no-speculation RUN of an earlier run directory, to stand in for the tune's baseline
    launch (``specdash tune --baseline-from DIR``); returns ``(RUN, notes)``.

    ``DIR`` is a finished ``specdash --bench`` run directory (``summary.json`` + ``manifest.json``,
    README "Run directories") of the same server without speculation — a ``--sweep`` directory
    serves when one of its points has the suite's concurrency.  Must match this tune: the model
    path, launcher and TP size of the profile, the suite's ``max_tokens`` and concurrency.  Another
    suite name (a copy of the suite, say) or other server arguments do not refuse it but are returned
    as notes (the report carries them).  ``RUN["run_dir"]`` is set to ``DIR`` (a live tune reads its decode lines
    from ``DIR/server.log`` when present).

    Raises:
        BaselineRunError: no such directory or files, a RUN with speculation, or a mismatch above.
    """
    from specdash.bench.rundir import RunFileError, read_run_file, read_summary

    d = Path(run_dir)
    try:  # the validated readers: bounded, depth-limited, RUN fields type-checked
        summary = read_summary(d / "summary.json")
        manifest = read_run_file(d / "manifest.json")
    except RunFileError as e:
        raise BaselineRunError(f"--baseline-from {d}: {e}; give a finished `specdash --bench` run directory (it "
                               "holds summary.json and manifest.json)") from None
    runs = summary.get("runs") if isinstance(summary, dict) else None
    if not isinstance(runs, list) or not runs:
        raise BaselineRunError(f"--baseline-from {d}: summary.json has no runs")
    if any((r.get("effective") or {}).get("speculative_algorithm") for r in runs):
        raise BaselineRunError(f"--baseline-from {d}: that run used speculation "
                               f"({(runs[0].get('effective') or {}).get('speculative_algorithm')}); the baseline is "
                               "the same server without [speculative]")
    conc = int(suite.suite.concurrency or 1)
    at = [r for r in runs if int(r.get("concurrency") or 1) == conc and output_tok_s(r)]
    if not at:
        have = sorted({int(r.get("concurrency") or 1) for r in runs})
        raise BaselineRunError(f"--baseline-from {d}: no measured run at the suite's concurrency {conc} (it has "
                               f"{', '.join(map(str, have))}); measure the baseline at {conc}, or pick a suite at one "
                               "of those")
    run = dict(at[-1])
    prof = manifest.get("profile_data") or {}
    srv, want = prof.get("server") or {}, profile.server
    wrong = [f"{k} {srv.get(k)!r} (this profile: {v!r})" for k, v in
             (("model_path", want.model_path), ("launcher", want.launcher), ("tp_size", want.tp_size))
             if srv.get(k) != v]
    if manifest.get("max_tokens") is not None and int(manifest["max_tokens"]) != int(suite.suite.max_tokens):
        wrong.append(f"max_tokens {manifest['max_tokens']} (this suite: {suite.suite.max_tokens})")
    if wrong:
        raise BaselineRunError(f"--baseline-from {d} was measured with another set-up: {'; '.join(wrong)}. "
                               "Measure the baseline with this profile's server and this suite, or tune without "
                               "--baseline-from")
    notes = []
    if run.get("suite") != suite.name:
        notes.append(f"the reused baseline ran suite {run.get('suite')!r}, this tune runs {suite.name!r} (same "
                     f"max_tokens and concurrency; its speedups hold only if the prompts are the same)")
    if list(srv.get("extra_args") or []) != list(want.extra_args or []):
        notes.append(f"the reused baseline's server ran with extra arguments {srv.get('extra_args')} where this "
                     f"profile has {list(want.extra_args or [])}")
    mine = profile.server.model_dump()
    for key in sorted(srv):  # what the baseline's manifest recorded (an older manifest may record less)
        if key in ("model_path", "launcher", "tp_size", "extra_args", "port", "api_key", "host"):
            continue
        if srv.get(key) != mine.get(key):
            notes.append(f"the reused baseline's server ran with {key} = {srv.get(key)!r} where this profile has "
                         f"{mine.get(key)!r}")
    env_then, env_now = prof.get("env"), dict(profile.env)
    changed = sorted(k for k in set(env_then or {}) | set(env_now)
                     if (env_then or {}).get(k) != env_now.get(k) and (env_then or {}).get(k) != "***")
    if env_then is not None and changed:
        notes.append(f"the reused baseline ran with another [env] ({', '.join(changed)} differ)")
    sim_then = prof.get("sim")
    sim_now = profile.sim.model_dump() if profile.sim is not None else {}
    if profile.server.launcher == "sim" and sim_then is not None and sim_then != sim_now:
        notes.append(f"the reused baseline's simulator settings were {sim_then}, this profile's are {sim_now}")
    run["run_dir"] = str(d)
    return run, notes
