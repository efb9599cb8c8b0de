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
                              (the sha256 of every byte up to it and an HMAC with a key of the user's state
                              directory: a checkpoint is used only when both check out, never to change a figure)

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
from specdash.results import OUTPUT_TOK_S, output_tok_s
from specdash.sglang.records import record_problem

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
#: Bytes of requests.jsonl hashed per read while a checkpoint is written or checked.
_HASH_CHUNK = 1 << 20
#: The file (under the state directory, mode 0600) holding the key checkpoints are signed with.
CHECKPOINT_KEY = "checkpoint.key"


def _file_digest(fh, offset: int) -> str:
    """sha256 of ``fh``'s first ``offset`` bytes — all of them: an edited record anywhere before the
    checkpoint's offset changes it (~0.1 s per 100 MB with the CPU's SHA extensions)."""
    import hashlib

    h = hashlib.sha256()
    fh.seek(0)
    left = offset
    while left > 0:
        chunk = fh.read(min(_HASH_CHUNK, left))
        if not chunk:
            break
        h.update(chunk)
        left -= len(chunk)
    return h.hexdigest()


def _checkpoint_key(create: bool) -> bytes | None:
    """The key checkpoints are signed with (32 random bytes in ``<state dir>/checkpoint.key``, mode 0600,
    made on first use), or None when it cannot be read (or made): then no checkpoint is written or trusted.
    Kept under the user's state directory, not in the run directory, so that whoever can edit a run
    directory cannot also forge a checkpoint's figures."""
    from specdash.sglang.process import state_dir

    base = state_dir()
    path = (base.parent if base.name == "servers" else base) / CHECKPOINT_KEY
    try:
        key = path.read_bytes()
        if len(key) >= 32:
            return key
    except OSError:
        pass
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(32))
        return path.read_bytes()
    except FileExistsError:  # another specdash made it a moment ago
        return _checkpoint_key(False)
    except OSError:
        return None


def _checkpoint_mac(key: bytes, offset: int, digest: str, stats: dict, arrays: dict) -> str:
    """HMAC-SHA256 over the checkpoint's whole content: the offset, the file digest, the folded statistics
    (canonical JSON) and every array (name, dtype, shape, bytes, in name order)."""
    import hashlib
    import hmac

    m = hmac.new(key, digestmod=hashlib.sha256)
    m.update(json.dumps({"offset": offset, "digest": digest, "stats": stats}, sort_keys=True,
                        separators=(",", ":")).encode("utf-8"))
    for name in sorted(arrays):
        a = arrays[name]
        m.update(f"\0{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        m.update(a.tobytes())
    return m.hexdigest()


class RunFileError(ValueError):
    """A run-directory file (``manifest.json``, ``summary.json``, ``comparison.json``, ``sweep.json``,
    ``tune.json``) that is unreadable, not JSON, nested too deep, or not of the shape specdash writes; the
    message starts with its path."""


def read_run_file(path: str | Path, *, what: str | None = None) -> dict:
    """The JSON object of a run-directory file: a regular file of at most
    :data:`specdash.bounded.RUN_FILE_BYTES`, JSON nested at most :data:`specdash.bounded.JSON_MAX_DEPTH`
    levels, an object at the top (:mod:`specdash.bounded`) — the one reader of every such file.

    Raises:
        RunFileError: missing, unreadable, not a regular file, too large, not JSON, too deep, not an object.
    """
    from specdash.bounded import RUN_FILE_BYTES, InputError, read_json

    p = Path(path)
    try:
        data = read_json(p, limit=RUN_FILE_BYTES, what=what or p.name)
    except InputError as exc:
        raise RunFileError(str(exc)) from None
    if not isinstance(data, dict):
        raise RunFileError(f"{p}: a JSON {type(data).__name__}, not the object specdash writes there")
    return data


def _num(v) -> bool:
    return type(v) in (int, float)


def _opt(test):
    return lambda v: v is None or test(v)


def _dict_of(test):
    return lambda v: isinstance(v, dict) and all(test(x) for x in v.values())


def _list_of(test):
    return lambda v: isinstance(v, list) and all(test(x) for x in v)


#: The RUN fields (``summary.json`` ``runs[]``) the report, ``compare``, ``--resume`` and the dashboard's
#: baseline read, and the JSON types specdash writes them with (:class:`~specdash.bench.runner.ProfileRun`).
RUN_TYPES = {
    "profile": lambda v: type(v) is str, "profile_path": _opt(lambda v: type(v) is str),
    "run_dir": _opt(lambda v: type(v) is str), "sglang_version": _opt(lambda v: type(v) is str),
    "simulated": _opt(lambda v: type(v) is bool), "acceptance_simulated": _opt(lambda v: type(v) is bool),
    "partial": _opt(lambda v: type(v) is bool),
    "requests": lambda v: type(v) is int and v >= 0, "output_tokens": lambda v: type(v) is int and v >= 0,
    "failed_requests": _opt(lambda v: type(v) is int and v >= 0), "sweep_point": _opt(lambda v: type(v) is int),
    "concurrency": _opt(lambda v: type(v) is int), "request_rate": _opt(lambda v: _num(v) or v == "inf"),
    **{k: _opt(_num) for k in (OUTPUT_TOK_S, "duration_s", "accept_length", "accept_rate", "server_accept_length",
                               "achieved_request_rate", "request_throughput", "goodput", "goodput_fraction",
                               "burstiness")},
    **{k: _opt(_dict_of(_opt(_num))) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "goodput_slo")},
    "accept_histogram": _opt(_list_of(_num)), "effective": _opt(_dict_of(lambda v: v is None or type(v) in (
        str, int, float, bool))),
    "verification": _opt(lambda v: isinstance(v, dict) and isinstance(v.get("status", ""), str)
                         and _list_of(lambda f: isinstance(f, dict))(v.get("findings", []))),
    **{k: _opt(_list_of(lambda x: isinstance(x, dict))) for k in ("tiers", "ranks", "by_context",
                                                                  "accept_by_position")},
    "by_category": _opt(_dict_of(lambda x: isinstance(x, dict))), "adaptive": _opt(lambda v: isinstance(v, dict)),
    "metrics_error": _opt(lambda v: type(v) is str), "server_info_errors": _opt(_list_of(lambda x: type(x) is str)),
}
#: Where :func:`checked_run` lists the RUN fields it dropped.
INVALID_RUN_FIELDS = "specdash_invalid_fields"


