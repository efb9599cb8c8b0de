"""What ``--bench`` runs, checked before anything loads: the profile and the suite (or dataset) with the
command line's request fields, the run's size, the flags that cannot run together (``check_args``: A/B,
``--sweep``, ``--dataset``, load shape, ``--goodput``) and what ``--resume RUNDIR`` takes from its manifest."""

from __future__ import annotations

import json
from pathlib import Path

from specdash import DEFAULT_SUITE
from specdash.commands.errors import UsageError, url_problem


def bench_profile(args):
    """``--profile`` loaded; for ``--resume`` of a derived profile's run (a tune's baseline or exploration,
    the manifest's ``variant``) the same profile made again (:func:`~specdash.profile.variants.apply_variant`).

    Raises:
        ProfileError: the profile cannot be read, or the run's changes no longer apply to it.
    """
    from specdash.profile import load_profile

    prof = load_profile(args.profile)
    changes = getattr(args, "profile_variant", None)
    if changes:
        from specdash.profile.variants import apply_variant

        prof = apply_variant(prof, changes)
    return prof


def bench_suite(args):
    """(the suite a bench sends, the dataset's manifest record or None): ``--dataset`` through
    :func:`specdash.profile.datasets.load_dataset_suite` (tokens counted for ``--profile``'s
    target), else ``--suite`` (default :data:`specdash.DEFAULT_SUITE`); then the request fields of the command line
    (:func:`with_request_fields`)."""
    suite, record = _bench_suite(args)
    return with_request_fields(suite, args), record


REQUEST_FLAGS = {"temperature": "--temperature", "top_p": "--top-p", "top_k": "--top-k",
                 "sampling_seed": "--sampling-seed", "extra_request_body": "--extra-request-body"}
"""Suite fields the command line can set, and their flags."""


def with_request_fields(suite, args):
    """``suite`` with ``--temperature`` / ``--top-p`` / ``--top-k`` / ``--sampling-seed`` /
    ``--extra-request-body JSON`` over its ``[suite]`` fields (validated as the suite file's are).

    Raises:
        UsageError: ``--extra-request-body`` is not a JSON object, or a value is out of range.
    """
    from pydantic import ValidationError

    from specdash.profile.schema import SuiteSection

    upd = {k: getattr(args, k) for k in REQUEST_FLAGS if getattr(args, k, None) is not None}
    if not upd:
        return suite
    if isinstance(upd.get("extra_request_body"), str):
        try:
            body = json.loads(upd["extra_request_body"])
        except ValueError as exc:
            raise UsageError(f"--extra-request-body is not valid JSON ({exc}); give an object, e.g. "
                             "'{\"sampling_params\": {\"min_p\": 0.05}}'") from None
        if not isinstance(body, dict):
            raise UsageError(f"--extra-request-body must be a JSON object (got a {type(body).__name__}), e.g. "
                             "'{\"return_logprob\": false}'")
        upd["extra_request_body"] = {**suite.suite.extra_request_body, **body}
    try:
        section = SuiteSection.model_validate({**suite.suite.model_dump(), **upd})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else ""
        raise UsageError(f"{REQUEST_FLAGS.get(key, key)}: {err['msg']}") from None
    new = suite.model_copy(update={"suite": section})
    new._path = suite.path
    return new


def request_fields(suite) -> dict:
    """The suite's sampling and extra request fields as the manifest records them."""
    s = suite.suite
    return {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "sampling_seed": s.sampling_seed,
            "extra_request_body": s.extra_request_body}


def _bench_suite(args):
    from specdash.profile import load_suite

    source = getattr(args, "dataset", None)
    if not source:
        return load_suite(args.suite or DEFAULT_SUITE), None
    from specdash.profile.datasets import load_dataset_suite

    return load_dataset_suite(
        source, num_prompts=getattr(args, "num_prompts", None), seed=getattr(args, "seed", None) or 0,
        profile=bench_profile(args) if args.profile else None,
        min_input_tokens=getattr(args, "min_input_tokens", None),
        max_input_tokens=getattr(args, "max_input_tokens", None), categories=dataset_categories(args))


def check_run_size(suite, repeats: int | None) -> None:
    """Refuse a run of more than :data:`specdash.bounded.MAX_RUN_REQUESTS` requests (prompts × repeats):
    its work list alone would take gigabytes before the first request.

    Raises:
        UsageError: too many requests, with the figure and the fix.
    """
    from specdash.bounded import MAX_RUN_REQUESTS

    reps = repeats or suite.suite.repeats
    n = len(suite.prompts) * reps
    if n > MAX_RUN_REQUESTS:
        raise UsageError(f"{len(suite.prompts):,} prompts × {reps:,} repeats = {n:,} requests, more than the "
                         f"{MAX_RUN_REQUESTS:,} one run sends; lower --repeats or sample the dataset with --num-prompts")


