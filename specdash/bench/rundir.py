"""A run directory: everything one profile's run produced, written as it arrives.

Layout (README "Run directories")::

    DIR/<UTC stamp>-<profile name>/
        manifest.json         profile, effective argv/env (secrets redacted), SGLang version, GPUs, specdash version
        requests.jsonl        one line per finished request, appended and flushed as it finishes
        server.log            the server's stdout+stderr (launched runs)
        metrics-before.txt    /metrics after warm-up, before the measured requests
        metrics-after.txt     /metrics after the last measured request
        summary.json          {"specdash_version", "runs": [RUN]}
        requests.csv          requests.jsonl flattened, one row per record (:data:`CSV_COLUMNS`), at close
        requests.stats.npz    the resume checkpoint: requests.jsonl's statistics folded up to a byte offset, at close

Nothing is ever overwritten in place except ``manifest.json`` / ``summary.json`` (and the
checkpoint, a cache that is never the record), which are replaced atomically (write to a temporary file, then rename).  :func:`find_baseline_run`
looks a finished run up among the run directories of a parent (the dashboard's baseline line).
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from specdash import __version__
from specdash.profile import safe_name

#: ``requests.csv`` columns, in order.  Times in ms; ``accept_length`` = completion_tokens ÷
#: verify rounds of the request (bonus included; empty without speculation); ``itl_mean_ms`` =
#: the mean of the record's ITLs; ``concurrency`` / ``request_rate`` (requests/s) only on the points of a
#: sweep of that axis; empty = not applicable.
CSV_COLUMNS = ("prompt_index", "repeat", "category", "segment", "concurrency", "request_rate", "ok",
               "completion_tokens",
               "prompt_tokens", "ttft_ms", "tpot_ms", "e2e_ms", "itl_mean_ms", "server_e2e_ms", "accept_length",
               "accept_rate", "verify_ct", "correct_drafts", "proposed_drafts", "finish_reason", "ts_sent",
               "ts_done", "rid", "error")


#: :meth:`RunDir.done_keys`' last load, for the :meth:`RunDir.load_stats` that follows it
#: (``(path, size, mtime_ns)`` → ``(RunStats, next segment)``; one entry at most).
_LOADED: dict[tuple, tuple] = {}


#: The resume checkpoint (:meth:`RunDir.close` writes it, :meth:`RunDir.load_stats` reads it).
STATS_CHECKPOINT = "requests.stats.npz"
_DIGEST_SPAN = 1 << 16  # bytes of requests.jsonl hashed at its start and before the checkpoint's offset


def _span_digest(fh, offset: int) -> tuple[str, str]:
    """sha256 of the first and of the last :data:`_DIGEST_SPAN` bytes of ``fh``'s first ``offset``
    bytes: the checkpoint's proof that those bytes are the ones it folded (the file is append-only)."""
    import hashlib

    fh.seek(0)
    head = hashlib.sha256(fh.read(min(offset, _DIGEST_SPAN))).hexdigest()
    start = max(0, offset - _DIGEST_SPAN)
    fh.seek(start)
    tail = hashlib.sha256(fh.read(offset - start)).hexdigest()
    return head, tail


def _ms(v) -> float | None:
    return None if v is None else round(float(v) * 1000.0, 4)