def checked_run(run: dict) -> dict:
    """``run`` (a RUN of ``summary.json``) with every field of :data:`RUN_TYPES` of another JSON type removed
    and listed under :data:`INVALID_RUN_FIELDS` — an edited or foreign summary never reaches a figure
    with a value specdash did not write."""
    out, bad = dict(run), []
    for key, ok in RUN_TYPES.items():
        if key in out and not ok(out[key]):
            bad.append(f"{key}: {type(out[key]).__name__}")
            del out[key]
    if bad:
        out[INVALID_RUN_FIELDS] = bad
    return out


def read_summary(path: str | Path) -> dict:
    """``summary.json`` as specdash wrote it: ``{"specdash_version", "runs": [RUN, …]}``, each RUN an object
    passed through :func:`checked_run` (fields of the wrong type dropped and listed).

    Raises:
        RunFileError: as :func:`read_run_file`, or no ``runs`` list of objects.
    """
    data = read_run_file(path, what="summary.json")
    runs = data.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise RunFileError(f"{path}: no list of run objects under \"runs\": not a summary specdash wrote")
    return {**data, "runs": [checked_run(r) for r in runs]}


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
        #: lines of requests.jsonl :meth:`iter_requests` skipped as not records (and the first reason)
        self.bad_lines = 0
        self.bad_line_example: str | None = None
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
        """The complete records of ``requests.jsonl``, one at a time, read line by line with orjson:
        memory is one record's (each line at most :data:`specdash.bounded.RECORD_LINE_BYTES`), however
        long the file.  Lines orjson refuses but :func:`json.loads` reads (``NaN``, which
        :meth:`append_request`'s ``json.dumps`` can write; integers beyond 64 bits) are read by the latter.
        A line that is not a record specdash could have written — a torn last line, not JSON, nested past
        :data:`specdash.bounded.JSON_MAX_DEPTH`, not an object, a field of another type
        (:func:`specdash.sglang.records.record_problem`) — is skipped and counted in :attr:`bad_lines`
        (the first reason in :attr:`bad_line_example`).  ``offset``: start at that byte (a line start:
        the checkpoint's)."""
        if not self.requests_path.is_file():
            return
        import orjson

        from specdash.bounded import RECORD_LINE_BYTES, InputError, iter_lines

        try:
            lines = iter_lines(self.requests_path, line_limit=RECORD_LINE_BYTES, what="requests.jsonl",
                               offset=offset)
            for at, line in lines:
                try:
                    rec = orjson.loads(line) if line else None
                except orjson.JSONDecodeError:
                    try:
                        rec = json.loads(line)
                    except (ValueError, RecursionError):
                        rec = None
                # orjson refuses nesting past 1,024 and json.loads' RecursionError is caught: only the
                # fields a record is read for are checked (record_problem)
                why = "not JSON" if rec is None else record_problem(rec)
                if why is not None:
                    if line.endswith(b"\n") or not line:  # a torn last line is a crash's, not a bad record
                        self.bad_lines += 1
                        self.bad_line_example = self.bad_line_example or f"byte {at}: {why}"
                    continue
                yield rec
        except InputError as exc:  # requests.jsonl is a FIFO or a device: no records
            self.bad_lines += 1
            self.bad_line_example = self.bad_line_example or str(exc)

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
        record plus the ITL tables, :class:`~specdash.collect.columns.ValuePool`), not the file's.
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
        """``(RunStats, offset)`` from :data:`STATS_CHECKPOINT` when it is verified in full (the records past
        ``offset`` are the caller's to fold); None otherwise — then the records are read from the start, so
        a bad checkpoint costs time, never a wrong figure.  Verified: its HMAC (:func:`_checkpoint_mac`, with
        the key of the user's state directory) matches its offset, file digest, statistics and arrays — an
        edited count or sum fails here —; ``requests.jsonl`` is at least ``offset`` bytes, a line ends there,
        and the sha256 of *all* its first ``offset`` bytes is the one recorded — an edited record anywhere
        fails here; a record skipped as unreadable past the offset (:meth:`iter_requests`) changes nothing
        before it.  Missing, unreadable, of another format, another file, another user's: None."""
        import hmac

        import numpy as np

        from specdash.collect.stream import RunStats

        path = self.path / STATS_CHECKPOINT
        key = _checkpoint_key(create=False)
        if key is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
            offset, digest, stats = int(meta["offset"]), str(meta["digest"]), meta["stats"]
            if not hmac.compare_digest(str(meta.get("mac", "")), _checkpoint_mac(key, offset, digest, stats, arrays)):
                return None
            with open(self.requests_path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if not 0 < offset <= size:
                    return None
                fh.seek(offset - 1)
                if fh.read(1) != b"\n" or not hmac.compare_digest(_file_digest(fh, offset), digest):
                    return None
            return RunStats.from_state(stats, arrays), offset
        except Exception:  # a damaged checkpoint of any kind is only ignored: it is a cache, never the record
            return None

    def write_checkpoint(self) -> Path | None:
        """Write :data:`STATS_CHECKPOINT` (atomically, mode 0600) from the records this object saw — the
        whole ``requests.jsonl`` — so that a later ``--resume`` folds only the records after it;
        None (nothing written) when this object has not seen the whole file or it is empty."""
        import numpy as np

        if self._ledger is None or not self._ledger.count or not self.requests_path.is_file():
            return None
        key = _checkpoint_key(create=True)
        if key is None:  # nowhere to keep the signing key: no checkpoint (a resume re-reads every record)
            return None
        if self._requests_fh is not None:
            self._requests_fh.flush()
        meta, arrays = self._ledger.state()
        meta = json.loads(json.dumps(meta))  # as the file will hold it (the MAC is over that)
        with open(self.requests_path, "rb") as fh:
            offset = os.fstat(fh.fileno()).st_size
            digest = _file_digest(fh, offset)
        mac = _checkpoint_mac(key, offset, digest, meta, arrays)
        head = json.dumps({"offset": offset, "digest": digest, "stats": meta, "mac": mac}, separators=(",", ":"))
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
            data = read_summary(p)
        except RunFileError:
            continue
        manifest: dict | None = None
        for run in data.get("runs", []):
            if run.get("profile") != name or not output_tok_s(run) or run.get("partial"):
                continue  # a partial RUN (the server died or stalled mid-load) is no baseline
            ok = True
            for key, val in want.items():
                if val is None:
                    continue
                got = run.get(key)
                if got is None:
                    if manifest is None:
                        try:
                            manifest = read_run_file(p.parent / "manifest.json")
                        except RunFileError:
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
