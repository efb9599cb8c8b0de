"""Live tuning: two chain step tiers measured inside one SGLang launch (``specdash tune --live``).

SGLang's adaptive speculation (``--speculative-adaptive``, ``srt/speculative/
adaptive_spec_params.py``) pre-builds one runtime state per candidate step count and switches
between them while it serves.  :func:`specdash.sglang.adaptive.interleave_config` writes a
config whose hysteresis forces a move at every decision, so the slot alternates between two
step counts every three verify batches whatever the acceptance (SGLang 0.5.14+; before, a
decision runs the down and the up loop together and the slot never moves).  One launch then
measures both tiers at the same load, on the same server, interleaved in time — drift on the
machine hits both alike.

A live launch (:meth:`LivePlan.measure_pair`):

1. the profile with ``--speculative-num-steps max(a, b)`` / topk 1 / draft tokens ``max + 1``,
   ``--speculative-adaptive --speculative-adaptive-config <interleave config>``,
   ``--decode-log-interval 1`` (one ``Decode batch`` line per iteration), ``--enable-metrics``
   and ``SGLANG_ENABLE_METRICS_DEVICE_TIMER=1`` (the per-phase GPU counters), runs the suite;
2. :class:`specdash.collect.tiers.TierTracker` attributes the decode lines of its
   ``server.log`` to the tiers (the last ``Switch adaptive runtime state`` before each line);
   the decode lines after each switch that still report the old tier are discarded, and
   so is every window not at the suite's load (ramp-up and ramp-down of the batch);
3. :func:`specdash.collect.tiers.paired_windows` pairs each tier-``a`` window with the next
   tier-``b`` window; the paired speedup of ``b`` over ``a`` and its interval are
   :func:`specdash.bench.stats.paired_speedup` (geometric mean of the paired ratios, BCa
   bootstrap with the small-sample expansion);
4. each tier becomes a :class:`~specdash.advisor.Measurement` (``source="tier"``, the launch's
   id in ``launch``): its decode tok/s and accept length over the kept windows; with the device
   timer, the launch's per-phase GPU time (the RUN's ``device_time_s`` over the run's window) as
   one pooled observation (:func:`tier_phases`); its verify-round histogram split from the one SGLang
   pools over the launch's requests (:func:`~specdash.collect.tiers.split_pair_histogram`), so the
   acceptance fit sees a tier per position as it sees a launch; and the standard error of its tok/s
   from its windows' spread (:func:`window_se`, the report's ``interval``).  The decode lines are read
   over the run's own window (its RUN's ``log_window``: no warm-up; a sweep point's stretch only), and
   the suite runs :data:`LIVE_ROUNDS` times, so each tier gets about a launch's verify rounds.

Where the error of a tier was (issue 26, measured on the simulator against its analytic figures): the
round rate per tier read 0.99–1.01 of the expectation, as a launch's; the accept length 0.96–1.03 — the
sampling noise of half a launch's rounds.  The rounds, the histogram and the interval address that.

Static launches of a live tune (the baseline, relaunched trees) get ``--decode-log-interval 1``
too and are measured the same way (:meth:`LivePlan.measure_static`), so every measurement the
advisor compares is decode throughput from the server's own lines.

Why two tiers per launch, not more
----------------------------------
A slot's decision (``AdaptiveStepSlot.update``) steps down while the EMA is at or below the next
lower candidate's threshold and, failing that, up while it is above the next higher one's.  To
force a move whatever the acceptance, the hysteresis must make every threshold pass; then a
slot with three or more candidates falls straight from the top to the bottom candidate and
climbs straight back (``[1, 3, 7]`` runs 7, 1, 7, 1 …: the middle is never visited), and a
steps-0 candidate only ever probes one step up.  Finite hysteresis values would make the
visits depend on the acceptance EMA — not a schedule a measurement can rely on.  Several slots
keyed by batch size do not help either: at a fixed load every decode batch is padded to the
same captured size and routed to the same slot (``_pad_to_cuda_graph_bs``,
``_find_closest_bs``), so the other slots never run, and different loads would confound tier
with load.  So one launch measures one pair; more tiers take more launches (the planner's next
pair, up to ``chain_budget`` launches).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specdash.profile import parse_profile, profile_variant

#: Environment of every live-tune launch: SGLang's per-phase GPU timer (``srt/environ.py``).
DEVICE_TIMER_ENV = {"SGLANG_ENABLE_METRICS_DEVICE_TIMER": "1"}

#: Verify batches per tier between forced switches in a live launch: the first
#: OVERLAP_REPORT_LAG_BATCHES after each switch still report the old tier and are discarded, so 8
#: keeps 6 of 8 (SGLang's recorded interleave used 3, which keeps 1 of 3).
LIVE_UPDATE_INTERVAL = 8


def live_unavailable(profile, start, version: str) -> str | None:
    """Why ``--live`` cannot measure tiers for this start and release (None: it can).

    A tree start (topk > 1) does not switch the live path off: SGLang's adaptive mode runs chains
    only (``adaptive_unsupported_reason`` refuses topk ≠ 1), so the chain tiers are measured live
    and the trees — the start among them — by launches of their own, and the pick is made across
    both.  Releases that cannot alternate two tiers (before 0.5.14,
    :func:`~specdash.sglang.adaptive.interleave_config` raises) and launch flags that turn adaptive
    off (attention DP, multi-layer EAGLE, two-batch overlap, PD-mux) fall back to relaunches.
    """
    from specdash.profile import server_flags
    from specdash.sglang.adaptive import (
        AdaptiveConfigError,
        interleave_config,
        launch_booleans,
        unsupported_reason,
    )

    try:
        interleave_config(1, 3, version)
    except AdaptiveConfigError as exc:
        return (f"SGLang {version} cannot alternate two step tiers inside one launch ({exc}); every setting is "
                "measured by a launch of its own — SGLang 0.5.14 or later can")
    algo = (profile.speculative.algorithm or "").upper() or None
    reason = unsupported_reason(version, algorithm="EAGLE" if algo == "NEXTN" else algo, topk=1,
                                **launch_booleans(server_flags(profile), dict(profile.env), version))
    if reason is not None:
        return f"SGLang {version} turns adaptive speculation off for this profile ({reason})"
    return None


def with_flags(profile, *, extra: Sequence[str] = (), env: dict[str, str] | None = None, name: str | None = None,
               spec: dict[str, Any] | None = None):
    """A copy of ``profile`` with server flags appended to ``[server] extra_args`` (replacing the
    same flags there), ``[env]`` additions, metrics on and, optionally, ``[speculative]`` fields."""
    from specdash.sglang.cmdline import flags_to_argv, parse_command_line

    prof = profile_variant(profile, spec, name=name) if spec is not None else profile
    data = prof.model_dump()
    have = parse_command_line(["x", *data["server"].get("extra_args", [])]).flags
    add = parse_command_line(["x", *extra]).flags
    have.update(add)
    data["server"]["extra_args"] = flags_to_argv(have)
    data["server"]["enable_metrics"] = True
    data["env"] = {**data.get("env", {}), **(env or {})}
    if name is not None:
        data["name"] = name
    out = parse_profile(data, prof.path or f"<{prof.name}>")
    out._path = profile.path
    return out


def decode_logged(prof):
    """``prof`` with one decode line per iteration, metrics and the device timer on (every launch
    of a live tune, so that all its measurements come from the server's decode lines)."""
    return with_flags(prof, extra=["--decode-log-interval", "1"], env=DEVICE_TIMER_ENV)


def _load_window(w, concurrency: int) -> bool:
    """The window ran at the suite's load (mean batch within 10 %, at least ± 0.5 request)."""
    if w.iterations <= 0:
        return False
    batch = w.request_rounds / w.iterations
    return abs(batch - concurrency) <= max(0.5, 0.1 * concurrency)


def _read_lines(run: dict) -> list[str]:
    try:
        return (Path(run["run_dir"]) / "server.log").read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, KeyError, TypeError):
        return []


