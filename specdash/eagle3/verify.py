"""Post-launch verification: did SGLang really start what the profile asked for, and does it accept?

Decoupled from I/O: the caller (bench runner, TUI) hands in what it already collected —
``/server_info`` (a dict), the server's log lines, and early request records — and gets a
:class:`VerifyReport` (``status`` ``ok`` | ``failed`` | ``skipped``; findings in the doctor's
shape: code, severity, message, why, fix, evidence).  Codes:

* ``VERIFY_ALGO`` — the server's resolved ``speculative_algorithm`` is not what the draft needs
  (an EAGLE3 head served as EAGLE collapses silently: sglang#21272, golden ``eagle_wrongalgo``).
* ``VERIFY_ADJUSTED`` — ``speculative_num_steps`` / ``_eagle_topk`` / ``_num_draft_tokens`` read back
  from ``/server_info`` differ from what was asked (golden ``eagle3_steps1_draft16``: asked 16
  draft tokens, effective 2, with SGLang's one log line quoted).
* ``VERIFY_LOG`` — loader/capture errors and warnings in the log: tracebacks, shape mismatches
  (sglang#32226's "8640 vs 5760" = a missing aux state), ``Not enough memory`` / CUDA OOM (sglang#6875's advice),
  argparse exits, context-length errors, skipped weights.
* ``VERIFY_COLLAPSE`` — pooled accept length ≤ 1.05 over the first few hundred tokens: a wiring
  fault or an untrained draft.  The finding lists the wiring checklist (algorithm, weight keys,
  aux layers, d2t, lm_head) and says the drafter self-test separates the two.  Speculation on
  but no accept length anywhere → acceptance UNKNOWN: status ``skipped``, never ``ok``, never
  1.0 (sgl-project/sglang-jax#1586).

Accept length (SGLang's ``spec_accept_length``) = Σ completion_tokens / Σ spec_verify_ct over the requests (bonus
token included).  Request records may be ``{"completion_tokens": n, "spec": {"verify_ct": v, …}}``
(specdash's run records) or raw SGLang ``meta_info`` dicts (``spec_verify_ct``), or a full
``/generate`` response ``{"meta_info": {…}}``.  :class:`CollapseWatch` makes the same decision
incrementally for live use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from specdash.eagle3.findings import Finding, render_findings
from specdash.sglang.speculative import LOG_TOPK1_ADJUST, SpecResolution
from specdash.sglang.versions import read_spec_meta

#: Accept length at or below this is a collapse (only the bonus token survives).
COLLAPSE_THRESHOLD = 1.05
#: Tokens ``verify_server`` needs before it judges acceptance from requests.
MIN_TOKENS_POSTHOC = 32
#: Tokens :class:`CollapseWatch` waits for by default ("the first few hundred tokens").
MIN_TOKENS_LIVE = 256

SPEC_FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")

_CHECKLIST = (
    "algorithm: an EAGLE3 head needs --speculative-algorithm EAGLE3 (with EAGLE the fc is skipped silently, sglang#21272)",
    "weight keys: layers.0.* is dropped by SGLang < 0.5.12, unknown prefixes by every release (no warning)",
    "aux layers: ids must sit in eagle_config.eagle_aux_hidden_state_layer_ids and match the training layers",
    "d2t: offsets (target = draft + d2t[draft]), present whenever draft_vocab_size < target vocab (NVIDIA-NeMo/Automodel#2447)",
    "lm_head: present when draft_vocab_size is set and tie_word_embeddings is false (sglang#27829)",
)


@dataclass
class VerifyReport:
    """Result of :func:`verify_server`.

    ``status``: ``failed`` when any finding is an error; else ``skipped`` when speculation is
    off or acceptance could not be measured (UNKNOWN — never a pass); else ``ok``.
    ``acceptance``: ``ok`` | ``collapsed`` | ``unknown`` | ``n/a``; ``accept_length`` the pooled
    value (None when unknown); ``tokens`` the completion tokens it was computed over.
    """

    status: str
    findings: list[Finding] = field(default_factory=list)
    acceptance: str = "unknown"
    accept_length: float | None = None
    tokens: int = 0

    @property
    def has_errors(self) -> bool:
        """True when any finding is an error."""
        return any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict:
        """The ``verification`` block of ``summary.json``: ``{"status", "findings"}``."""
        return {"status": self.status, "findings": [f.to_json() for f in self.findings]}

    def render(self) -> str:
        """Plain text, grouped by severity."""
        acc = f"accept length {self.accept_length:.2f} over {self.tokens} tokens" if self.accept_length else \
            f"acceptance {self.acceptance.upper()}"
        return render_findings(self.findings, f"post-launch verification: {self.status.upper()} ({acc})")


# --- inputs -----------------------------------------------------------------------------------------


def _si(server_info: dict | None, key: str):
    """``server_info[key]``, else ``server_info['internal_states'][0][key]``."""
    if not server_info:
        return None
    if key in server_info:
        return server_info[key]
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        return states[0].get(key)
    return None


def _resolution(obj: Any) -> tuple[SpecResolution | None, str | None]:
    """(asked/predicted resolution, draft path) from a Profile, LaunchSpec, SpecResolution or dict."""
    from specdash.profile import server_flags
    from specdash.sglang.launchspec import LaunchSpec
    from specdash.sglang.speculative import normalize_speculative, resolve_flags

    if obj is None:
        return None, None
    if isinstance(obj, SpecResolution):
        return obj, None
    if isinstance(obj, LaunchSpec):
        argv = obj.argv
        path = None
        for i, w in enumerate(argv):
            if w in ("--speculative-draft-model-path", "--speculative-draft-model") and i + 1 < len(argv):
                path = argv[i + 1]
        return obj.spec, path
    if isinstance(obj, dict):
        res = normalize_speculative(obj.get("speculative_algorithm"), obj.get("speculative_num_steps"),
                                    obj.get("speculative_eagle_topk"), obj.get("speculative_num_draft_tokens"))
        return res, obj.get("speculative_draft_model_path")
    # a Profile
    from specdash.profile import ProfileError

    try:
        prof = obj.expanded()
    except ProfileError:  # an unset ${VAR}: judge the profile as written
        prof = obj
    flags = server_flags(prof)
    version = prof.judged_version()[0]
    return resolve_flags(flags, version=version, env=dict(prof.env)), flags.get("--speculative-draft-model-path")


def _load_draft(path: str | None):
    if not path:
        return None
    from specdash.checkpoint.reader import CheckpointError, read_draft

    try:
        return read_draft(path)
    except (CheckpointError, OSError, ValueError):
        return None


def _request_counts(rec: dict) -> tuple[int | None, int | None]:
    """(completion_tokens, verify_ct) of one request record (None when absent)."""
    if not isinstance(rec, dict):
        return None, None
    if "meta_info" in rec and isinstance(rec["meta_info"], dict):
        rec = rec["meta_info"]
    ct = rec.get("completion_tokens", rec.get("output_tokens"))
    spec = rec.get("spec")
    if isinstance(spec, dict):
        vc = spec.get("verify_ct", spec.get("spec_verify_ct"))
    else:
        vc = read_spec_meta(rec, "verify_ct")
    try:
        return (int(ct) if ct is not None else None), (int(vc) if vc is not None else None)
    except (TypeError, ValueError):
        return None, None


_ACCEPT_RE = re.compile(r"accept[ _]len(?:gth)?\s*[:=]\s*([0-9.]+)")


def log_accept_lengths(log_lines: list[str]) -> list[float]:
    """Accept lengths from SGLang's ``Decode batch`` lines (``accept len: 1.00``; also ``accept_len:``)."""
    out = []
    for line in log_lines or []:
        m = _ACCEPT_RE.search(line)
        if m:
            try:
                out.append(float(m.group(1)))
            except ValueError:
                pass
    return out


