#!/usr/bin/env python3
"""Helpers of ``benchmarks/h200/testbed.sh`` (the 8B dummy-weight testbed on the lent H200).

specdash has no per-run override of a profile's ``[env]`` (the profile's variables win over the
inherited environment) nor of its speculative settings on ``--bench``, so the driver writes
profile copies into its work directory, one per (acceptance value, grid point), and suite copies
one per concurrency.  Sub-commands:

``profile SRC --out FILE [--acc-len L] [--point S,K,N] [--root DIR] [--name NAME]``
    a copy of profile SRC with ``SGLANG_SIMULATE_ACC_LEN = L``, steps/topk/draft tokens S/K/N,
    model paths moved from ``/root/models`` to DIR, named ``<name>-L<L>[-s<S>k<K>n<N>]``; the copy is
    validated with specdash's own loader (exit 2 when it does not load).
``suite SRC --out FILE --concurrency N [--repeats R]``
    a copy of suite SRC with another concurrency / repeats (name ``<name>-c<N>``).
``rewritten SHOW_JSON``
    reads ``specdash profile show --json``: exit 0 when SGLang runs the asked steps / topk / draft
    tokens, 3 (printing why) when it would rewrite them, so the grid skips that point.
``brief BENCH_JSON [STDERR]``
    one log line for a ``specdash --bench --json`` output.
``collect --phase P --out FILE [--note TEXT] [--notes-file F] [--attach NAME=FILE] RUNDIR …``
    one row per run directory (``summary.json`` + ``manifest.json`` + the agreement figures of
    ``agreement.py``), written as one JSON file with the notes and attached files (the tune report);
    a run directory without a summary becomes a row saying so.

Needs specdash on ``PYTHONPATH`` only for ``profile`` (validation) and ``collect`` (agreement).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # specdash, from the checkout
sys.path.insert(1, str(HERE))  # agreement.py

DEFAULT_MODEL_ROOT = "/root/models"
SECTIONS = ("server", "speculative", "env", "sim")


# --- a small TOML writer (profiles and suites only: scalars, string lists, tables, arrays of tables) ---


def _str(s: str) -> str:
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _val(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, list) and all(not isinstance(x, dict) for x in v):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} as a TOML value")


def _key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) else _str(k)


def to_toml(data: dict, header: str = "") -> str:
    """``data`` as TOML: top-level scalars first, then tables, then arrays of tables."""
    lines = [f"# {ln}" if ln else "#" for ln in header.splitlines()]
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in data.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    for k, v in data.items():
        if k not in tables and k not in arrays:
            lines.append(f"{_key(k)} = {_val(v)}")
    for k, v in tables.items():
        lines += ["", f"[{_key(k)}]"] + [f"{_key(kk)} = {_val(vv)}" for kk, vv in v.items()]
    for k, rows in arrays.items():
        for row in rows:
            lines += ["", f"[[{_key(k)}]]"] + [f"{_key(kk)} = {_val(vv)}" for kk, vv in row.items()]
    return "\n".join(lines) + "\n"


# --- copies ---------------------------------------------------------------------------------------


def acc_tag(acc_len: float | str) -> str:
    """``3.0`` → ``"3"``, ``2.5`` → ``"2.5"`` (for names)."""
    x = float(acc_len)
    return str(int(x)) if x == int(x) else repr(x)


def parse_point(text: str) -> tuple[int, int, int]:
    """``"3,1,4"`` → (3, 1, 4).

    Raises:
        ValueError: not three comma-separated positive integers.
    """
    parts = [int(p) for p in text.replace(" ", "").split(",")]
    if len(parts) != 3 or min(parts) < 1:
        raise ValueError(f"a grid point is steps,topk,draft_tokens (three positive integers), not {text!r}")
    return parts[0], parts[1], parts[2]


def _reroot(path: str | None, root: str | None) -> str | None:
    if path is None or root is None or not path.startswith(DEFAULT_MODEL_ROOT + "/"):
        return path
    return str(Path(root) / path[len(DEFAULT_MODEL_ROOT) + 1:])


def profile_copy(src: Path, out: Path, *, acc_len: float | str | None = None,
                 point: tuple[int, int, int] | None = None, root: str | None = None,
                 name: str | None = None, sim: bool = False, fast_start: int | None = None) -> Path:
    """Write the copy (see the module docstring) and validate it with ``specdash.profile.load_profile``.

    ``fast_start``: add the start-up flags ``specdash tune`` gives its exploration launches at that
    concurrency (:func:`specdash.bench.explore.exploration_flags`: ``--skip-server-warmup``, the decode
    CUDA-graph list cut to the batch the concurrency needs), to measure what they save.

    ``sim``: a dry run of the device script on this machine — the same profile served by specdash's
    simulator (launcher ``sim``, the ``h200-8b-testbed`` scenario calibrated to the real testbed,
    real time), SGLang's flags and ``[env]`` kept.

    Raises:
        ValueError: a grid point for a profile without speculation.
        specdash.profile.ProfileError: the copy does not load.
    """
    from specdash.profile import load_profile

    src = Path(src)
    data = tomllib.loads(src.read_text(encoding="utf-8"))
    base = name or data["name"]
    changes = []
    if acc_len is not None:
        data.setdefault("env", {})["SGLANG_SIMULATE_ACC_LEN"] = str(float(acc_len))
        base += f"-L{acc_tag(acc_len)}"
        changes.append(f"SGLANG_SIMULATE_ACC_LEN={float(acc_len)}")
    if point is not None:
        spec = data.get("speculative")
        if not spec or not spec.get("algorithm"):
            raise ValueError(f"{src}: no [speculative] section to set steps/topk/draft tokens in")
        spec["num_steps"], spec["eagle_topk"], spec["num_draft_tokens"] = point
        base += "-s{}k{}n{}".format(*point)
        changes.append("steps {} / topk {} / draft tokens {}".format(*point))
    if root is not None:
        data["server"]["model_path"] = _reroot(data["server"].get("model_path"), root)
        if data.get("speculative", {}).get("draft_model_path"):
            data["speculative"]["draft_model_path"] = _reroot(data["speculative"]["draft_model_path"], root)
        changes.append(f"models under {root}")
    if sim:
        data["server"].update(launcher="sim", model_path="sim:llama-3.1-8b")
        data["server"].pop("sglang_version", None)
        if data.get("speculative", {}).get("draft_model_path"):
            data["speculative"]["draft_model_path"] = "sim:llama-3.1-8b-eagle3"
        data.setdefault("env", {})["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] = "1"
        data["sim"] = {"scenario": "h200-8b-testbed", "time_scale": 1.0, "seed": 1}
        changes.append("served by the simulator (scenario h200-8b-testbed)")
    if fast_start is not None:
        from specdash.bench.explore import exploration_flags
        from specdash.profile import parse_profile, server_flags

        flags = server_flags(parse_profile(data, src))
        plan = exploration_flags(flags, version=data["server"].get("sglang_version"), concurrency=fast_start)
        if plan.flags:  # specdash's one flag merge (a flag the profile sets gets the new value)
            from specdash.bench.live import with_flags

            data["server"]["extra_args"] = list(with_flags(parse_profile(data, src), extra=plan.flags).server.extra_args)
        base += f"-fast{fast_start}"
        changes.append(f"exploration start-up at concurrency {fast_start}: {' '.join(plan.flags) or 'nothing applies'}")
    data["name"] = base
    if changes:
        data["description"] = f"H200 8B testbed, copy of {src.stem}: {'; '.join(changes)}"
    ordered = {k: v for k, v in data.items() if k not in SECTIONS}
    ordered.update({k: data[k] for k in SECTIONS if k in data})
    header = f"Generated by benchmarks/h200/testbed_grid.py from {src.name}: {'; '.join(changes) or 'a copy'}."
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_toml(ordered, header), encoding="utf-8")
    load_profile(str(out))
    return out


def suite_copy(src: Path, out: Path, *, concurrency: int, repeats: int | None = None) -> Path:
    """Write a copy of suite ``src`` with another concurrency (and repeats); validated by specdash."""
    from specdash.profile import load_suite

    src = Path(src)
    data = tomllib.loads(src.read_text(encoding="utf-8"))
    data["suite"]["concurrency"] = int(concurrency)
    if repeats is not None:
        data["suite"]["repeats"] = int(repeats)
    data["suite"]["name"] = f"{data['suite']['name']}-c{concurrency}"
    header = (f"Generated by benchmarks/h200/testbed_grid.py from {src.name}: concurrency {concurrency}"
              + (f", repeats {repeats}" if repeats is not None else "") + ".")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_toml(data, header), encoding="utf-8")
    load_suite(str(out))
    return out


# --- checks and results ---------------------------------------------------------------------------

_SPEC_KEYS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def rewritten(show: dict) -> str | None:
    """Why SGLang would not run the asked steps / topk / draft tokens (None when it runs them as asked).

    ``show`` is ``specdash profile show --json``; ``max_running_requests`` (48 under speculation)
    does not count: it changes no grid coordinate.
    """
    if show.get("rejections"):
        return "rejected at start-up: " + "; ".join(r.get("message", "") for r in show["rejections"])
    asked, eff = show.get("asked") or {}, show.get("effective") or {}
    diffs = [f"{k.removeprefix('speculative_')} {asked.get(k)} → {eff.get(k)}"
             for k in _SPEC_KEYS if asked.get(k) is not None and asked.get(k) != eff.get(k)]
    if diffs:
        reasons = [a.get("reason", "") for a in show.get("adjustments") or [] if a.get("field") in _SPEC_KEYS]
        return "SGLang rewrites " + ", ".join(diffs) + (f" ({'; '.join(r for r in reasons if r)})" if reasons else "")
    return None


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_rows(run_dir: Path) -> list[dict]:
    """One result row per RUN of a run directory (a ``--sweep`` directory holds one per concurrency)."""
    summary = _load(Path(run_dir) / "summary.json")
    n = len(summary.get("runs") or []) if summary else 0
    return [run_row(run_dir, i) for i in range(max(1, n))]


def run_row(run_dir: Path, point: int = 0) -> dict:
    """One result row for a run directory's RUN ``point`` (missing pieces become None / an ``error``)."""
    run_dir = Path(run_dir)
    manifest = _load(run_dir / "manifest.json") or {}
    summary = _load(run_dir / "summary.json")
    env = manifest.get("env") or {}
    row = {
        "run_dir": run_dir.name,
        "profile": manifest.get("profile"),
        "acc_len": env.get("SGLANG_SIMULATE_ACC_LEN"),
        "asked": {k.removeprefix("speculative_"): v for k, v in (manifest.get("asked") or {}).items()},
        "time_to_ready_s": manifest.get("time_to_ready_s"),
    }
    if summary is None or not summary.get("runs"):
        row["error"] = "no summary.json (the run did not finish: see server.log / the phase's .err files)"
        return row
    r = summary["runs"][point]
    row.update({
        "effective": r.get("effective"),
        "concurrency": r.get("concurrency"),
        "requests": r.get("requests"),
        "failed_requests": r.get("failed_requests"),
        "output_tokens": r.get("output_tokens"),
        "duration_s": r.get("duration_s"),
        "output_tok_s": r.get("output_tok_s"),
        "accept_length": r.get("accept_length"),
        "accept_rate": r.get("accept_rate"),
        "server_accept_length": r.get("server_accept_length"),
        "ttft_ms_p50": (r.get("ttft_ms") or {}).get("p50"),
        "tpot_ms_p50": (r.get("tpot_ms") or {}).get("p50"),
        "itl_ms_p50": (r.get("itl_ms") or {}).get("p50"),
        "verification": (r.get("verification") or {}).get("status"),
    })
    try:
        from agreement import agreement

        a = agreement(run_dir, point)
        row["agreement"] = {"accept_length": a["accept_length"], "output_tok_s": a["output_tok_s"]}
    except Exception as exc:  # a partial run dir: keep the row, say why the figures are missing
        row["agreement"] = {"error": f"{type(exc).__name__}: {exc}"}
    return row