def _counters(run: dict, name: str) -> str | None:
    try:
        return (Path(run["run_dir"]) / name).read_text(encoding="utf-8")
    except (OSError, KeyError, TypeError):
        return None


def tier_phases(run: dict, all_windows, tiers: Sequence[int], batch: float):
    """The device-timer phases of one live launch, as one pooled observation
    (:class:`~specdash.advisor.PhaseTimes` with ``mix``), or None.

    SGLang's counter ``sglang:forward_execution_seconds_total{category}`` (``eagle_draft``,
    ``eagle_draft_extend``, ``target_verify``) is not split by tier, so the launch gives one
    observation: the share-weighted mean round of its tiers, which the cost fit reads as the
    weighted mean of the chains' phase rows (exact: the model is linear in S and N).  Preferred:
    the RUN's ``device_time_s`` and ``decode_iterations`` over the run's window of the log, with
    the tiers' ``share`` of its request-rounds; else the counters at the end of the run
    (``metrics-after.txt``: the server's whole life) over every decode line of its log, shares
    from the windows' iterations (after-switch ones too: under the alternation each tier gets the
    same iterations either way).  None without the counter or without both tiers.
    """
    from specdash.advisor import PhaseTimes
    from specdash.advisor.measurement import (
        DRAFT_CATEGORY,
        DRAFT_EXTEND_CATEGORY,
        FORWARD_SECONDS,
        VERIFY_CATEGORY,
    )
    from specdash.sglang.metrics import parse_metrics

    secs, rounds, shares = run.get("device_time_s"), run.get("decode_iterations"), {}
    for t in run.get("tiers") or []:
        if t.get("speculative_num_steps") in tiers and t.get("share"):
            shares[int(t["speculative_num_steps"])] = float(t["share"])
    if not (isinstance(secs, dict) and secs.get(VERIFY_CATEGORY) and rounds and set(shares) == set(tiers)):
        text = _counters(run, "metrics-after.txt")
        if not text:
            return None
        try:
            snap = parse_metrics(text)
        except ValueError:
            return None
        secs = {c: snap.total(FORWARD_SECONDS, category=c) for c in (DRAFT_CATEGORY, DRAFT_EXTEND_CATEGORY,
                                                                    VERIFY_CATEGORY)}
        iters: dict[int, float] = {}
        for w in all_windows:
            if w.steps in tiers:
                iters[w.steps] = iters.get(w.steps, 0.0) + w.iterations
        if not secs.get(VERIFY_CATEGORY) or set(iters) != set(tiers) or min(iters.values()) <= 0:
            return None
        rounds = sum(iters.values())
        shares = {s: iters[s] / rounds for s in iters}
    tot = sum(shares.values())
    return PhaseTimes(draft_s=float(secs.get(DRAFT_CATEGORY) or 0.0),
                      draft_extend_s=float(secs.get(DRAFT_EXTEND_CATEGORY) or 0.0),
                      verify_s=float(secs[VERIFY_CATEGORY]), rounds=float(rounds), batch=batch,
                      mix=tuple((s, shares[s] / tot) for s in sorted(shares)))