def dataset_categories(args) -> list[str] | None:
    """``--dataset-category A,B`` as a list (None when not given)."""
    raw = getattr(args, "dataset_category", None)
    cats = [c.strip() for c in raw.split(",") if c.strip()] if raw else []
    return cats or None


def check_resume(run_dir: Path, args) -> str | None:
    """Why ``--resume run_dir`` cannot continue with these arguments (None when it can).

    A run directory holds one profile, one suite and one request shape: resuming with
    another would mix them into one summary.
    """
    from specdash.profile import ProfileError

    m, problem = read_run_manifest(run_dir)
    if problem:
        return problem
    if args.vs or args.baseline:
        return "--resume continues one profile's run; it cannot be combined with --vs or --baseline"
    try:
        prof = bench_profile(args) if args.profile else None
        name = prof.name if prof is not None else "attached"
        suite = bench_suite(args)[0].name
    except ProfileError as exc:
        return str(exc)
    if prof is not None and isinstance(m.get("profile_data"), dict):
        from specdash.profile import redacted_profile_data

        try:
            now = redacted_profile_data(prof.expanded())  # the runner records the expanded profile
        except ProfileError as exc:
            return str(exc)
        for section in ("server", "speculative", "env", "sim"):
            was, cur = m["profile_data"].get(section), now.get(section)
            if was != cur:
                keys = sorted({*(was or {}), *(cur or {})}) if isinstance(was, dict) and isinstance(cur, dict) else []
                diff = [k for k in keys if (was or {}).get(k) != (cur or {}).get(k)]
                what = ", ".join(f"{section}.{k}: {was.get(k)!r} → {cur.get(k)!r}" for k in diff[:3]) if diff \
                    else f"[{section}] {was!r} → {cur!r}"
                if m.get("profile") != name:
                    return (f"it was run with profile {m.get('profile')!r}, not {name!r}: resume with that profile "
                            "(or with --resume RUNDIR alone)")
                return (f"profile {name!r} has changed since this run started ({what}); resuming would mix two "
                        "configurations in one run: start a new run, or resume with the profile as it was")
    for what, have, want in (("profile", m.get("profile"), name), ("suite", m.get("suite"), suite),
                             ("--max-tokens", m.get("max_tokens"), args.max_tokens),
                             ("--concurrency", m.get("concurrency"), args.concurrency),
                             ("--repeats", m.get("repeats"), args.repeats),
                             ("--request-rate", m.get("request_rate"), _rate_of(getattr(args, "request_rate", None))),
                             ("--burstiness", m.get("burstiness"), getattr(args, "burstiness", None)
                              if getattr(args, "request_rate", None) is not None else None)):
        if want is not None and have is not None and have != want:
            return f"it was run with {what} {have!r}, not {want!r}"
    if "request_rate" in m and (m.get("request_rate") is None) != (getattr(args, "request_rate", None) is None):
        was = "closed loop (--concurrency)" if m.get("request_rate") is None else f"--request-rate {m['request_rate']}"
        return f"it was run in {was}; resuming in the other load shape would mix two in one run"
    if m.get("request_rate") is not None and args.concurrency is not None and args.concurrency != m.get("concurrency"):
        return (f"it was run at --request-rate {m['request_rate']} with at most {m.get('concurrency') or 'unlimited'} "
                f"requests in flight, not {args.concurrency}")
    ds = m.get("dataset") if isinstance(m.get("dataset"), dict) else {}
    if ds or getattr(args, "dataset", None):  # the same sample of the same dataset, or prompt indices shift
        was = (ds.get("source"), ds.get("asked"), ds.get("seed") or 0, *(ds.get("filters") or {}).values())
        now = (getattr(args, "dataset", None), getattr(args, "num_prompts", None), getattr(args, "seed", None) or 0,
               getattr(args, "min_input_tokens", None), getattr(args, "max_input_tokens", None), dataset_categories(args))
        if was != now[:len(was)]:
            return (f"it was run with --dataset {was[0]!r} (--num-prompts {was[1]}, --seed {was[2]}), not "
                    f"{now[0]!r} (--num-prompts {now[1]}, --seed {now[2]}): another sample would shift the "
                    "prompt indices; resume with the same dataset flags, or start a new run")
    return None


def _rate_of(rate: float | None):
    """A ``--request-rate`` as the manifest writes it (``"inf"`` for all at once)."""
    import math

    return None if rate is None else ("inf" if math.isinf(rate) else float(rate))