# --- collapse ---------------------------------------------------------------------------------------


@dataclass
class CollapseDecision:
    """What :class:`CollapseWatch` decided: ``state`` ``collapsed`` | ``ok`` | ``unknown``."""

    state: str
    accept_length: float | None
    tokens: int
    verify_ct: int
    requests: int


class CollapseWatch:
    """Incremental collapse detector for live runs.

    Feed request records (:meth:`feed`); once ``min_tokens`` completion tokens have been seen
    it decides once: ``collapsed`` (pooled accept length ≤ ``threshold``), ``ok``, or ``unknown``
    when none of those records carried ``spec_verify_ct`` (sglang-jax#1586: unknown is never a pass).
    Later records do not change the decision.
    """

    def __init__(self, min_tokens: int = MIN_TOKENS_LIVE, threshold: float = COLLAPSE_THRESHOLD) -> None:
        self.min_tokens = int(min_tokens)
        self.threshold = float(threshold)
        self.tokens = 0
        self.verify_ct = 0
        self.spec_tokens = 0
        self.requests = 0
        self.decision: CollapseDecision | None = None

    def feed(self, record: dict) -> CollapseDecision | None:
        """Add one finished request; returns the decision once made (None before)."""
        if self.decision is not None:
            return self.decision
        ct, vc = _request_counts(record)
        if ct is None:
            return None
        self.requests += 1
        self.tokens += ct
        if vc:
            self.verify_ct += vc
            self.spec_tokens += ct
        if self.tokens >= self.min_tokens:
            self.decision = self._decide()
        return self.decision

    def _decide(self) -> CollapseDecision:
        if not self.verify_ct:
            return CollapseDecision("unknown", None, self.tokens, 0, self.requests)
        al = self.spec_tokens / self.verify_ct
        state = "collapsed" if al <= self.threshold else "ok"
        return CollapseDecision(state, al, self.spec_tokens, self.verify_ct, self.requests)

    def finding(self) -> Finding | None:
        """The VERIFY_COLLAPSE finding for the decision (None when not decided or healthy)."""
        d = self.decision
        if d is None or d.state == "ok":
            return None
        if d.state == "unknown":
            return _unknown_finding(d.tokens)
        return _collapse_finding(d.accept_length or 0.0, d.tokens, d.verify_ct, "requests")


