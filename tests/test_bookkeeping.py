"""Streaming bookkeeping (issue #14): :class:`RunStats` folds records into running sums and compact
columns, ``requests.jsonl`` is read line by line, ``--resume`` keeps only done keys and columns.

The reference below is the straightforward list-of-dicts computation (the code before the
change, kept verbatim): the streaming summary must equal it exactly on the same records."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest

from specdash.bench.rundir import RunDir
from specdash.bench.runner import ProfileRun, RunOptions
from specdash.collect.columns import PERCENTILES, ValuePool, distribution_ms, percentiles_from_counts
from specdash.collect.stream import CONTEXT_BUCKETS, RunStats, SpecTotals, meets_slo, tpot_s
from specdash.profile import load_profile, parse_suite
from specdash.sglang.positions import accept_fields


# -- the straightforward reference (list of dicts) ------------------------------------------------
def ref_duration(records):
    windows = {}
    for r in records:
        if not r.get("ok") or r.get("ts_sent") is None or r.get("ts_done") is None:
            continue
        seg = int(r.get("segment", 0))
        w = windows.setdefault(seg, [r["ts_sent"], r["ts_done"]])
        w[0] = min(w[0], r["ts_sent"])
        w[1] = max(w[1], r["ts_done"])
    return float(sum(hi - lo for lo, hi in windows.values())) if windows else None


def ref_send_rate(records):
    sends = {}
    for r in records:
        if r.get("ts_sent") is not None:
            sends.setdefault(int(r.get("segment", 0)), []).append(float(r["ts_sent"]))
    gaps, span = 0, 0.0
    for ts in sends.values():
        if len(ts) >= 2:
            gaps += len(ts) - 1
            span += max(ts) - min(ts)
    if not gaps:
        return None
    return gaps / span if span > 0 else float("inf")


def ref_goodput(records, slo):
    ok = [r for r in records if r.get("ok")]
    good = sum(1 for r in ok if meets_slo(r, slo))
    done = {(r.get("prompt_index"), r.get("repeat")) for r in ok}
    failed = sum(1 for r in records if not r.get("ok")
                 and ((r.get("prompt_index"), r.get("repeat")) not in done or r.get("prompt_index") is None))
    dur = ref_duration(records)
    total = len(ok) + failed
    return {"goodput": good / dur if dur else None, "goodput_slo": dict(slo),
            "goodput_fraction": good / total if total else None}


def ref_breakdowns(records, ppr=None):
    ok = [r for r in records if r.get("ok")]

    def group(recs):
        spec = SpecTotals()
        toks, rates = 0, []
        for r in recs:
            n = int(r.get("completion_tokens") or 0)
            toks += n
            spec.add(n, r.get("spec"))
            if r.get("e2e_s"):
                rates.append(n / r["e2e_s"])
        if ppr is not None:
            rate = spec.correct / (spec.verify_ct * ppr) if spec.verify_ct and ppr else None
        else:
            rate = spec.accept_rate
        rates.sort()
        return {"requests": len(recs), "output_tokens": toks, "accept_length": spec.accept_length,
                "accept_rate": rate, "request_tok_s_p50": rates[len(rates) // 2] if rates else None}

    cats, buckets = {}, {}
    for r in ok:
        if r.get("category"):
            cats.setdefault(str(r["category"]), []).append(r)
    for r in ok:
        if r.get("prompt_tokens") is None:
            continue
        ctx = int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0)
        label = next(lab for hi, lab in CONTEXT_BUCKETS if ctx < hi)
        buckets.setdefault(label, []).append(r)
    order = [lab for _, lab in CONTEXT_BUCKETS]
    return {"by_category": {c: group(v) for c, v in sorted(cats.items())} if cats else None,
            "by_context": [{"context_tokens": lab, **group(buckets[lab])} for lab in order if lab in buckets] or None}


def ref_summary(records, ppr=None):
    ok = [r for r in records if r.get("ok")]
    spec = SpecTotals()
    ttft, tpot, itl, e2e = [], [], [], []
    tokens = 0
    for r in ok:
        n = int(r.get("completion_tokens") or 0)
        tokens += n
        spec.add(n, r.get("spec"))
        if r.get("ttft_s") is not None:
            ttft.append(r["ttft_s"])
        if r.get("e2e_s") is not None:
            e2e.append(r["e2e_s"])
        t = tpot_s(r)
        if t is not None:
            tpot.append(t)
        itl.extend(r.get("itl_s") or ())
    dur = ref_duration(records)
    done = {(r.get("prompt_index"), r.get("repeat")) for r in ok}
    failed = [r for r in records if not r.get("ok")]
    return {
        "requests": len(ok),
        "failed_requests": sum(1 for r in failed if (r.get("prompt_index"), r.get("repeat")) not in done
                               or r.get("prompt_index") is None),
        "output_tokens": tokens, "duration_s": dur, "output_tok_s": (tokens / dur) if dur else None,
        "ttft_ms": distribution_ms(ttft), "tpot_ms": distribution_ms(tpot), "itl_ms": distribution_ms(itl),
        "e2e_ms": distribution_ms(e2e), "request_throughput": (len(ok) / dur) if dur else None,
        "achieved_request_rate": ref_send_rate(records), "accept_length": spec.accept_length,
        "accept_rate": (spec.correct / (spec.verify_ct * ppr) if spec.verify_ct and ppr else None)
        if ppr is not None else spec.accept_rate,
        "accept_histogram": spec.histogram,
        **accept_fields(spec.histogram),  # the histogram's own depth (no settings given)
        **ref_breakdowns(records, ppr),
    }


# -- synthetic records in the runner's shape -------------------------------------------------------
def synth(n: int, seed: int = 0, prompts: int = 7) -> list[dict]:
    """``n`` records shaped as ``requests.jsonl`` lines: ~10 % failed (some made good later), some
    without TTFT / prompt tokens / category / speculation, one-token answers, two segments."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        rep, p = divmod(i, prompts)
        ok = rnd.random() > 0.1
        toks = rnd.choice([1, 2, 5, 40, 300])
        ttft = None if rnd.random() < 0.05 else round(rnd.uniform(0.005, 0.3), 9)
        e2e = rnd.uniform(0.05, 3.0)
        sent = 1_800_000_000.0 + i * rnd.uniform(0.0, 0.2)
        vct = max(1, toks // rnd.choice([1, 2, 3]))
        spec = None if rnd.random() < 0.2 else {
            "verify_ct": vct, "correct_drafts": toks - vct if rnd.random() > 0.1 else None,
            "proposed_drafts": 3 * vct, "histogram": [rnd.randint(0, 9) for _ in range(rnd.randint(0, 5))],
            "accept_length": toks / vct, "accept_rate": 0.5}
        out.append({
            "rid": f"r{i}", "ok": ok, "error": None if ok else "boom", "prompt_tokens": None if rnd.random() < 0.05
            else rnd.choice([10, 900, 3000, 9000, 20000, 40000]), "completion_tokens": toks if ok else 0,
            "started_at": sent, "ts_sent": sent, "ts_done": sent + e2e, "ttft_s": ttft, "e2e_s": e2e,
            "server_e2e_s": e2e, "tpot_s": None, "finish_reason": "length", "events": toks, "spec": spec if ok else None,
            "itl_s": [round(rnd.expovariate(300.0), 7) for _ in range(max(0, toks - 1))] if ok else [],
            "prompt_index": None if rnd.random() < 0.01 else p, "repeat": rep,
            "category": rnd.choice(["chat", "coding", None]), "segment": 0 if i < n // 2 else 1,
        })
    # a failure made good later, and a late failure of a done key
    if n > 3:
        out.append({**out[3], "ok": False, "error": "late"})
    return out


SLO = {"ttft_ms": 150.0, "tpot_ms": 5.0, "e2e_ms": 2000.0}


@pytest.mark.parametrize("ppr", [None, 3.0])
def test_streaming_summary_equals_the_list_of_dicts_summary(ppr):
    recs = synth(3000)
    s = RunStats(recs)
    assert s.summary(ppr) == ref_summary(recs, ppr)  # exact, every float bit for bit
    assert s.goodput(SLO) == ref_goodput(recs, SLO)
    assert s.goodput({"tpot_ms": 1.0}) == ref_goodput(recs, {"tpot_ms": 1.0})
    assert s.records == recs
    folded = RunStats(keep_records=False)
    folded.fold(recs)
    assert folded.records == [] and folded.summary(ppr) == ref_summary(recs, ppr)


def test_empty_and_tiny_runs_match_the_reference():
    assert RunStats().summary() == ref_summary([])
    for recs in (synth(1), synth(2, seed=5), [r for r in synth(50) if not r["ok"]]):
        assert RunStats(recs).summary() == ref_summary(recs)
        assert RunStats(recs).goodput(SLO) == ref_goodput(recs, SLO)


def test_itl_pool_beyond_the_raw_limit_keeps_exact_percentiles(monkeypatch):
    """Past RAW_LIMIT the ITLs become a value → count table: percentiles and max equal numpy's on
    the full array; the mean is within 1e-15 relative of numpy's."""
    monkeypatch.setattr(ValuePool, "RAW_LIMIT", 500)
    monkeypatch.setattr(ValuePool, "FOLD_AT", 300)
    recs = synth(800, seed=3)
    got, want = RunStats(recs).summary()["itl_ms"], ref_summary(recs)["itl_ms"]
    assert {k: v for k, v in got.items() if k != "mean"} == {k: v for k, v in want.items() if k != "mean"}
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-15)
    assert RunStats(recs).summary()["itl_ms"]["p99.9"] == got["p99.9"]  # a second read-out changes nothing


