"""The dashboard's measurements and the advisor's inputs: a mixin of :class:`~specdash.tui.session.Session`
(it uses ``self.collector``, ``self.load``, ``self.profile`` and the launch number); no Textual import.
Each launch's run is kept as a measurement; the advisor runs on them in a worker thread
(:func:`advise_from`, :class:`specdash.tui.advising.AdviceMixin`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from specdash.results import output_tok_s
from specdash.sglang.effective import SpecSettings

if TYPE_CHECKING:
    from specdash.advisor import Advice, Measurement, Settings
    #: (measurements, baseline tok/s, current settings, candidates or None): what :func:`advise_from` needs.
    AdviceInputs: TypeAlias = "tuple[list[Measurement], float | None, Settings | None, list[Settings] | None]"


class SessionAdviceMixin:
    """``measurement_list`` / ``advice_inputs`` / ``advise`` of the session, and the bookkeeping of
    ``measurements`` (launch number → the server's settings as a RUN's ``effective``, the run, concurrency)."""

    collector: Any
    load: Any
    profile: Any
    measurements: dict[int, tuple[dict, dict, int]]
    baseline_tok_s: float | None
    _launch_no: int

    def _remember_measurement(self) -> None:
        from specdash.advisor import Settings

        if self.collector is None:
            return
        run = self.collector.run_summary()
        if not run.get("requests"):
            return
        info = self.collector.snapshot().server_info
        self.measurements[self._launch_no] = (_effective(info), dict(run), self.load.concurrency)
        if Settings.from_effective(info) is None and output_tok_s(run):
            self.baseline_tok_s = float(output_tok_s(run))

    def measurement_list(self) -> list[Measurement]:
        """Advisor :class:`~specdash.advisor.Measurement` s: one per measured launch, the live
        run included."""
        from specdash.advisor import Measurement

        data = dict(self.measurements)
        if self.collector is not None:
            run = self.collector.run_summary()
            info = self.collector.snapshot().server_info
            if run.get("requests"):
                data[self._launch_no] = (_effective(info), dict(run), self.load.concurrency)
        return [Measurement.from_run({**run, "effective": eff}, concurrency=conc) for eff, run, conc in data.values()]

    def advice_inputs(self) -> AdviceInputs:
        """(measurements, baseline tok/s, current settings) for :func:`advise_from` — taken on
        the event loop's thread so the advisor can then run in a worker thread."""
        ms = self.measurement_list()
        current = None
        if self.collector is not None:
            from specdash.advisor import Settings

            current = Settings.from_effective(self.collector.snapshot().server_info)
        if current is not None and not any(m.settings == current for m in ms):
            current = None
        candidates = None
        if self.profile is not None:  # SGLang's simulated acceptance: trees cannot accept more than chains
            import os

            from specdash.advisor import simulated_acceptance_candidates

            candidates = simulated_acceptance_candidates(self.profile.env, os.environ)[0]
        return ms, self.baseline_tok_s, current, candidates

    def advise(self) -> Advice | None:
        """The advisor's :class:`~specdash.advisor.Advice` for the measurements so far (None
        until a speculative run has tok/s and accept length).  CPU-heavy: run in a thread."""
        return advise_from(self.advice_inputs())


def _effective(info: dict | None) -> dict:
    """The speculative settings of ``/server_info`` as a RUN's ``effective`` (all None without speculation)."""
    s = SpecSettings.from_effective(info)
    return {"speculative_algorithm": s.algorithm, "speculative_num_steps": s.steps,
            "speculative_eagle_topk": s.topk, "speculative_num_draft_tokens": s.draft_tokens}


def advise_from(inputs: AdviceInputs) -> Advice | None:
    """Run :func:`specdash.advisor.advise` on :meth:`Session.advice_inputs` (None when no
    speculative measurement with tok/s and accept length exists yet)."""
    from specdash.advisor import advise

    ms, baseline, current, candidates = inputs
    if not any(m.settings is not None and m.tau() and m.tok_s() for m in ms):
        return None
    return advise(ms, baseline, current=current, candidates=candidates)
