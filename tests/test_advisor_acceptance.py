"""Per-position acceptance pooled over chains of different depths."""

from __future__ import annotations

import pytest

from specdash.advisor import Measurement, Settings, advise
from specdash.advisor.acceptance import pooled_position_acceptance


def test_a_shorter_chain_does_not_count_as_failing_deeper_positions():
    # steps 1: 80 of 100 rounds accepted the one draft; steps 2: 80 reached position 2, 40 accepted it
    short, deep = [20, 80], [20, 40, 40]
    est = pooled_position_acceptance([(short, 1), (deep, 2)])
    assert [e.position for e in est] == [1, 2]
    assert est[0].reached == 200 and est[0].accepted == 160
    assert est[1].reached == 80 and est[1].accepted == 40 and est[1].p == pytest.approx(0.5)
    adv = advise([Measurement(Settings(1, 1, 2), 100.0, accept_histogram=short),
                  Measurement(Settings(2, 1, 3), 110.0, accept_histogram=deep)], 90.0)
    assert adv.positions[1].p == pytest.approx(0.5)  # the raw sum of histograms would say 40/160


def test_an_adaptive_steps0_tier_is_never_the_current_or_a_suggestion():
    ms = [Measurement(Settings(0, 1, 1), 120.0, accept_length=1.0, source="tier", launch=1),
          Measurement(Settings(2, 1, 3), 110.0, accept_histogram=[20, 40, 40], source="tier", launch=1)]
    adv = advise(ms, 90.0)
    assert adv.current == Settings(2, 1, 3)
    assert all(p.settings.steps >= 1 for p in adv.predictions)
    with pytest.raises(ValueError):
        advise(ms[:1], 90.0)