def _attachment(path: Path):
    """A file for the phase JSON: its JSON when it parses, else its last 4000 characters (None: absent)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"text_tail": text[-4000:]}


def collect(phase: str, run_dirs: list[Path], out: Path, notes: list[str] | None = None,
            attach: dict[str, Path] | None = None) -> dict:
    """Write ``{"phase", "rows", "notes", "attached"}`` to ``out``; return it.

    ``attach`` maps a name to a file (e.g. the tune report) copied into the document.
    """
    # launches only: the A/B's "-compare" and tune's "-tune" directories have no manifest.json
    rows = [row for d in run_dirs if (Path(d) / "manifest.json").is_file() for row in run_rows(Path(d))]
    doc = {"phase": phase, "rows": rows, "notes": list(notes or []),
           "attached": {k: _attachment(Path(v)) for k, v in (attach or {}).items()}}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(out)
    return doc


def _fmt(v, nd=1) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def brief(bench_json: Path, stderr: Path | None = None) -> str:
    """One log line for a ``specdash --bench --json`` output (its last stderr line when there is no JSON)."""
    d = _load(Path(bench_json))
    if d is None:
        last = ""
        if stderr is not None and Path(stderr).is_file():
            lines = Path(stderr).read_text(encoding="utf-8", errors="replace").strip().splitlines()
            last = lines[-1] if lines else ""
        return f"no JSON on stdout; stderr ends: {last or '(empty)'}"
    if "error" in d:
        codes = [f["code"] for f in (d.get("preflight") or {}).get("findings", []) if f.get("severity") == "error"]
        return f"error: {d['error']}" + (f" ({', '.join(codes)})" if codes else "")
    runs = d.get("runs") or []
    if not runs:
        return "JSON without runs"
    parts = []
    for r in runs:  # one per sweep point
        e = r.get("effective") or {}
        eff = "/".join(str(e.get(k)) for k in _SPEC_KEYS) if e.get("speculative_algorithm") else "no speculation"
        parts.append(f"{_fmt(r.get('output_tok_s'))} tok/s, accept length {_fmt(r.get('accept_length'), 3)}, "
                     f"c{r.get('concurrency')}, {r.get('requests')} requests, effective {eff}, "
                     f"verification {(r.get('verification') or {}).get('status')}")
    return " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("profile")
    pp.add_argument("src")
    pp.add_argument("--out", required=True)
    pp.add_argument("--acc-len")
    pp.add_argument("--point", help="steps,topk,draft_tokens")
    pp.add_argument("--root", help=f"move model paths from {DEFAULT_MODEL_ROOT} to this directory")
    pp.add_argument("--name")
    pp.add_argument("--sim", action="store_true", help="serve the copy with specdash's simulator (a dry run)")
    pp.add_argument("--fast-start", type=int, metavar="C",
                    help="add the start-up flags specdash tune gives exploration launches at concurrency C")
    ps = sub.add_parser("suite")
    ps.add_argument("src")
    ps.add_argument("--out", required=True)
    ps.add_argument("--concurrency", type=int, required=True)
    ps.add_argument("--repeats", type=int)
    pr = sub.add_parser("rewritten")
    pr.add_argument("show_json")
    pb = sub.add_parser("brief")
    pb.add_argument("bench_json")
    pb.add_argument("stderr", nargs="?")
    pc = sub.add_parser("collect")
    pc.add_argument("--phase", required=True)
    pc.add_argument("--out", required=True)
    pc.add_argument("--note", action="append", default=[])
    pc.add_argument("--notes-file", help="a file of further notes, one a line (missing = none)")
    pc.add_argument("--attach", action="append", default=[], metavar="NAME=FILE",
                    help="copy FILE into the document under attached.NAME (JSON when it parses)")
    pc.add_argument("run_dirs", nargs="*")
    args = p.parse_args(argv)

    if args.cmd in ("profile", "suite"):
        from specdash.profile import ProfileError

        try:
            if args.cmd == "profile":
                out = profile_copy(Path(args.src), Path(args.out), acc_len=args.acc_len,
                                   point=parse_point(args.point) if args.point else None,
                                   root=args.root, name=args.name, sim=args.sim, fast_start=args.fast_start)
            else:
                out = suite_copy(Path(args.src), Path(args.out), concurrency=args.concurrency,
                                 repeats=args.repeats)
        except (ProfileError, ValueError, OSError, KeyError, tomllib.TOMLDecodeError) as exc:
            print(f"testbed_grid {args.cmd}: {exc}", file=sys.stderr)
            return 2
        print(out)
        return 0
    if args.cmd == "rewritten":
        show = _load(Path(args.show_json))
        if show is None:
            print(f"cannot read {args.show_json}")
            return 2
        why = rewritten(show)
        if why:
            print(why)
            return 3
        return 0
    if args.cmd == "brief":
        print(brief(Path(args.bench_json), Path(args.stderr) if args.stderr else None))
        return 0
    notes = list(args.note)
    if args.notes_file and Path(args.notes_file).is_file():
        notes += [ln for ln in Path(args.notes_file).read_text(encoding="utf-8").splitlines() if ln.strip()]
    attach = dict(a.split("=", 1) for a in args.attach if "=" in a)
    doc = collect(args.phase, [Path(d) for d in args.run_dirs], Path(args.out), notes,
                  {k: Path(v) for k, v in attach.items()})
    for r in doc["rows"]:
        print(f"{r['profile']}: " + (r["error"] if "error" in r else
              f"c{r['concurrency']} {_fmt(r['output_tok_s'])} tok/s, accept length {_fmt(r['accept_length'], 3)}, "
              f"TPOT p50 {_fmt(r['tpot_ms_p50'], 2)} ms, ready in {_fmt(r['time_to_ready_s'])} s, "
              f"verification {r['verification']}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