@dataclass
class PairResult:
    """One live launch: tiers ``a`` < ``b`` and what they measured.

    ``speedup``: b over a (:class:`~specdash.bench.stats.SpeedupResult`) over ``pairs`` paired
    windows; ``windows``: steps → kept windows; ``discarded``: after-switch windows left out;
    ``off_load``: windows left out for another batch size; ``switches``: switch lines seen.
    """

    launch: int
    a: int
    b: int
    config: str
    run_dir: str | None
    concurrency: int
    measurements: list = field(default_factory=list)
    speedup: Any = None
    pairs: int = 0
    windows: dict[int, int] = field(default_factory=dict)
    discarded: int = 0
    off_load: int = 0
    switches: int = 0
    tok_s: dict[int, float | None] = field(default_factory=dict)
    accept_length: dict[int, float | None] = field(default_factory=dict)
    timer: bool = False
    notes: list[str] = field(default_factory=list)
    tok_s_se: dict[int, float | None] = field(default_factory=dict)
    also: PairResult | None = None

    def summary(self) -> str:
        sp = self.speedup
        parts = [f"steps {s}: {self.tok_s.get(s) or 0:.1f} tok/s, τ {self.accept_length.get(s) or 0:.2f} "
                 f"({self.windows.get(s, 0)} windows)" for s in (self.a, self.b)]
        line = "; ".join(parts) + f"; {self.discarded} decode lines after switches discarded"
        if sp is not None and sp.speedup:
            lo, hi = sp.ci95
            ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""
            line += f"; steps {self.b} over {self.a}: ×{sp.speedup:.3f}{ci} over {sp.pairs} paired windows ({sp.verdict})"
        return line

    def to_json(self) -> dict[str, Any]:
        sp = self.speedup
        return {
            "launch": self.launch, "tiers": [self.a, self.b], "config": self.config, "run_dir": self.run_dir,
            "concurrency": self.concurrency, "switches": self.switches,
            "windows": {str(k): v for k, v in self.windows.items()}, "discarded_after_switch": self.discarded,
            "off_load": self.off_load, "pairs": self.pairs,
            "speedup": {"b_over_a": sp.speedup, "ci95": list(sp.ci95), "verdict": sp.verdict, "method": sp.method,
                        "pairs": sp.pairs} if sp is not None else None,
            "tok_s": {str(k): v for k, v in self.tok_s.items()},
            "accept_length": {str(k): v for k, v in self.accept_length.items()},
            "device_timer": self.timer, "notes": self.notes,
            "tok_s_se": {str(k): v for k, v in self.tok_s_se.items()},
            "also": self.also.to_json() if self.also is not None else None,
        }