def _collapse_finding(al: float, tokens: int, verify_ct: int, source: str, extra: dict | None = None) -> Finding:
    what = (f"{tokens} tokens over {verify_ct} verify rounds" if source == "requests" else
            f"{verify_ct} decode log lines")
    return Finding(
        "VERIFY_COLLAPSE", "error",
        f"accept length {al:.2f} ({what}): practically every draft token is rejected",
        "Accept length counts the bonus token, so ≤ 1.05 means the draft contributes nothing: either the head is "
        "wired wrong (the server feeds it something other than what it was trained on) or it is untrained. This "
        "is a misconfiguration to fix, not a setting to tune (sglang#21272, sglang#27829, NVIDIA-NeMo/Automodel#2447). Likely "
        "wiring faults: " + "; ".join(_CHECKLIST) + ".",
        "run `specdash doctor --profile P` for the static checks, then `specdash draft selftest DRAFT --sample "
        "FILE` on a training sample: a head that scores well there but collapses when served points at wiring; a "
        "low score there points at training",
        {"accept_length": round(al, 4), "tokens": tokens, "verify_ct": verify_ct, "source": source,
         "threshold": COLLAPSE_THRESHOLD, **(extra or {})},
    )


def _unknown_finding(tokens: int) -> Finding:
    return Finding(
        "VERIFY_COLLAPSE", "warning",
        f"speculation is on but no accept length is available ({tokens} tokens seen): acceptance UNKNOWN",
        "Neither the requests (meta_info spec_verify_ct) nor the log (Decode batch 'accept len') carried it; an "
        "unknown value is not a pass and not 1.0 — a collapse would go unseen "
        "(sgl-project/sglang-jax#1586).",
        "send requests through /generate (meta_info has spec_verify_ct), keep --log-level info, or enable "
        "--enable-metrics for sglang:spec_verify_calls_total",
        {"tokens": tokens},
    )


# --- log scan ---------------------------------------------------------------------------------------