def test_itl_pool_with_values_off_the_tick_grid(monkeypatch):
    """Values that are no multiple of 0.1 µs, or beyond the dense table (stalls), or ints."""
    monkeypatch.setattr(ValuePool, "RAW_LIMIT", 64)
    monkeypatch.setattr(ValuePool, "FOLD_AT", 100)
    rnd = random.Random(7)
    chunks = [[rnd.choice([round(rnd.uniform(0, 0.01), 7), rnd.uniform(0, 0.01), rnd.uniform(0.2, 5.0), 0, 1])
               for _ in range(rnd.randint(0, 30))] for _ in range(200)]
    pool = ValuePool()
    for c in chunks:
        pool.extend(c)
    want = distribution_ms([v for c in chunks for v in c])
    got = pool.distribution()
    assert len(pool) == sum(map(len, chunks))
    assert {k: v for k, v in got.items() if k != "mean"} == {k: v for k, v in want.items() if k != "mean"}
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-15)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 1001, 20000])
def test_percentiles_from_counts_equal_numpy(n):
    rng = np.random.default_rng(n)
    x = np.round(rng.exponential(3.0, size=n), 3)  # repeated values
    u, c = np.unique(x, return_counts=True)
    qs = (0, *PERCENTILES, 100, 33.3)
    assert percentiles_from_counts(u, c, qs).tolist() == np.percentile(x, qs).tolist()