class LivePlan:
    """The live part of one tune: which pairs to launch, and measuring them (module docstring)."""

    WHY_TWO = ("one adaptive launch alternates exactly two tiers: with hysteresis that forces a move at every "
               "decision, SGLang's slot (adaptive_spec_params.py AdaptiveStepSlot.update) jumps between its lowest "
               "and highest candidate and never visits a middle one; slots keyed by batch size do not add tiers at a "
               "fixed load (every batch routes to the same slot) — so each launch measures one pair")

    def __init__(self, profile, version: str, tdir: Path) -> None:
        self.profile = profile
        self.version = version
        self.tdir = Path(tdir)
        self.launches = 0
        self.reason = ""
        self.batch_sizes: list[int] | None = None

    # -- profiles ---------------------------------------------------------------------------------
    def pair_profile(self, a: int, b: int, config: Path):
        """The adaptive launch of tiers a < b (launch steps b, a candidate of the config)."""
        name = f"{self.profile.name}-live-s{a}-s{b}"
        return with_flags(self.profile, spec={"num_steps": b, "eagle_topk": 1, "num_draft_tokens": b + 1},
                          extra=["--speculative-adaptive", "--speculative-adaptive-config", str(config),
                                 "--decode-log-interval", "1"], env=DEVICE_TIMER_ENV, name=name)

    # -- choosing ---------------------------------------------------------------------------------
    def next_pair(self, planner, measurements, start) -> tuple[int, int] | None:
        """The next two chain step counts to interleave, or None (``reason`` says why).

        First launch: the start's steps and the far end of :meth:`TunePlanner.chain_tiers`'s spread
        of SGLang's default batch-1 slot (1, S, 2S + 1): the widest pair that includes the start.
        Later: the planner's two best unmeasured chains; with only one, it is paired with the best
        measured chain (a paired comparison against the incumbent at the same load).
        """
        from specdash.advisor import tier_measurable

        conc = planner._conc(measurements)
        chains = {m.settings.steps for m in measurements if m.settings is not None and tier_measurable(m.settings)
                  and (conc is None or max(1, int(m.concurrency)) == conc)}
        if not chains:
            tiers = planner.chain_tiers(measurements, max_tiers=3)
            s = start.steps
            others = [t for t in tiers if t != s] or [min(8, 2 * s + 1) if s > 1 else 3]
            far = max(others, key=lambda t: (abs(t - s), t))
            self.reason = (f"the start (steps {s}) and the far end of the spread {sorted({*tiers, s})} of SGLang's "
                           "default batch-1 slot")
            return tuple(sorted((s, far)))
        tiers = [t for t in planner.chain_tiers(measurements, max_tiers=2) if t not in chains]
        if not tiers:
            self.reason = ("no unmeasured chain is predicted to beat the best measured by more than "
                           f"{planner.min_gain:.0%} (upper interval ends)")
            return None
        if len(tiers) >= 2:
            self.reason = f"the planner's two best unmeasured chains (steps {tiers[0]} and {tiers[1]})"
            return tiers[0], tiers[1]
        best = planner.best(measurements)
        inc = best.steps if tier_measurable(best) else max(chains)
        if inc == tiers[0]:
            inc = max(chains)
        self.reason = (f"the planner's one unmeasured chain worth a look (steps {tiers[0]}) against the best "
                       f"measured chain (steps {inc}), paired at the same load")
        return tuple(sorted((tiers[0], inc)))

    def partner(self, steps: int, planner, measurements) -> int:
        """The chain step count to interleave with ``steps`` (the planner's next chain) in a live launch:
        the next unmeasured chain the planner ranks worth a look (:meth:`TunePlanner.chain_tiers`), else
        the best measured chain (a paired comparison against the incumbent at the same load), else one
        step further from the start; ``reason`` says which."""
        from specdash.advisor import tier_measurable

        conc = planner._conc(measurements)
        measured = {m.settings.steps for m in measurements if m.settings is not None and tier_measurable(m.settings)
                    and (conc is None or max(1, int(m.concurrency)) == conc)}
        for t in planner.chain_tiers(measurements, max_tiers=3):
            if t != steps and t not in measured:
                self.reason = f"steps {t}: the next unmeasured chain worth a look"
                return t
        best = planner.best(measurements)
        if tier_measurable(best) and best.steps != steps:
            self.reason = f"steps {best.steps}: the best measured chain, paired at the same load"
            return best.steps
        other = steps + 1 if steps < 8 else steps - 1
        self.reason = f"steps {other}: the neighbour"
        return other

    # -- measuring --------------------------------------------------------------------------------
    def _tracker(self, run: dict, steps: int | None, draft: int | None):
        """The decode lines of ``run``'s own window of ``server.log`` (its RUN's ``log_window``: a
        sweep point's stretch, no warm-up), attributed; the lines before it only move the tier."""
        from specdash.collect.tiers import TierTracker

        lines = _read_lines(run)
        tr = TierTracker(steps, draft, decode_log_interval=1)
        win = run.get("log_window")
        if isinstance(win, list) and len(win) == 2:
            lo, hi = max(0, int(win[0])), min(len(lines), int(win[1]))
            for ln in lines[:lo]:
                tr.skip(ln)
            return tr.feed_lines(lines[lo:hi])
        return tr.feed_lines(lines)

    def measure_static(self, run: dict, *, launch: int):
        """A static launch of a live tune as a :class:`~specdash.advisor.Measurement` (``source``
        ``"launch"``): decode tok/s and τ from its decode lines at the suite's load (the run's own
        window); the run's accept histogram and device-timer phases
        (:meth:`~specdash.advisor.PhaseTimes.from_run`); ``output_tok_s_se`` from the histogram's
        round-to-round spread (:func:`acceptance_rel_se`).  Falls back to the run's client figures
        when the log has no usable line."""
        from specdash.advisor import Measurement
        from specdash.advisor.measurement import acceptance_rel_se
        from specdash.collect.tiers import tier_stats

        conc = int(run.get("concurrency") or 1)
        m = Measurement.from_run(run, concurrency=conc)
        m.launch = launch
        steps = m.settings.steps if m.settings else 0
        draft = m.settings.draft_tokens if m.settings else 1
        tr = self._tracker(run, steps, draft)
        wins = [w for w in tr.windows() if _load_window(w, conc)]
        st = tier_stats(wins, discard_after_switch=False)
        if st and st[0].output_tok_s:
            m.output_tok_s = float(st[0].output_tok_s)
            if m.settings is not None and st[0].accept_length:
                m.accept_length = float(st[0].accept_length)
        rel = acceptance_rel_se(run.get("accept_histogram")) if m.settings is not None else None
        if rel is not None and m.output_tok_s:
            m.output_tok_s_se = float(m.output_tok_s) * rel
        return m

    async def measure_pair(self, log, suite, opts, a: int, b: int, *, role: str = "live",
                           prepare=None, also_at: int | None = None) -> PairResult:
        """Launch tiers ``a`` and ``b`` interleaved (module docstring); returns the :class:`PairResult`.

        ``role``: ``"live"`` (a chain launch of the tune, counted in :attr:`launches`) or
        ``"sweep"`` (the adaptive schedule's measurement at another concurrency); ``prepare``: applied
        to the launch's profile before it starts (the tune's cheaper exploration start-up).  The suite
        runs :data:`LIVE_ROUNDS` times its repeats, so each tier gets about the verify rounds a launch
        of its own would.  ``also_at``: a second concurrency measured in the same launch (a sweep
        point after the suite's; :attr:`PairResult.also` holds its tiers) — how the costs grow with
        the batch without a launch of its own."""
        from specdash.sglang.adaptive import interleave_config

        a, b = sorted((int(a), int(b)))
        cfg = interleave_config(a, b, self.version, update_interval=LIVE_UPDATE_INTERVAL)
        path = self.tdir / f"interleave-s{a}-s{b}.json"
        n = 2
        while path.exists():
            path = self.tdir / f"interleave-s{a}-s{b}-{n}.json"
            n += 1
        path.write_text(json.dumps(cfg) + "\n", encoding="utf-8")
        prof = self.pair_profile(a, b, path)
        if prepare is not None:
            prof = prepare(prof)
        conc = int(opts.concurrency or suite.suite.concurrency or 1)
        reps = int(opts.repeats or suite.suite.repeats or 1) * LIVE_ROUNDS
        o = replace(opts, repeats=reps)
        if also_at is not None and int(also_at) != conc:
            runs, _, entry = await log.sweep(prof, suite, o, [conc, int(also_at)], role, tiers=[a, b],
                                             config=str(path))
        else:
            run, _, entry = await log.run(prof, suite, o, role, tiers=[a, b], config=str(path))
            runs = [run]
        if role == "live":
            self.launches += 1
        if self.batch_sizes is None:
            self.batch_sizes = _captured_bs(runs[0])
        res = self._pair_result(runs[0], entry.id, a, b, path, prof.name)
        if len(runs) > 1:
            res.also = self._pair_result(runs[1], entry.id, a, b, path, prof.name)
        return res

    def _pair_result(self, run: dict, launch: int, a: int, b: int, path: Path, label: str) -> PairResult:
        """The two tiers of one run (one concurrency) of a pair launch, measured."""
        from specdash.advisor import Measurement, chain
        from specdash.bench.stats import paired_speedup
        from specdash.collect.tiers import paired_windows, split_pair_histogram, tier_stats

        conc = int(run.get("concurrency") or 1)
        tr = self._tracker(run, b, b + 1)
        every = tr.windows()
        at_load = [w for w in every if _load_window(w, conc)]
        res = PairResult(launch, a, b, str(path), run.get("run_dir"), conc, switches=tr.switches,
                         discarded=sum(1 for w in at_load if w.after_switch),
                         off_load=len(every) - len(at_load))
        stats = {s.speculative_num_steps: s for s in tier_stats(at_load)}
        kept = [w for w in at_load if not w.after_switch]
        for s in (a, b):
            st = stats.get(s)
            res.windows[s] = st.windows if st else 0
            res.tok_s[s] = st.output_tok_s if st else None
            res.accept_length[s] = st.accept_length if st else None
            res.tok_s_se[s] = window_se([w for w in kept if w.steps == s])
        if tr.switches == 0:
            res.notes.append("no 'Switch adaptive runtime state' line: the server did not alternate the tiers "
                             f"(adaptive off or refused?); only steps {b} ran")
        good = [s for s in (a, b) if res.tok_s[s] and res.accept_length[s]]
        rounds = {s: sum(w.request_rounds for w in kept if w.steps == s) for s in (a, b)}
        split = None
        if run.get("accept_histogram") and rounds[a] > 0 and rounds[b] > 0:
            split = split_pair_histogram(run["accept_histogram"], a, b, rounds[a] / (rounds[a] + rounds[b]))
        pooled = tier_phases(run, every, (a, b), float(conc))
        res.timer = pooled is not None
        if pooled is None and len(good) == 2:
            res.notes.append("no device-timer counters (sglang:forward_execution_seconds_total): round times only")
        for i, s in enumerate(good):  # the pooled timer observation rides on the first tier only
            m = Measurement(chain(s), float(res.tok_s[s]), conc, float(res.accept_length[s]), label=label,
                            phases=pooled if i == 0 else None, source="tier", launch=launch,
                            accept_histogram=(split[0] if s == a else split[1]) if split else None)
            m.output_tok_s_se = res.tok_s_se.get(s)
            res.measurements.append(m)
        pw = paired_windows(at_load, a, b)
        res.pairs = len(pw)
        res.speedup = paired_speedup([x.tok_s for x, _ in pw], [y.tok_s for _, y in pw])
        if not pw:
            res.notes.append("no paired windows (each side needs a timed window at the suite's load)")
        return res


