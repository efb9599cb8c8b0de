"""The dashboard's advisor loop (a mixin of the app): when new records arrive, fit the advisor in a
thread (numpy / scipy off the event loop) and hand its output to the Suggestions panel."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual import work

from specdash.tui.messages import AdviceReady
from specdash.tui.state import ViewState

if TYPE_CHECKING:
    from specdash.tui.session_advice import AdviceInputs


#: Seconds between looks for a newer concurrency sweep of the chosen profile.
SWEEP_RESCAN_S = 15.0


class AdviceMixin:
    """``on_advice_ready``, ``_maybe_advise`` and the ``advise_worker`` of the app, and the newest
    concurrency sweep of the chosen profile (``specdash --bench --sweep``) for the Suggestions panel."""

    _sweep_cache: tuple[str | None, float, dict | None] | None = None

    def sweep_info(self) -> dict | None:
        """The newest ``sweep.json`` of the chosen profile under the run directory root (looked up
        again every :data:`SWEEP_RESCAN_S` s), or None."""
        from specdash.bench.sweep import find_sweep

        prof = self.session.profile.name if self.session.profile is not None else None
        now = time.monotonic()
        cached = self._sweep_cache
        if cached is not None and cached[0] == prof and now - cached[1] < SWEEP_RESCAN_S:
            return cached[2]
        data = find_sweep(self.config.out_dir, prof) if prof else None
        self._sweep_cache = (prof, now, data)
        return data

    def on_advice_ready(self, msg: AdviceReady) -> None:
        """Store the advisor's output for the Suggestions panel."""
        self.advice, self.advice_note = msg.advice, msg.note
        self.redraw()

    def _maybe_advise(self, v: ViewState) -> None:
        """Run the advisor (in a thread) when new records arrived, at most every 10 s."""
        run = v.snapshot.run
        if not run.get("requests") or v.collapsed:
            return
        key = (run.get("requests"), id(v.snapshot.server_info), len(self.session.measurements))
        now = time.monotonic()
        if key == self._advice_key or now - self._advice_at < 10.0:
            return
        self._advice_key, self._advice_at = key, now
        try:
            inputs = self.session.advice_inputs()
        except Exception as exc:  # advice must never break the dashboard
            self.post_message(AdviceReady(None, f"advisor unavailable: {exc}"))
            return
        self.advise_worker(inputs)

    @work(thread=True, exclusive=True, group="advice")
    def advise_worker(self, inputs: AdviceInputs) -> None:
        """Fit the advisor off the event loop (numpy / scipy)."""
        from specdash.tui.session_advice import advise_from

        try:
            adv = advise_from(inputs)
            note = "" if adv else ViewState().advice_note
        except Exception as exc:
            adv, note = None, f"advisor: {type(exc).__name__}: {exc}"
        self.post_message(AdviceReady(adv, note))
