"""The resume checkpoint (issue #14): ``requests.stats.npz`` holds ``requests.jsonl``'s folded
statistics up to a byte offset, so ``--resume`` of a long run reads only the records after it.

Every figure after a checkpointed load must equal the full read's, bit for bit; a checkpoint
that does not describe the file (damaged, another format, the file changed under it) must be
ignored, never trusted."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from specdash.bench.rundir import STATS_CHECKPOINT, RunDir
from specdash.collect.stream import RunStats, ValuePool
from tests.test_bookkeeping import SLO, ref_summary, synth


def readouts(st: RunStats) -> str:
    """Everything a resumed run reads from its statistics, as one JSON text (NaN-safe equality)."""
    return json.dumps({
        "summary": st.summary(), "summary3": st.summary(3.0), "goodput": st.goodput(SLO),
        "done": sorted(st.done_keys(), key=repr), "failed": st.failed_count(), "verify": st.verify_records(),
        "duration": st.duration_s(), "rate": st.send_rate(), "count": st.count, "ok": st.ok_count,
        "segment": st.max_segment,
    })


def roundtrip(st: RunStats) -> RunStats:
    meta, arrays = st.state()
    meta = json.loads(json.dumps(meta))  # what the file holds is JSON
    return RunStats.from_state(meta, arrays)


@pytest.mark.parametrize("table_mode", [False, True])
def test_state_roundtrip_is_exact_and_keeps_folding(monkeypatch, table_mode):
    if table_mode:  # ITLs past the raw limit: the dense tick table and the sorted table
        monkeypatch.setattr(ValuePool, "RAW_LIMIT", 400)
        monkeypatch.setattr(ValuePool, "FOLD_AT", 300)
    recs = synth(900, seed=11)
    recs[4]["itl_s"] = [0.5, 1e-9, 3]  # off the tick grid and beyond the dense table
    first, rest = recs[:500], recs[500:]
    whole = RunStats(recs, keep_records=False)
    part = RunStats(first, keep_records=False)
    back = roundtrip(part)
    assert readouts(back) == readouts(part)
    assert back._itl._dense is not None if table_mode else back._itl._dense is None
    back.fold(rest)
    assert readouts(back) == readouts(whole)
    assert json.dumps(back.summary()) == json.dumps(ref_summary(recs)) or table_mode


def test_state_refuses_another_format_and_inconsistent_counts():
    meta, arrays = RunStats(synth(40, seed=2)).state()
    with pytest.raises(ValueError, match="format"):
        RunStats.from_state({**meta, "format": 99}, arrays)
    with pytest.raises(ValueError, match="inconsistent"):
        RunStats.from_state({**meta, "ok_count": meta["ok_count"] + 1}, arrays)
    with pytest.raises(ValueError, match="ITL pool"):
        RunStats.from_state({**meta, "itl": {**meta["itl"], "n": meta["itl"]["n"] + 5}}, arrays)
    with pytest.raises(ValueError, match="incomplete"):
        RunStats.from_state(meta, {k: v for k, v in arrays.items() if k != "_e2e"})


def _write(rd: RunDir, recs) -> None:
    for r in recs:
        rd.append_request(r)


def test_close_writes_a_checkpoint_that_a_resume_extends(tmp_path, monkeypatch):
    recs = synth(600, seed=5)
    a, b, c = recs[:250], recs[250:420], recs[420:]
    rd = RunDir(tmp_path / "run")
    _write(rd, a)
    rd.close()
    ck = rd.path / STATS_CHECKPOINT
    assert ck.is_file() and stat.S_IMODE(ck.stat().st_mode) == 0o600
    # a resumed session: the checkpoint + nothing after it; its records extend the checkpoint at close
    offsets = []
    real_iter = RunDir.iter_requests
    monkeypatch.setattr(RunDir, "iter_requests", lambda self, offset=0: offsets.append(offset) or real_iter(self, offset))
    rd2 = RunDir(rd.path)
    stats, seg = rd2.load_stats()
    assert offsets == [os.path.getsize(rd.requests_path)]  # nothing before the offset was read again
    assert readouts(stats) == readouts(RunStats(a, keep_records=False)) and seg == 1
    _write(rd2, b)
    rd2.close()
    # killed before close: records after the checkpoint are folded from the file
    with open(rd.requests_path, "a", encoding="utf-8") as fh:
        for r in c:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
    offsets.clear()
    stats, _ = RunDir(rd.path).load_stats()
    assert offsets == [os.path.getsize(rd.requests_path) - sum(len(json.dumps(r, separators=(",", ":"))) + 1
                                                               for r in c)]
    assert readouts(stats) == readouts(RunStats(recs, keep_records=False))
    assert json.dumps(stats.summary()) == json.dumps(ref_summary(recs))


def _damage(kind: str, rd: RunDir) -> None:
    ck = rd.path / STATS_CHECKPOINT
    if kind == "garbage":
        ck.write_bytes(b"not a zip at all")
    elif kind == "truncated":
        ck.write_bytes(ck.read_bytes()[:200])
    elif kind == "format":
        with np.load(ck) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("meta").tobytes())
        meta["stats"]["format"] = 0
        np.savez(ck, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    elif kind == "edited":  # one byte of an early record changed: same size, other figures
        data = bytearray(rd.requests_path.read_bytes())
        i = data.index(b'"completion_tokens":') + len(b'"completion_tokens":')
        data[i:i + 1] = b"9" if data[i:i + 1] != b"9" else b"8"
        rd.requests_path.write_bytes(bytes(data))
    elif kind == "shorter":  # the file replaced by a shorter one
        lines = rd.requests_path.read_bytes().splitlines(keepends=True)
        rd.requests_path.write_bytes(b"".join(lines[:50]))
    elif kind == "pickle":  # an object array is refused by allow_pickle=False, not executed
        np.savez(ck, meta=np.array([{"x": 1}], dtype=object))
    elif kind == "middle":  # a record in the middle changed, far from both ends (issue #23: the 64 KiB spans)
        data = bytearray(rd.requests_path.read_bytes())
        assert len(data) > 4 * (1 << 16)
        i = data.index(b'"completion_tokens":', len(data) // 2) + len(b'"completion_tokens":')
        data[i:i + 1] = b"9" if data[i:i + 1] != b"9" else b"8"
        rd.requests_path.write_bytes(bytes(data))
    elif kind in ("forged-count", "forged-array"):  # the checkpoint's own figures edited, its digest kept
        with np.load(ck) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("meta").tobytes())
        if kind == "forged-count":
            meta["stats"]["count"] += 1
            meta["stats"]["ok_count"] += 1
        else:
            name = next(k for k, a in arrays.items() if a.dtype.kind == "f" and a.size)
            arrays[name] = arrays[name] * 2
        np.savez(ck, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    elif kind == "other-key":  # a checkpoint signed elsewhere (another user, another machine)
        from specdash.sglang.process import state_dir

        base = state_dir()
        key = (base.parent if base.name == "servers" else base) / "checkpoint.key"
        key.write_bytes(os.urandom(32))


@pytest.mark.parametrize("kind", ["garbage", "truncated", "format", "edited", "shorter", "pickle", "middle",
                                  "forged-count", "forged-array", "other-key"])
def test_a_checkpoint_that_does_not_describe_the_file_is_ignored(tmp_path, kind):
    """Whatever was changed — the checkpoint, the records anywhere, the signing key — the figures are the full
    read's; an edited record changes them (the checkpoint did not hide it)."""
    recs = synth(1500 if kind == "middle" else 300, seed=8)
    rd = RunDir(tmp_path / "run")
    _write(rd, recs)
    rd.close()
    _damage(kind, rd)
    stats, _ = RunDir(rd.path).load_stats()
    full = RunStats(keep_records=False)
    full.fold(r for r in RunDir(rd.path).iter_requests() if isinstance(r, dict))
    assert readouts(stats) == readouts(full)
    if kind in ("edited", "middle"):
        assert readouts(stats) != readouts(RunStats(recs, keep_records=False))
    if kind.startswith("forged") or kind == "other-key":
        assert readouts(stats) == readouts(RunStats(recs, keep_records=False))


def test_no_checkpoint_from_an_object_that_did_not_see_the_whole_file(tmp_path):
    rd = RunDir(tmp_path / "run")
    _write(rd, synth(30, seed=1))
    rd.close()
    (rd.path / STATS_CHECKPOINT).unlink()
    other = RunDir(rd.path)  # appends without loading the file first: its figures would be partial
    _write(other, synth(5, seed=2))
    other.close()
    assert not (rd.path / STATS_CHECKPOINT).exists()
    assert RunDir(tmp_path / "empty").write_checkpoint() is None
