"""Run feedback: the bench's progress bar per measured pass, and the warning when the client, not the server,
set the pace."""

from __future__ import annotations

import io
import re

from specdash.bench.summary import CLIENT_CPU_BOUND, client_load
from specdash.commands.bench import Progress
from specdash.commands.tables import render_table


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_bar_names_the_point_and_the_side_and_counts_requests(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich sizes the bar to the terminal
    tty = _Tty()
    p = Progress(stream=tty)
    p("[demo] launching: python -m specdash.sim …")
    p.event({"event": "point", "profile": "demo", "side": "side B of 2: demo-baseline", "point": 2, "points": 4,
             "label": "c16", "total": 32})
    for k in range(1, 11):
        p(f"[demo] {k}/32 prompt 0 repeat 0 c16: 64 tokens, 300.0 tok/s")  # the bar stands for these
        p.event({"event": "request", "done": k, "total": 32, "ok": True})
    p("[demo] warning: something to say above the bar")
    p.done()
    out = _plain(tty.getvalue())
    assert "[demo] point 2 of 4 (c16), side B of 2: demo-baseline" in out
    assert "10/32" in out and "ETA" in out
    assert "launching" in out and "something to say above the bar" in out
    assert "1/32 prompt" not in out


def test_off_a_terminal_progress_is_plain_lines():
    pipe = io.StringIO()
    p = Progress(stream=pipe)
    p.event({"event": "point", "profile": "demo", "side": None, "point": 1, "points": 1, "label": "c1", "total": 2})
    p("[demo] 1/2 prompt 0 repeat 0: 64 tokens, 300.0 tok/s")
    p.done()
    assert pipe.getvalue() == "[demo] 1/2 prompt 0 repeat 0: 64 tokens, 300.0 tok/s\n"


def test_client_bound_when_events_are_read_in_bursts_or_the_process_is_busy():
    calm = {"itl_ms": {"p50": 3.9}, "tpot_ms": {"p50": 4.0}}
    assert client_load(calm, 0.35) == {"client_cpu_fraction": 0.35, "client_bound": None}
    burst = {"itl_ms": {"p50": 0.0}, "tpot_ms": {"p50": 4.0}}
    got = client_load(burst, 0.35)["client_bound"]
    assert "ITL p50 0.00 ms beside TPOT p50 4.00 ms" in got and "lower the concurrency" in got
    busy = client_load(calm, CLIENT_CPU_BOUND + 0.02)["client_bound"]
    assert busy.startswith("specdash's process used 92% of a core")
    # no TPOT (one-token answers) or a sub-millisecond TPOT: nothing to judge by
    assert client_load({"itl_ms": {"p50": 0.0}, "tpot_ms": {"p50": 0.3}}, None)["client_bound"] is None
    assert client_load({"itl_ms": None, "tpot_ms": None}, None)["client_bound"] is None


def test_bench_table_warns():
    run = {"profile": "p", "requests": 1, "output_tokens": 10, "effective": {}, "verification": {},
           "client_bound": "ITL p50 0.00 ms beside TPOT p50 4.00 ms: the events were read in bursts — …"}
    assert "  warning: client-bound: ITL p50 0.00 ms beside TPOT p50 4.00 ms" in render_table([run])


def test_a_category_of_one_pair_says_too_few_pairs_not_no_difference():
    """comparison.json keeps the contract's verdict; the text says why there is none (n < 3: no interval)."""
    from specdash.commands.tables import render_comparison

    cmp = {"a": "A", "b": "B", "speedup": 1.2, "ci95": [1.1, 1.3], "pairs": 5, "verdict": "faster",
           "per_category": {"coding": {"pairs": 1, "speedup": 3.225, "ci95": [None, None],
                                       "verdict": "no significant difference"},
                            "math": {"pairs": 4, "speedup": 1.1, "ci95": [1.01, 1.2], "verdict": "faster"}}}
    text = render_comparison(cmp)
    assert "  [coding] speedup 3.225× (n=1: too few pairs for an interval)" in text
    assert "  [math] speedup 1.100× (95 % CI 1.010–1.200, 4 pairs: faster)" in text