def test_verify_records_carry_the_same_sums():
    from specdash.sglang.records import request_counts as _request_counts

    recs = synth(400, seed=9)
    pooled = RunStats(recs).verify_records()
    for i in (0, 1):
        assert sum((_request_counts(r)[i] or 0) for r in pooled) == sum((_request_counts(r)[i] or 0) for r in recs)
    assert sum(r["completion_tokens"] for r in recs if (r.get("spec") or {}).get("verify_ct")) == \
        pooled[1]["completion_tokens"]
    assert RunStats().verify_records() == []


# -- run directory: streamed reads, resume ----------------------------------------------------------
def _rundir_with(tmp_path, recs, torn: bool = True) -> RunDir:
    rd = RunDir(tmp_path / "run")
    for r in recs:
        rd.append_request(r)
    rd.close()
    if torn:
        with open(rd.requests_path, "a") as fh:
            fh.write('{"ok": true, "prompt_index": 0, "rep')  # a crash cut the last line
    return rd


def test_streamed_reads_of_requests_jsonl(tmp_path):
    recs = synth(300, seed=2)
    recs[5]["e2e_s"] = float("nan")  # json.dumps writes NaN; orjson refuses it, json reads it
    rd = _rundir_with(tmp_path, recs)
    back = list(rd.iter_requests())
    assert json.dumps(back) == json.dumps(recs) and rd.read_requests() == back
    assert rd.done_keys() == {(r["prompt_index"], r["repeat"]) for r in recs if r["ok"]}
    stats, seg = rd.load_stats()
    assert seg == 2 and stats.records == [] and stats.count == len(recs)
    assert json.dumps(stats.summary()) == json.dumps(ref_summary(back))


def test_requests_csv_is_written_streaming(tmp_path):
    recs = synth(120, seed=4)
    rd = _rundir_with(tmp_path, recs)
    path = rd.write_requests_csv()
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    assert len(rows) == len(recs) and rows[7]["rid"] == "r7"
    assert RunDir(tmp_path / "empty").write_requests_csv() is None
    assert not (tmp_path / "empty" / "requests.csv.tmp").exists()