def read_run_manifest(run_dir: Path) -> tuple[dict | None, str | None]:
    """(``manifest.json`` of ``run_dir``, None) or (None, why it cannot serve a resume)."""
    from specdash.bench.rundir import RunFileError, read_run_file

    manifest = Path(run_dir) / "manifest.json"
    if not manifest.is_file():
        return None, "no manifest.json there (not a specdash run directory, or it does not exist)"
    try:
        m = read_run_file(manifest)  # bounded, depth-limited, an object
    except RunFileError as exc:
        return None, f"{manifest} cannot be read ({exc}); it is not a run directory specdash can continue"
    if not isinstance(m.get("profile"), str):
        return None, f"{manifest} has no profile entry: not a run directory specdash wrote"
    return m, None


def resume_defaults(args) -> dict:
    """``--resume RUNDIR`` needs no other argument: what the command line leaves out — the profile
    (its recorded path, else its name), the suite, ``--repeats`` / ``--max-tokens`` /
    ``--concurrency``, an attached run's URL — is taken from the run directory's manifest.
    Returns the manifest.

    Raises:
        UsageError: the manifest is missing, unreadable or not specdash's, or it is a sweep's.
    """
    m, problem = read_run_manifest(Path(args.resume))
    if problem:
        raise UsageError(f"cannot resume {args.resume}: {problem}")
    if m.get("sweep"):
        raise UsageError(f"cannot resume {args.resume}: it is a --sweep run (one RUN per point); "
                         "run the sweep again instead")
    if not args.profile and not args.url:
        if m.get("attached"):
            args.url = m.get("url")
        else:
            path = m.get("profile_path")
            args.profile = path if path and Path(path).is_file() else m["profile"]
            variant = m.get("variant")
            if isinstance(variant, dict) and isinstance(variant.get("changes"), dict) and path \
                    and Path(path).is_file():  # a tune's derived profile: the file's, with the run's changes
                args.profile_variant = variant["changes"]
    ds = m.get("dataset")
    if not args.suite and not getattr(args, "dataset", None) and isinstance(ds, dict) and ds.get("source"):
        args.dataset = ds["source"]  # a --dataset run: the same source, sample and filters
        for flag, key in (("num_prompts", "asked"), ("seed", "seed")):
            if getattr(args, flag, None) is None and isinstance(ds.get(key), int):
                setattr(args, flag, ds[key])
        for flag in ("min_input_tokens", "max_input_tokens"):
            if getattr(args, flag, None) is None and isinstance((ds.get("filters") or {}).get(flag), int):
                setattr(args, flag, ds["filters"][flag])
        cats = (ds.get("filters") or {}).get("categories")
        if getattr(args, "dataset_category", None) is None and isinstance(cats, list) and cats:
            args.dataset_category = ",".join(map(str, cats))
    if not args.suite and not getattr(args, "dataset", None) and m.get("suite"):
        path = m.get("suite_path")
        args.suite = path if path and Path(path).is_file() else m["suite"]
    for flag in ("repeats", "max_tokens", "concurrency"):
        if getattr(args, flag) is None and isinstance(m.get(flag), int):
            setattr(args, flag, m[flag])
    # an open-loop run continues open-loop, at its rate and burstiness, with its goodput SLOs
    rate = m.get("request_rate")
    if getattr(args, "request_rate", None) is None and rate is not None:
        args.request_rate = float("inf") if rate == "inf" else float(rate)
        if isinstance(m.get("burstiness"), (int, float)) and getattr(args, "burstiness", None) in (None, 1.0):
            args.burstiness = float(m["burstiness"])
    if not getattr(args, "goodput", None):
        from specdash.bench.rundir import RunFileError, read_summary

        try:
            runs = read_summary(Path(args.resume) / "summary.json")["runs"]
        except RunFileError:
            runs = []
        slo = next((r.get("goodput_slo") for r in runs if isinstance(r, dict) and r.get("goodput_slo")), None)
        if isinstance(slo, dict):
            args.goodput = [f"{k.removesuffix('_ms')}:{v:g}" for k, v in slo.items() if isinstance(v, (int, float))]
    return m