#: A live launch runs the suite this many times its repeats: its two tiers share the verify rounds, so
#: each gets about what a launch of its own measures (a tier's accept length is then as exact as a
#: launch's; issue 26 measured tiers at half a launch's rounds reading 0.96–1.03 of the analytic value,
#: the round rate 0.99–1.01: the spread was the accept length's sampling noise).
LIVE_ROUNDS = 2


def window_se(windows) -> float | None:
    """Standard error (tok/s) of the ratio estimator Σ tokens ÷ Σ seconds over timed windows (the
    delta method: √(n/(n−1) · Σ (tokens_i − R · s_i)²) ÷ Σ s_i); None below 3 windows."""
    ws = [w for w in windows if w.timed_s > 0]
    if len(ws) < 3:
        return None
    t = sum(w.timed_tokens for w in ws)
    sec = sum(w.timed_s for w in ws)
    r = t / sec
    n = len(ws)
    ss = sum((w.timed_tokens - r * w.timed_s) ** 2 for w in ws)
    return (n / (n - 1) * ss) ** 0.5 / sec


def _captured_bs(run: dict) -> list[int] | None:
    """The captured CUDA-graph decode batch sizes the run's server reported (its manifest)."""
    try:
        m = json.loads((Path(run["run_dir"]) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, KeyError, TypeError, ValueError):
        return None
    bs = m.get("cuda_graph_bs")
    if isinstance(bs, list) and bs and all(isinstance(x, int) for x in bs):
        return sorted(set(bs))
    return None