def test_resume_skips_exactly_the_done_records(tmp_path):
    """A run dir with K successful (prompt, repeat) records (plus failures and a torn line): the
    resumed run sends exactly the other items, in order, as segment 1 + the highest one."""
    prompts = [{"text": f"prompt {i}", "category": "chat"} for i in range(6)]
    suite = parse_suite({"suite": {"name": "s", "max_tokens": 8, "concurrency": 2, "repeats": 4, "warmup": 0},
                         "prompts": prompts})
    recs = [r for r in synth(24, seed=1, prompts=6) if r["prompt_index"] is not None][:15]
    for r in recs:
        r["segment"] = 2 if r["repeat"] == 1 else 0
    rd = _rundir_with(tmp_path, recs)
    pr = ProfileRun(load_profile("demo-eagle3"), suite, RunOptions(resume=rd.path, preflight=False))
    assert pr._open_rundir() == 3
    done = {(r["prompt_index"], r["repeat"]) for r in recs if r["ok"]}
    all_items = [(p, rep) for rep in range(4) for p in range(6)]
    assert pr._remaining_items() == [it for it in all_items if it not in done]
    assert 0 < len(done) < len(all_items)
    assert pr.stats.records == [] and pr.stats.summary() == ref_summary(recs)


# -- bounded statistics (the dashboard): sketches instead of columns ------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_quantile_sketch_is_within_its_relative_accuracy(seed):
    from specdash.collect.stream import QuantileSketch

    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.lognormal(-4, 1.5, 50_000), rng.exponential(0.02, 50_000), [0.0] * 30, [7200.0]])
    sk = QuantileSketch()
    for v in x.tolist():
        sk.append(v)
    qs = (0, 1, *PERCENTILES, 100)
    for got, want in zip(sk.quantiles(qs), np.percentile(x, qs), strict=True):
        assert abs(got - want) <= QuantileSketch.ALPHA * want + 1e-15, (got, want)
    d = sk.distribution()
    assert d["max"] == 7200.0 * 1000.0 and d["mean"] == pytest.approx(x.mean() * 1000.0, rel=1e-12)
    assert len(sk) == x.size and len(sk._buckets) < 3000  # bounded: ~log(range) / log(gamma)
    one = QuantileSketch()
    one.append(0.25)
    assert one.quantiles([0, 50, 100]) == [0.25, 0.25, 0.25]  # clamped to [min, max]: exact for one value


def test_bounded_run_stats_match_the_exact_ones_and_stay_flat():
    from specdash.collect.stream import QuantileSketch

    recs = synth(4000, seed=6)
    exact, bounded = RunStats(recs, keep_records=False), RunStats(recs, keep_records=False, bounded=True)
    a, b = exact.summary(), bounded.summary()
    for key in ("requests", "output_tokens", "duration_s", "output_tok_s", "accept_length", "accept_rate",
                "accept_histogram", "request_throughput", "achieved_request_rate", "itl_ms"):
        assert a[key] == b[key], key
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        for q, v in a[key].items():
            assert b[key][q] == pytest.approx(v, rel=QuantileSketch.ALPHA + 1e-12), (key, q)
    for cat, g in a["by_category"].items():
        assert b["by_category"][cat]["requests"] == g["requests"]
        assert b["by_category"][cat]["request_tok_s_p50"] == pytest.approx(g["request_tok_s_p50"], rel=0.011)
    # no per-request key or column: every failure counts, goodput and the checkpoint state are refused
    assert bounded.done_keys() == set() and bounded.failed_count() == sum(1 for r in recs if not r["ok"])
    with pytest.raises(ValueError, match="goodput"):
        bounded.goodput({"ttft_ms": 100.0})
    with pytest.raises(ValueError, match="bounded"):
        bounded.state()
    assert bounded.verify_records() == exact.verify_records()
    # memory: sketch buckets, not one entry per request
    more = RunStats(keep_records=False, bounded=True)
    more.fold(synth(4000, seed=7))
    n_before = len(more._ttft._buckets)
    more.fold(synth(4000, seed=8))
    assert len(more._ttft._buckets) <= n_before + 50 and more.count == 8002
    assert not more._g_ttft and not more._done and not more._failed_keys