def check_args(args) -> None:
    """Raise :class:`UsageError` for flags that cannot run together (before anything loads)."""
    if args.resume:
        resume_defaults(args)  # --resume RUNDIR alone: the rest comes from its manifest
    if not args.profile and not args.url:
        raise UsageError("give --profile P (or --url URL to attach, or --demo)")
    if args.vs and args.url:
        raise UsageError("--vs launches both sides; it cannot be combined with --url")
    from specdash import bounded as B

    limits = {"repeats": B.MAX_REPEATS, "max_tokens": B.MAX_TOKENS, "concurrency": B.MAX_CONCURRENCY,
              "rounds": B.MAX_ROUNDS}
    if getattr(args, "seed", None) is not None and not 0 <= args.seed <= B.MAX_SEED:
        raise UsageError(f"--seed must be a whole number from 0 to 2**64 - 1 (got {args.seed})")
    for flag, hi in limits.items():  # also the values --resume took from a manifest (repeats = 10**9 …)
        value = getattr(args, flag)
        if value is not None:
            try:
                B.bounded_int(value, lo=1, hi=hi, what=f"--{flag.replace('_', '-')}")
            except B.InputError as exc:
                src = f" (from {args.resume}/manifest.json)" if args.resume else ""
                raise UsageError(f"{exc}{src}") from None
    if args.url and (problem := url_problem(args.url)):
        raise UsageError(problem)
    _check_dataset_args(args)
    args.sweep_spec = None
    if getattr(args, "sweep", None):
        from specdash.bench.points import parse_sweep

        try:
            args.sweep_spec = parse_sweep(args.sweep)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        rate_sweep = args.sweep_spec.var == "request_rate"
        for flag, why in (("vs", "a sweep compares one profile with its baseline (--baseline R); sweep each "
                                 "profile on its own and compare the two with `specdash compare A B`"),
                          ("resume", "a sweep cannot be resumed; run it again"),
                          ("concurrency", "the sweep sets the concurrencies itself (--sweep request_rate=… takes "
                                          "--concurrency as its in-flight cap)"),
                          ("request_rate", "the sweep sets the request rates itself" if rate_sweep else
                                           "a concurrency sweep is closed loop; sweep request_rate=R,R,… for "
                                           "open-loop load")):
            if getattr(args, flag, None) not in (None, False) and not (flag == "concurrency" and rate_sweep):
                raise UsageError(f"--sweep cannot be combined with --{flag.replace('_', '-')}: {why}")
        if args.rounds != 1:
            raise UsageError("--sweep runs one launch per side; --rounds does not apply")
    elif args.rounds != 1 and not args.vs and not args.baseline:
        raise UsageError(f"--rounds {args.rounds} alternates the launch order of an A/B, and this run has no second "
                         "side: add --vs Q (the profile to compare; speedup = Q over P) or --baseline R, e.g. "
                         f"specdash --bench --profile {args.profile or 'P'} --vs Q --rounds {args.rounds}")
    _check_load_args(args)
    if args.resume:
        problem = check_resume(Path(args.resume), args)
        if problem:
            raise UsageError(f"cannot resume {args.resume}: {problem}")


def _check_dataset_args(args) -> None:
    """``--dataset`` replaces ``--suite``; ``--num-prompts`` / ``--min-input-tokens`` /
    ``--max-input-tokens`` need it and must be at least 1."""
    given = [f for f in ("num_prompts", "min_input_tokens", "max_input_tokens", "dataset_category")
             if getattr(args, f, None) is not None]
    if getattr(args, "dataset", None):
        if args.suite:
            raise UsageError("--dataset replaces --suite: give one of them (the dataset's prompts are sent with "
                             "temperature 0 and ignore_eos; --max-tokens, --concurrency and --repeats still apply)")
        from specdash import bounded as B

        for flag in given:
            if flag == "dataset_category":
                continue
            hi = B.MAX_PROMPTS if flag == "num_prompts" else B.MAX_TOKENS
            try:
                B.bounded_int(getattr(args, flag), lo=1, hi=hi, what=f"--{flag.replace('_', '-')}")
            except B.InputError as exc:
                raise UsageError(str(exc)) from None
    elif given:
        raise UsageError(f"--{given[0].replace('_', '-')} applies to --dataset FILE; a suite sends all its prompts")


def _check_load_args(args) -> None:
    """``--request-rate`` / ``--burstiness`` / ``--goodput``: values, combinations; sets ``args.goodput_slo``."""
    import math

    from specdash import bounded as B

    rate, burst = getattr(args, "request_rate", None), getattr(args, "burstiness", 1.0)
    if rate is not None:
        try:  # 1e-300 would wait for ever, 1e9 build a billion-request schedule
            B.bounded_float(rate, lo=B.MIN_REQUEST_RATE, hi=B.MAX_REQUEST_RATE, what="--request-rate",
                            unit="requests/s", allow_inf=True)
        except B.InputError as exc:
            raise UsageError(str(exc)) from None
    if burst is not None and (not math.isfinite(burst) or not B.MIN_BURSTINESS <= burst <= B.MAX_BURSTINESS):
        raise UsageError(f"--burstiness must be a finite number from {B.MIN_BURSTINESS:g} to {B.MAX_BURSTINESS:g} "
                         f"(1 = Poisson, < 1 burstier, > 1 more even; got {burst:g})")
    rate_sweep = getattr(getattr(args, "sweep_spec", None), "var", None) == "request_rate"
    if rate is None and not rate_sweep and burst not in (None, 1.0):
        raise UsageError("--burstiness shapes the arrivals of --request-rate; give --request-rate R (or "
                         "--sweep request_rate=R,R,…) too")
    args.goodput_slo = None
    if getattr(args, "goodput", None):
        from specdash.collect.stream import parse_slo

        try:
            args.goodput_slo = parse_slo(args.goodput)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