def csv_row(rec: dict) -> dict:
    """One ``requests.jsonl`` record as a flat :data:`CSV_COLUMNS` row (None = empty cell)."""
    spec = rec.get("spec") or {}
    n = rec.get("completion_tokens")
    ttft, e2e = rec.get("ttft_s"), rec.get("e2e_s")
    tpot = rec.get("tpot_s")
    if tpot is None and n and n > 1 and ttft is not None and e2e is not None:
        tpot = (e2e - ttft) / (n - 1)
    itl = rec.get("itl_s") or []
    vct = spec.get("verify_ct")
    return {
        "prompt_index": rec.get("prompt_index"), "repeat": rec.get("repeat"), "category": rec.get("category"),
        "segment": rec.get("segment"), "concurrency": rec.get("concurrency"),
        "request_rate": rec.get("request_rate"), "ok": bool(rec.get("ok")),
        "completion_tokens": n, "prompt_tokens": rec.get("prompt_tokens"),
        "ttft_ms": _ms(ttft), "tpot_ms": _ms(tpot), "e2e_ms": _ms(e2e),
        "itl_mean_ms": _ms(sum(itl) / len(itl)) if itl else None, "server_e2e_ms": _ms(rec.get("server_e2e_s")),
        "accept_length": round(n / vct, 6) if vct and n is not None else None,
        "accept_rate": spec.get("accept_rate"), "verify_ct": vct, "correct_drafts": spec.get("correct_drafts"),
        "proposed_drafts": spec.get("proposed_drafts"), "finish_reason": rec.get("finish_reason"),
        "ts_sent": rec.get("ts_sent"), "ts_done": rec.get("ts_done"), "rid": rec.get("rid"),
        "error": rec.get("error"),
    }


def utc_stamp() -> str:
    """``20261129T153012Z``-style UTC stamp used in directory names."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def atomic_write_json(path: Path, obj) -> None:
    """Write JSON to ``path`` via a temporary file + rename (never a half-written file)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, path)