_IGNORE = re.compile(
    r"Ignore import error when loading|Request is disconnected from the client side|FastAPIDeprecationWarning|"
    r"is still supported, but 'sglang serve'|state was deleted in TokenizerManager|^\s*warnings\.warn\(|"
    r"return _create_error_response|^\[[^\]]*\]\s*server_args=|Endpoint '/[a-z_]+' is deprecated|"
    r"skipping py-spy"
)
_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")
_NOT_ENOUGH = re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static")
_SHAPE = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)|"
                    r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)|"
                    r"shape mismatch|size mismatch", re.IGNORECASE)
_CAPTURE = re.compile(r"does not implement set_eagle3_layers_to_capture")
_CTXLEN = re.compile(r"is greater than the derived context_length")
_ARGPARSE = re.compile(r"error: (ambiguous option: .*|unrecognized arguments: .*)")
_LOADER = re.compile(r"(?i)\b(skipp?ing|ignor(?:ing|ed)|unused|unexpected|missing)\b.{0,40}\b(weights?|keys?|tensors?|"
                     r"param(?:eter)?s?)\b")
_EXC = re.compile(r"^(?:\S+\.)?(\w*(?:Error|Exception))(?::\s*(.*))?$")
_TRACEBACK = "Traceback (most recent call last)"
_SPEC_V1 = re.compile(r"Spec v1 is used .* because (.*)")


def _strip_prefix(line: str) -> str:
    return re.sub(r"^\[[^\]]*\]\s*", "", line.strip())


def _scan_log(lines: list[str], draft_info, findings: list[Finding]) -> None:
    seen: set[str] = set()

    def add(key: str, f: Finding) -> None:
        if key not in seen:
            seen.add(key)
            findings.append(f)

    in_tb = False
    tb_exc_lines: set[int] = set()
    for i, raw in enumerate(lines or []):
        line = raw.rstrip("\n")
        if _IGNORE.search(line):
            continue
        body = _strip_prefix(line)
        if _TRACEBACK in line:
            in_tb = True
            continue
        if in_tb:
            m = _EXC.match(body)
            if m and not body.startswith(("File ", " ")):
                in_tb = False
                tb_exc_lines.add(i)
                add(f"tb:{body}", Finding("VERIFY_LOG", "error", f"traceback in the server log: {body}",
                                          "The server (or one of its workers) raised; see the log around line "
                                          f"{i + 1}.", _advice_for(body), {"line": i + 1, "text": body}))
            # fall through so OOM / shape patterns inside tracebacks get their specific advice
        if _OOM.search(line) or _NOT_ENOUGH.search(line):
            add("oom", Finding(
                "VERIFY_LOG", "error", f"memory failure at start-up or under load: '{body[:200]}'",
                "Weights, KV pool and CUDA-graph buffers do not fit in mem_fraction_static × GPU memory; with a draft, "
                "older releases applied the fraction twice and mis-estimated draft memory, so one fraction OOMs and the "
                "next lower one has no KV room (sglang#6875, #4330; PR #28855).",
                "run `specdash doctor` with the GPU memory known (MEMORY check); on builds without PR #28855 search "
                "--mem-fraction-static empirically, shrink the draft, lower --max-running-requests / --context-length, "
                "or raise tp_size", {"line": i + 1, "text": body}))
            continue
        m = _SHAPE.search(line)
        if m:
            add(f"shape:{body[:80]}", _shape_finding(body, m, draft_info, i))
            continue
        if _CAPTURE.search(line):
            add("capture", Finding("VERIFY_LOG", "error", f"the target cannot capture EAGLE3 aux states: '{body[:200]}'",
                                   "SGLang raises this for target classes without set_eagle3_layers_to_capture "
                                   "(attention_backend_setup.py).", "use a target family SGLang supports for EAGLE3, or EAGLE",
                                   {"line": i + 1, "text": body}))
            continue
        if _CTXLEN.search(line):
            if "ValueError" in line or "To allow overriding" in line:
                add("ctx", Finding("VERIFY_LOG", "error", f"context-length check failed: '{body[:200]}'",
                                   "The draft is built with the target's context length (eagle_worker_v2.py); "
                                   "without SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 SGLang raises ValueError.",
                                   "set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in [env] or lower --context-length",
                                   {"line": i + 1, "text": body}))
            else:
                # With the variable set SGLang only logs this and overrides the draft's length (ModelConfig._derive_context_length).
                add("ctx-warn", Finding("VERIFY_LOG", "info",
                                        f"the draft's context length was overridden: '{body[:160]}'",
                                        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 lets the draft run past the "
                                        "length it was trained for; acceptance usually falls on longer prompts "
                                        "(sglang#6783).",
                                        "bucket results by prompt length; use a draft trained on longer sequences "
                                        "for long-context traffic",
                                        {"line": i + 1, "text": body}))
            continue
        m = _ARGPARSE.search(line)
        if m:
            add("argparse", Finding("VERIFY_LOG", "error", f"SGLang rejected its command line: '{m.group(1)}'",
                                    "argparse exits with code 2 before anything loads.",
                                    "run `specdash doctor` (FLAG check) for the replacement flag",
                                    {"line": i + 1, "text": body}))
            continue
        if _LOADER.search(body) and "skip_" not in body:
            add(f"loader:{body[:60]}", Finding(
                "VERIFY_LOG", "warning", f"the loader reports skipped/unused weights: '{body[:200]}'",
                "Tensors whose names the loader does not map stay uninitialised (SGLang's EAGLE3 loader usually "
                "skips them without any message: llama_eagle3.py load_weights).", "run `specdash doctor` (WEIGHT_KEYS) on the draft",
                {"line": i + 1, "text": body}))
            continue
        m = _SPEC_V1.search(body)
        if m:
            add("specv1", Finding("VERIFY_LOG", "info", f"SGLang fell back to spec v1: {m.group(1)}",
                                  "Spec v1 runs without the overlap scheduler (0.5.11–0.5.13, topk > 1).",
                                  "compare with a topk 1 (chain) profile", {"line": i + 1, "text": body}))
            continue
        if i not in tb_exc_lines and not in_tb:
            m = _EXC.match(body)
            if m and m.group(1) not in ("Warning",) and m.group(2) is not None:
                add(f"exc:{body[:80]}", Finding("VERIFY_LOG", "error", f"exception in the server log: {body[:200]}",
                                                f"See the log around line {i + 1}.", _advice_for(body),
                                                {"line": i + 1, "text": body}))