class RunDir:
    """One run directory (see module docstring).

    Args:
        path: the directory; created (with parents) if missing.  An existing directory
            is reused only for ``--resume``: records are then appended.
        checkpoint: fold every record appended for the resume checkpoint written at
            :meth:`close` (:meth:`write_checkpoint`); off for directories no ``--resume`` reads
            (the dashboard's looping load, whose memory must stay flat for hours).
    """

    def __init__(self, path: Path, *, checkpoint: bool = True) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.checkpoint = checkpoint
        self._requests_fh = None
        #: every record of requests.jsonl folded (no record kept), for the checkpoint :meth:`close`
        #: writes; None when this object has not seen the whole file (then no checkpoint is written)
        self._ledger = None

    @classmethod
    def create(cls, parent: str | Path, profile_name: str, *, stamp: str | None = None,
               checkpoint: bool = True) -> RunDir:
        """A new ``parent/<stamp>-<profile>/`` directory (a ``-2``, ``-3`` … suffix if taken)."""
        base = Path(parent) / f"{stamp or utc_stamp()}-{safe_name(profile_name)}"
        path, n = base, 1
        while path.exists():
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        return cls(path, checkpoint=checkpoint)

    # -- files ---------------------------------------------------------------------------------
    @property
    def requests_path(self) -> Path:
        """``requests.jsonl``."""
        return self.path / "requests.jsonl"

    @property
    def server_log_path(self) -> Path:
        """``server.log``."""
        return self.path / "server.log"

    def write_manifest(self, manifest: dict) -> None:
        """Write ``manifest.json`` (atomically); ``specdash_version`` and ``written_at`` added."""
        atomic_write_json(
            self.path / "manifest.json",
            {"specdash_version": __version__, "written_at": time.time()} | manifest,
        )

    def read_manifest(self) -> dict:
        """``manifest.json`` as a dict ({} when absent)."""
        p = self.path / "manifest.json"
        return json.loads(p.read_text()) if p.is_file() else {}

    def append_request(self, record: dict) -> None:
        """Append one record to ``requests.jsonl`` and flush it to the OS at once."""
        if self._requests_fh is None:
            torn = False
            if self.requests_path.is_file() and self.requests_path.stat().st_size:
                with open(self.requests_path, "rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    torn = fh.read(1) != b"\n"
            else:
                size = self.requests_path.stat().st_size if self.requests_path.is_file() else 0
                if not size and self._ledger is None and self.checkpoint:
                    from specdash.collect.stream import RunStats

                    self._ledger = RunStats(keep_records=False)
            self._requests_fh = open(self.requests_path, "a", encoding="utf-8")
            if torn:  # a crash cut the last line: end it, so the next record stays readable
                self._requests_fh.write("\n")
        self._requests_fh.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
        self._requests_fh.flush()
        if self._ledger is not None:
            self._ledger.add(record)

    def iter_requests(self, offset: int = 0) -> Iterator:
        """The complete records of ``requests.jsonl``, one at a time, read line by line with orjson
        (a torn last line, or any line that is not JSON, is skipped): memory is one record's,
        however long the file.  Lines orjson refuses but :func:`json.loads` reads (``NaN``, which
        :meth:`append_request`'s ``json.dumps`` can write; integers beyond 64 bits) are read by
        the latter.  ``offset``: start at that byte (a line start: the checkpoint's)."""
        if not self.requests_path.is_file():
            return
        import orjson

        with open(self.requests_path, "rb") as fh:
            fh.seek(offset)
            for line in fh:
                try:
                    yield orjson.loads(line)
                except orjson.JSONDecodeError:
                    try:
                        yield json.loads(line)
                    except ValueError:
                        continue

    def read_requests(self) -> list[dict]:
        """All complete records of ``requests.jsonl`` (a torn last line is ignored) as a list —
        memory grows with the file: large runs read them with :meth:`iter_requests`,
        :meth:`done_keys` or :meth:`load_stats`."""
        return list(self.iter_requests())

    def _file_key(self) -> tuple | None:
        try:
            st = self.requests_path.stat()
        except OSError:
            return None
        return (str(self.requests_path.resolve()), st.st_size, st.st_mtime_ns)

    def done_keys(self) -> set[tuple]:
        """``(prompt_index, repeat)`` of the successful records of ``requests.jsonl``.  Read through
        :meth:`load_stats`, whose result is kept for the :meth:`load_stats` call of the run that a
        ``--resume`` starts next (one read of the file for both)."""
        stats, segment = self.load_stats()
        key = self._file_key()
        _LOADED.clear()
        if key is not None:
            _LOADED[key] = (stats, segment)
        return set(stats.done_keys())

    def load_stats(self):
        """``(RunStats, next segment)`` for ``--resume``: every record of ``requests.jsonl`` folded
        into a :class:`~specdash.collect.stream.RunStats` that keeps none of them (its running sums,
        compact columns and done keys only: :meth:`RunStats.fold`), and 1 + the highest ``segment``
        seen (0 for an empty file).  Streamed: memory is the statistics' (about 100 bytes per
        record plus the ITL tables, :class:`~specdash.collect.stream.ValuePool`), not the file's.
        The result of a :meth:`done_keys` call on the unchanged file (same size and mtime) is handed
        out once instead of reading the file again."""
        from specdash.collect.stream import RunStats

        hit = _LOADED.pop(self._file_key(), None)
        if hit is None:
            stats, offset = self._read_checkpoint() or (RunStats(keep_records=False), 0)
            stats.fold(r for r in self.iter_requests(offset) if isinstance(r, dict))
            hit = stats, stats.max_segment + 1
        if self._requests_fh is None and self.checkpoint:  # this object has seen the whole file: it can checkpoint it
            self._ledger = RunStats.from_state(*hit[0].state())
        return hit

    def _read_checkpoint(self):
        """``(RunStats, offset)`` from :data:`STATS_CHECKPOINT` when it describes the first ``offset``
        bytes of this ``requests.jsonl`` (same size or longer, same bytes at its start and before
        ``offset``, a line ending there; the records past it are the caller's to fold); None
        otherwise — missing, unreadable, of another format or another file: the records are then
        read from the start, so a bad checkpoint costs time, never a wrong figure."""
        import numpy as np

        from specdash.collect.stream import RunStats

        path = self.path / STATS_CHECKPOINT
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
            offset = int(meta["offset"])
            with open(self.requests_path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if not 0 < offset <= size:
                    return None
                fh.seek(offset - 1)
                if fh.read(1) != b"\n" or list(_span_digest(fh, offset)) != meta["digest"]:
                    return None
            return RunStats.from_state(meta["stats"], arrays), offset
        except Exception:
            return None

    def write_checkpoint(self) -> Path | None:
        """Write :data:`STATS_CHECKPOINT` (atomically, mode 0600) from the records this object saw — the
        whole ``requests.jsonl`` — so that a later ``--resume`` folds only the records after it;
        None (nothing written) when this object has not seen the whole file or it is empty."""
        import numpy as np

        if self._ledger is None or not self._ledger.count or not self.requests_path.is_file():
            return None
        if self._requests_fh is not None:
            self._requests_fh.flush()
        meta, arrays = self._ledger.state()
        with open(self.requests_path, "rb") as fh:
            offset = os.fstat(fh.fileno()).st_size
            digest = list(_span_digest(fh, offset))
        head = json.dumps({"offset": offset, "digest": digest, "stats": meta}, separators=(",", ":"))
        path = self.path / STATS_CHECKPOINT
        tmp = path.with_name(path.name + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, meta=np.frombuffer(head.encode("utf-8"), dtype=np.uint8), **arrays)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return path

    def write_text(self, name: str, text: str | None) -> None:
        """Write a text file (e.g. ``metrics-before.txt``); a None text writes nothing."""
        if text is None:
            return
        if (self.path / name).exists():
            stem, _, ext = name.rpartition(".")
            n = 2
            while (self.path / f"{stem}-{n}.{ext}").exists():
                n += 1
            name = f"{stem}-{n}.{ext}"
        (self.path / name).write_text(text, encoding="utf-8")

    def write_summary(self, runs: list[dict]) -> None:
        """Write ``summary.json`` = ``{"specdash_version", "runs": runs}`` (atomically)."""
        atomic_write_json(self.path / "summary.json", {"specdash_version": __version__, "runs": runs})

    def write_requests_csv(self) -> Path | None:
        """Write ``requests.csv`` from ``requests.jsonl`` (every record, a resumed run's earlier
        segments included; :func:`csv_row`), atomically, streaming one record at a time; None
        (nothing written) without records."""
        path = self.path / "requests.csv"
        tmp = path.with_name(path.name + ".tmp")
        rows = 0
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
                w.writeheader()
                for rec in self.iter_requests():
                    if not isinstance(rec, dict):
                        continue
                    w.writerow({k: ("" if v is None else v) for k, v in csv_row(rec).items()})
                    rows += 1
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if not rows:
            tmp.unlink(missing_ok=True)
            return None
        os.replace(tmp, path)
        return path

    def close(self) -> None:
        """Close the open ``requests.jsonl`` handle, write the resume checkpoint
        (:meth:`write_checkpoint`) and ``requests.csv`` (the end of a run, a resumed one included,
        whatever way it ended)."""
        if self._requests_fh is not None:
            self._requests_fh.close()
            self._requests_fh = None
        try:
            self.write_checkpoint()
        except OSError:
            pass  # the checkpoint only saves time; without it a resume reads every record
        try:
            self.write_requests_csv()
        except OSError:
            pass  # the export is a convenience; requests.jsonl stays the record


def find_baseline_run(out_dir: Path, name: str, *, suite: str | None = None, max_tokens: int | None = None,
                      concurrency: int | None = None) -> dict | None:
    """The newest finished, complete (not ``partial``) run of profile ``name`` under ``out_dir`` (``*/summary.json``) with
    output tok/s whose suite, max_tokens and concurrency match the ones given (a value not
    given matches anything; one missing from the summary is read from the run's
    ``manifest.json``).  Returns the summary's run dict, or None."""
    want = {"suite": suite, "max_tokens": max_tokens, "concurrency": concurrency}
    best: tuple[float, dict] | None = None
    for p in Path(out_dir).glob("*/summary.json"):
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        manifest: dict | None = None
        for run in data.get("runs", []):
            if run.get("profile") != name or not run.get("output_tok_s") or run.get("partial"):
                continue  # a partial RUN (the server died or stalled mid-load) is no baseline
            ok = True
            for key, val in want.items():
                if val is None:
                    continue
                got = run.get(key)
                if got is None:
                    if manifest is None:
                        try:
                            manifest = json.loads((p.parent / "manifest.json").read_text())
                        except (OSError, ValueError):
                            manifest = {}
                    got = manifest.get(key)
                if got is None or str(got) != str(val):
                    ok = False
                    break
            if not ok:
                continue
            m = p.stat().st_mtime
            if best is None or m > best[0]:
                best = (m, run)
    return best[1] if best else None