def _advice_for(text: str) -> str:
    if _OOM.search(text) or _NOT_ENOUGH.search(text):
        return "see the memory finding (sglang#6875)"
    if _SHAPE.search(text):
        return "a shape error in the draft usually means the aux states or fc do not match: run `specdash doctor`"
    if "AttributeError" in text and ("set_embed" in text or "hot_token_id" in text):
        return "the draft path points at a normal model, not an EAGLE3 head (sglang#36528): set the draft path"
    return "run `specdash doctor --profile P` and fix what it reports"


def _shape_finding(body: str, m: re.Match, draft_info, i: int) -> Finding:
    nums = [int(x) for x in m.groups() if x is not None]
    hidden = getattr(draft_info, "hidden_in", None) if draft_info is not None else None
    detail = ""
    ev: dict = {"line": i + 1, "text": body[:300], "numbers": nums}
    if len(nums) >= 2 and hidden:
        a, b = nums[0], nums[1]
        if a % hidden == 0 and b % hidden == 0:
            detail = (f" — {a} = {a // hidden} × {hidden} vs {b} = {b // hidden} × {hidden}: the target sent "
                      f"{min(a, b) // hidden} aux state(s) where the head expects {max(a, b) // hidden}")
            ev.update(expected_states=max(a, b) // hidden, sent_states=min(a, b) // hidden)
    return Finding(
        "VERIFY_LOG", "error", f"tensor shape mismatch in the server log: '{body[:200]}'{detail}",
        "In EAGLE3 the fc input is K aux states × hidden; a multiple of hidden that is short by one means one "
        "captured layer is missing — e.g. ids in the boundary convention whose last layer is never captured "
        "(sglang#32226: 8640 vs 5760).",
        "run `specdash doctor` (AUX_LAYERS shows the layers SGLang captures); do not hand-shift ids — use a build "
        "that reads the head's convention (PR #32334 for gpt-oss)", ev)


# --- entry point ------------------------------------------------------------------------------------


def verify_server(profile_or_spec, server_info: dict | None, log_lines: list[str] | None,
                  requests: list[dict] | None, draft_info=None, *,
                  min_tokens: int = MIN_TOKENS_POSTHOC) -> VerifyReport:
    """Check a started server against what was asked.

    Args:
        profile_or_spec: a :class:`~specdash.profile.Profile`, a
            :class:`~specdash.sglang.launchspec.LaunchSpec`, a
            :class:`~specdash.sglang.speculative.SpecResolution`, or a dict of ServerArgs names.
        server_info: ``GET /server_info`` (top-level ServerArgs fields and ``internal_states``).
        log_lines: the server's stdout/stderr lines so far.
        requests: early request records (module docstring); None when none yet.
        draft_info: a :class:`~specdash.checkpoint.reader.DraftInfo`; read from the draft path when None.
        min_tokens: completion tokens needed before acceptance is judged from requests.

    Returns:
        :class:`VerifyReport`; never raises on odd inputs.
    """
    findings: list[Finding] = []
    res, draft_path = _resolution(profile_or_spec)
    if draft_info is None:
        draft_info = _load_draft(draft_path or _si(server_info, "speculative_draft_model_path"))
    asked_algo = res.algorithm if res is not None else None
    server_algo = _si(server_info, "speculative_algorithm")
    server_algo = str(server_algo).upper() if server_algo else None
    spec_on = bool(asked_algo or server_algo)

    # VERIFY_ALGO
    if server_info:
        if asked_algo and not server_algo:
            findings.append(Finding("VERIFY_ALGO", "error", f"the profile asks for {asked_algo} but the server runs "
                                    "without speculation (speculative_algorithm is null in /server_info)",
                                    "Something between the profile and the server dropped the flag.",
                                    "check the launched argv (specdash profile show P)",
                                    {"asked": asked_algo, "server": None}))
        elif asked_algo and server_algo and server_algo != asked_algo:
            findings.append(Finding("VERIFY_ALGO", "error", f"the server runs {server_algo}, the profile asked for "
                                    f"{asked_algo}", "/server_info reports the resolved ServerArgs.",
                                    f"relaunch with --speculative-algorithm {asked_algo}",
                                    {"asked": asked_algo, "server": server_algo}))
        if draft_info is not None and server_algo in ("EAGLE", "EAGLE3"):
            kind = draft_info.head_kind
            need = {"eagle3": "EAGLE3", "eagle2": "EAGLE"}.get(kind)
            if need and need != server_algo:
                findings.append(Finding(
                    "VERIFY_ALGO", "error",
                    f"the server runs {server_algo} but the draft ({', '.join(draft_info.model.architectures)}, "
                    f"fc in_features {draft_info.fc_in_features}) is an {need} head",
                    ("With EAGLE the target sends 1 × hidden and the EAGLE3 fc is skipped silently: accept length ≈ "
                     "1.00 with no error or warning (llama_eagle3.py LlamaModel.forward; sglang#21272; measured on SGLang 0.5.14, H200)."
                     if need == "EAGLE3" else
                     "EAGLE3 sends 3 concatenated aux states; an EAGLE-2 fc expects 2 × hidden (llama_eagle3.py)."),
                    f"relaunch with --speculative-algorithm {need} ([speculative] algorithm = \"{need}\")",
                    {"server_algorithm": server_algo, "draft_needs": need, "case": "sglang#21272"}))

    # VERIFY_ADJUSTED
    if server_info and res is not None and res.enabled:
        adjust_lines = [ln.rstrip() for ln in (log_lines or []) if LOG_TOPK1_ADJUST in ln]
        for fld in SPEC_FIELDS:
            asked = res.asked.get(fld)
            eff = _si(server_info, fld)
            if asked is None or eff is None:
                continue
            try:
                if int(asked) == int(eff):
                    continue
            except (TypeError, ValueError):
                continue
            predicted = getattr(res, {"speculative_num_steps": "num_steps", "speculative_eagle_topk": "eagle_topk",
                                      "speculative_num_draft_tokens": "num_draft_tokens"}[fld])
            quote = adjust_lines[0] if (fld == "speculative_num_draft_tokens" and adjust_lines) else None
            findings.append(Finding(
                "VERIFY_ADJUSTED", "warning",
                f"{fld}: asked {asked}, the server runs {eff}" + (f" — SGLang logged: '{quote}'" if quote else
                                                                 " (no log line seen)"),
                "SGLang rewrites some speculative settings at start-up"
                + (", as its normalisation predicts" if predicted is not None and int(predicted) == int(eff) else "")
                + ": with topk 1 the draft tokens become steps + 1 (speculative_hook.py; the seeds' steps 1 / 16 draft "
                "tokens ran as 2, so did SGLang 0.5.14 on an H200). Results describe the effective value, not the asked "
                "one.",
                "ask for what runs (draft tokens = steps + 1 with topk 1), or raise steps for a longer chain",
                {"field": fld, "asked": asked, "effective": eff, "predicted": predicted, "log_line": quote}))

    # VERIFY_LOG
    _scan_log(list(log_lines or []), draft_info, findings)

    # VERIFY_COLLAPSE
    acceptance, al, tokens = "n/a", None, 0
    if spec_on:
        tot_ct = tot_vc = spec_ct = 0
        for rec in requests or []:
            ct, vc = _request_counts(rec)
            if ct is None:
                continue
            tot_ct += ct
            if vc:
                tot_vc += vc
                spec_ct += ct
        log_al = log_accept_lengths(log_lines or [])
        tokens = tot_ct
        if tot_vc and spec_ct >= min_tokens:
            al = spec_ct / tot_vc
            acceptance = "collapsed" if al <= COLLAPSE_THRESHOLD else "ok"
            if acceptance == "collapsed":
                findings.append(_collapse_finding(al, spec_ct, tot_vc, "requests",
                                                  {"log_accept_lengths": log_al[:20]} if log_al else None))
        elif len(log_al) >= 3 or (log_al and not requests):
            mean = sum(log_al) / len(log_al)
            al = mean
            acceptance = "collapsed" if max(log_al) <= COLLAPSE_THRESHOLD else "ok"
            if acceptance == "collapsed":
                findings.append(_collapse_finding(mean, tot_ct, len(log_al), "log",
                                                  {"log_accept_lengths": log_al[:20]}))
        elif tot_vc:
            al = spec_ct / tot_vc
            acceptance = "unknown"
            findings.append(Finding(
                "VERIFY_COLLAPSE", "info",
                f"only {spec_ct} tokens so far (accept length {al:.2f}); acceptance is judged after {min_tokens}",
                "A handful of tokens cannot tell a collapse from noise.", "", {"tokens": spec_ct}))
        else:
            acceptance = "unknown"
            findings.append(_unknown_finding(tot_ct))
            lifetime = _si(server_info, "avg_spec_accept_length")
            if isinstance(lifetime, (int, float)) and lifetime <= COLLAPSE_THRESHOLD:
                findings.append(Finding(
                    "VERIFY_COLLAPSE", "warning",
                    f"the server's lifetime avg_spec_accept_length is {lifetime:.2f}",
                    "A server-wide average since start (warm-up included), not this run's; on some builds it is "
                    "never updated (sgl-project/sglang-jax#1586). It hints at a collapse but does not prove one.",
                    "measure with requests (completion_tokens / spec_verify_ct)", {"avg_spec_accept_length": lifetime}))
    if any(f.severity == "error" for f in findings):
        status = "failed"
    elif not spec_on or acceptance == "unknown":
        status = "skipped"
    else:
        status = "ok"
    return VerifyReport(status, findings, acceptance, al, tokens)


__all__ = ["COLLAPSE_THRESHOLD", "CollapseDecision", "CollapseWatch", "VerifyReport", "log_accept_lengths",
           "verify_server"]
