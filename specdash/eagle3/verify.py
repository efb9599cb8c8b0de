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
* ``VERIFY_ADAPTIVE`` — ``--speculative-adaptive`` as served: turned off at start-up although
  asked (warning, SGLang's ``speculative_adaptive disabled: …`` line quoted), the tier the server
  runs now vs the launch tier (info: switching is not an adjustment), and decode windows served
  at steps 0 (info: no drafting, accept length exactly 1.00 by design, left out of the collapse
  judgement).

Adaptive servers (:func:`adaptive_view`): the tier comes from what the server reports —
``/server_info`` ``internal_states[0].speculative_num_steps`` (the scheduler's copy, synced by
``apply_runtime_state``; the top-level value keeps the launch tier), the ``sglang:spec_num_steps``
gauge, and the log (``Built adaptive runtime state steps=N``, ``Switch adaptive runtime state:
steps a -> b``, parsed by :func:`specdash.sglang.adaptive.parse_adaptive_line`).  Each ``Decode
batch`` line is tagged with the tiers that ran since the line before; when a steps-0 tier was
served (0.5.14+: the default config's slots "8", "32" and "64" list 0), windows served only at
steps 0 are ignored, a request-pooled accept length ≤ 1.05 is not trusted (it mixes steps-0
rounds in), and the collapse is judged on the windows that drafted.

Accept length (SGLang's ``spec_accept_length``) = Σ completion_tokens / Σ spec_verify_ct over the requests (bonus
token included).  Request records may be ``{"completion_tokens": n, "spec": {"verify_ct": v, …}}``
(specdash's run records) or raw SGLang ``meta_info`` dicts (``spec_verify_ct``), or a full
``/generate`` response ``{"meta_info": {…}}``.  :class:`CollapseWatch` makes the same decision
incrementally for live use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdash.eagle3.findings import Finding, render_findings
from specdash.eagle3.verify_log import scan_log
from specdash.eagle3.verify_tiers import ACCEPT_RE, AdaptiveView, adaptive_view
from specdash.sglang.adaptive import read_internal_state
from specdash.sglang.records import request_counts
from specdash.sglang.speculative import LOG_TOPK1_ADJUST, SpecResolution
from specdash.sglang.versions import has_feature, parse_version

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


@dataclass
class _Asked:
    """What the caller asked for, as far as it can be told: the resolution SGLang should reach
    (``res``), the draft path, and ``adaptive`` (``--speculative-adaptive``; None = unknown)."""

    res: SpecResolution | None = None
    draft_path: str | None = None
    adaptive: bool | None = None
    version: str | None = None


def _asked(obj: Any) -> _Asked:
    """:class:`_Asked` from a Profile, LaunchSpec, SpecResolution or dict of ServerArgs names."""
    from specdash.profile import server_flags
    from specdash.sglang.adaptive import early_launch
    from specdash.sglang.cmdline import parse_command_line
    from specdash.sglang.launchspec import LaunchSpec
    from specdash.sglang.speculative import normalize_speculative, resolve_flags

    if obj is None:
        return _Asked()
    if isinstance(obj, SpecResolution):
        return _Asked(obj, version=obj.version)
    if isinstance(obj, LaunchSpec):
        argv = obj.argv
        path = None
        for i, w in enumerate(argv):
            if w in ("--speculative-draft-model-path", "--speculative-draft-model") and i + 1 < len(argv):
                path = argv[i + 1]
        adaptive = "--speculative-adaptive" in argv
        res = obj.spec
        if adaptive:  # 0.5.14+: adaptive resolves top-k / steps / draft tokens first
            try:
                flags = parse_command_line(argv).flags
            except ValueError:
                flags = None
            if flags is not None:
                launch, early = early_launch(flags, res.version, env=obj.env)
                if early is not None:
                    res = resolve_flags(launch, version=res.version, env=obj.env)
                    res.asked = obj.spec.asked
        return _Asked(res, path, adaptive, res.version)
    if isinstance(obj, dict):
        res = normalize_speculative(obj.get("speculative_algorithm"), obj.get("speculative_num_steps"),
                                    obj.get("speculative_eagle_topk"), obj.get("speculative_num_draft_tokens"))
        adaptive = obj.get("speculative_adaptive")
        return _Asked(res, obj.get("speculative_draft_model_path"),
                      bool(adaptive) if adaptive is not None else None)
    # a Profile
    from specdash.profile import ProfileError

    try:
        prof = obj.expanded()
    except ProfileError:  # an unset ${VAR}: judge the profile as written
        prof = obj
    flags = server_flags(prof)
    version = prof.judged_version()[0]
    env = dict(prof.env)
    launch, early = early_launch(flags, version, env=env)
    res = resolve_flags(launch, version=version, env=env)
    if early is not None:
        res.asked = resolve_flags(flags, version=version, env=env).asked
    return _Asked(res, flags.get("--speculative-draft-model-path"), bool(flags.get("--speculative-adaptive")),
                  version)


def _load_draft(path: str | None):
    if not path:
        return None
    from specdash.checkpoint.reader import CheckpointError, read_draft

    try:
        return read_draft(path)
    except (CheckpointError, OSError, ValueError):
        return None


#: ``accept len: 1.00`` (Decode batch lines; also ``accept_len:``), not the adaptive controller's
#: ``ema_accept_len=…`` (``Adaptive spec params updated`` lines: drafts only, bonus token excluded).


def log_accept_lengths(log_lines: list[str]) -> list[float]:
    """Accept lengths from SGLang's ``Decode batch`` lines (``accept len: 1.00``; also ``accept_len:``)."""
    out = []
    for line in log_lines or []:
        m = ACCEPT_RE.search(line)
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
    Later records do not change the decision.  It sees requests only, so it cannot tell steps-0
    rounds of an adaptive server from rejected drafts: treat ``collapsed`` as the cue to run
    :func:`verify_server`, which judges adaptive servers by tier.
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
        ct, vc = request_counts(record)
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


# --- entry point ------------------------------------------------------------------------------------


def verify_server(profile_or_spec, server_info: dict | None, log_lines: list[str] | None,
                  requests: list[dict] | None, draft_info=None, *,
                  min_tokens: int = MIN_TOKENS_POSTHOC, metrics: Any = None) -> VerifyReport:
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
        metrics: ``GET /metrics`` (text or a parsed snapshot), for the ``sglang:spec_num_steps`` gauge
            of an adaptive server; optional.

    Returns:
        :class:`VerifyReport`; never raises on odd inputs.
    """
    findings: list[Finding] = []
    asked = _asked(profile_or_spec)
    res, draft_path = asked.res, asked.draft_path
    if draft_info is None:
        draft_info = _load_draft(draft_path or _si(server_info, "speculative_draft_model_path"))
    asked_algo = res.algorithm if res is not None else None
    server_algo = _si(server_info, "speculative_algorithm")
    server_algo = str(server_algo).upper() if server_algo else None
    spec_on = bool(asked_algo or server_algo)
    view = adaptive_view(server_info, log_lines, metrics,
                         version=(server_info or {}).get("version") or asked.version)

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

    # VERIFY_ADAPTIVE (asked but off) and VERIFY_ADJUSTED
    if asked.adaptive and spec_on and not view.adaptive and (
            view.disabled_reason or (server_info and "speculative_adaptive" in server_info)):
        findings.append(_adaptive_off_finding(view))
    if server_info and res is not None and res.enabled:
        findings.extend(_adjusted(res, server_info, log_lines, view, asked.version))

    # VERIFY_LOG
    scan_log(list(log_lines or []), draft_info, findings)

    # VERIFY_COLLAPSE
    acceptance, al, tokens = "n/a", None, 0
    if spec_on:
        acceptance, al, tokens = _acceptance(requests, log_lines, server_info, view, min_tokens, findings)
    if any(f.severity == "error" for f in findings):
        status = "failed"
    elif not spec_on or acceptance == "unknown":
        status = "skipped"
    else:
        status = "ok"
    return VerifyReport(status, findings, acceptance, al, tokens)


def _adaptive_off_finding(view: AdaptiveView) -> Finding:
    reason = view.disabled_reason
    return Finding(
        "VERIFY_ADAPTIVE", "warning",
        "the profile asks for --speculative-adaptive but the server runs static speculative settings"
        + (f" — SGLang logged: '{view.disabled_line}'" if view.disabled_line else
           " (/server_info speculative_adaptive is false)"),
        "adaptive_unsupported_reason (srt/speculative/adaptive_spec_params.py) turns adaptive off at start-up for "
        "non-EAGLE algorithms, top-k ≠ 1, attention DP, multi-layer EAGLE, two-batch overlap, PD multiplexing and "
        "(0.5.11) the overlap scheduler; the server then never switches tiers.",
        "run `specdash doctor --profile P` (ADAPTIVE) for the flag that turns it off",
        {"reason": reason, "log_line": view.disabled_line})


_FIELD_ATTR = {"speculative_num_steps": "num_steps", "speculative_eagle_topk": "eagle_topk",
               "speculative_num_draft_tokens": "num_draft_tokens"}


def _adjusted(res: SpecResolution, server_info: dict, log_lines: list[str] | None, view: AdaptiveView,
              version: str | None) -> list[Finding]:
    """VERIFY_ADJUSTED: asked vs what the server runs.  The effective values come from
    ``internal_states[0]`` (the scheduler's copy; :func:`~specdash.sglang.adaptive.read_internal_state`).
    Under adaptive they are the current tier, which switches by design: asked is then compared
    with the launch tier (the top-level fields), and the current tier is an info line."""
    out: list[Finding] = []
    tier = view.tier or read_internal_state(server_info)
    adjust_lines = [ln.rstrip() for ln in (log_lines or []) if LOG_TOPK1_ADJUST in ln]
    ver = server_info.get("version") or version or res.version
    try:
        silent = view.adaptive and has_feature("adaptive_launch_resolution", str(parse_version(str(ver))))
    except ValueError:
        silent = False
    for fld in SPEC_FIELDS:
        asked = res.asked.get(fld)
        if fld == "speculative_eagle_topk":
            eff = _si(server_info, fld)
        elif view.adaptive:  # the launch tier: the tokenizer's copy of the server args is never updated
            eff = tier.launch_steps if fld == "speculative_num_steps" else tier.launch_draft_tokens
        else:
            eff = tier.current_steps if fld == "speculative_num_steps" else tier.current_draft_tokens
        if asked is None or eff is None:
            continue
        try:
            if int(asked) == int(eff):
                continue
        except (TypeError, ValueError):
            continue
        predicted = getattr(res, _FIELD_ATTR[fld])
        quote = adjust_lines[0] if (fld == "speculative_num_draft_tokens" and adjust_lines) else None
        no_line = " (no log line: under --speculative-adaptive SGLang 0.5.14+ sets draft tokens = steps + 1 " \
            "silently, _init_adaptive_speculative_params)" if silent and fld == "speculative_num_draft_tokens" \
            else " (no log line seen)"
        out.append(Finding(
            "VERIFY_ADJUSTED", "warning",
            f"{fld}: asked {asked}, the server runs {eff}" + (f" — SGLang logged: '{quote}'" if quote else no_line)
            + (" at launch" if view.adaptive else ""),
            "SGLang rewrites some speculative settings at start-up"
            + (", as its normalisation predicts" if predicted is not None and int(predicted) == int(eff) else "")
            + ": with topk 1 the draft tokens become steps + 1 (_handle_eagle_family, srt/arg_groups/"
            "speculative_hook.py; srt/server_args.py before 0.5.13; a real 0.5.14 server asked steps 1 / 16 draft "
            "tokens ran 2). Results describe the effective value, not the asked one.",
            "ask for what runs (draft tokens = steps + 1 with topk 1), or raise steps for a longer chain",
            {"field": fld, "asked": asked, "effective": eff, "predicted": predicted, "log_line": quote,
             "adaptive": view.adaptive}))
    cur = view.current_steps
    if view.adaptive and cur is not None and tier.launch_steps is not None and cur != tier.launch_steps:
        cur_draft = tier.current_draft_tokens if tier.current_steps is not None else None
        out.append(Finding(
            "VERIFY_ADAPTIVE", "info",
            f"adaptive: the server runs steps {cur}" + (f" / draft tokens {cur_draft}" if cur_draft is not None
                                                         else "")
            + f" now, launched at steps {tier.launch_steps} / draft tokens {tier.launch_draft_tokens}"
            + (f" ({view.switches} tier switch(es) in the log)" if view.switches else ""),
            "SGLang's adaptive controller switches the runtime state (apply_runtime_state, "
            "srt/speculative/eagle_worker_v2.py) and syncs internal_states[0] and the sglang:spec_num_steps gauge; the "
            "top-level /server_info fields keep the launch values (real 0.5.14: 3 while the server ran 1). A tier "
            "switch is not a silent adjustment.",
            "", {"current_steps": cur, "current_draft_tokens": cur_draft, "launch_steps": tier.launch_steps,
                 "launch_draft_tokens": tier.launch_draft_tokens, "switches": view.switches,
                 "gauge_steps": view.gauge_steps}))
    return out


def _acceptance(requests, log_lines, server_info, view: AdaptiveView, min_tokens: int,
                findings: list[Finding]) -> tuple[str, float | None, int]:
    """VERIFY_COLLAPSE (and VERIFY_ADAPTIVE for steps-0 windows): ``(acceptance, accept length, tokens)``."""
    tot_ct = tot_vc = spec_ct = 0
    for rec in requests or []:
        ct, vc = request_counts(rec)
        if ct is None:
            continue
        tot_ct += ct
        if vc:
            tot_vc += vc
            spec_ct += ct
    log_al = [w.accept_length for w in view.windows] if view.windows else log_accept_lengths(log_lines or [])
    tokens = tot_ct
    if view.tier_aware:
        return _acceptance_by_tier(view, tot_ct, tot_vc, spec_ct, min_tokens, requests, findings)
    if tot_vc and spec_ct >= min_tokens:
        al = spec_ct / tot_vc
        acceptance = "collapsed" if al <= COLLAPSE_THRESHOLD else "ok"
        if acceptance == "collapsed":
            findings.append(_collapse_finding(al, spec_ct, tot_vc, "requests",
                                              {"log_accept_lengths": log_al[:20]} if log_al else None))
        return acceptance, al, tokens
    if len(log_al) >= 3 or (log_al and not requests):
        mean = sum(log_al) / len(log_al)
        acceptance = "collapsed" if max(log_al) <= COLLAPSE_THRESHOLD else "ok"
        if acceptance == "collapsed":
            findings.append(_collapse_finding(mean, tot_ct, len(log_al), "log", {"log_accept_lengths": log_al[:20]}))
        return acceptance, mean, tokens
    if tot_vc:
        al = spec_ct / tot_vc
        findings.append(Finding(
            "VERIFY_COLLAPSE", "info",
            f"only {spec_ct} tokens so far (accept length {al:.2f}); acceptance is judged after {min_tokens}",
            "A handful of tokens cannot tell a collapse from noise.", "", {"tokens": spec_ct}))
        return "unknown", al, tokens
    findings.append(_unknown_finding(tot_ct))
    lifetime = _si(server_info, "avg_spec_accept_length")
    if isinstance(lifetime, (int, float)) and lifetime <= COLLAPSE_THRESHOLD:
        findings.append(Finding(
            "VERIFY_COLLAPSE", "warning",
            f"the server's lifetime avg_spec_accept_length is {lifetime:.2f}",
            "A server-wide average since start (warm-up included), not this run's; on some builds it is "
            "never updated (sgl-project/sglang-jax#1586). It hints at a collapse but does not prove one.",
            "measure with requests (completion_tokens / spec_verify_ct)", {"avg_spec_accept_length": lifetime}))
    return "unknown", None, tokens


_ZERO_WHY = ("From 0.5.14 a tier may run 0 draft steps (no drafting: a plain decode through the verify graph, "
             "eagle_worker_v2.py _build_trivial_verify_input), counted as a verify round that accepts only the bonus "
             "token — accept length exactly 1.00 by design (srt/speculative/adaptive_spec_params.py "
             "DEFAULT_ADAPTIVE_CONFIG: slots \"8\" [0, 1, 3], \"32\" [0, 1], \"64\" [0]). Those windows say nothing "
             "about the draft, and request-level accept lengths pool them in; acceptance is judged on the windows "
             "that drafted.")


def _acceptance_by_tier(view: AdaptiveView, tot_ct: int, tot_vc: int, spec_ct: int, min_tokens: int, requests,
                        findings: list[Finding]) -> tuple[str, float | None, int]:
    """Collapse judgement when steps-0 tiers were served: requests above the threshold still prove
    acceptance; otherwise only decode windows that drafted count."""
    drafted = [w for w in view.windows if w.drafted]
    zero = [w for w in view.windows if not w.drafted]
    req_al = spec_ct / tot_vc if tot_vc else None
    ev = {"zero_step_windows": len(zero), "drafted_windows": len(drafted),
          "mixed_windows": sum(1 for w in drafted if w.tiers is not None and 0 in w.tiers), "request_accept_length":
          round(req_al, 4) if req_al is not None else None, "switches": view.switches,
          "current_steps": view.current_steps}
    note = Finding(
        "VERIFY_ADAPTIVE", "info",
        (f"{len(zero)} of {len(view.windows)} decode window(s) ran at steps 0 (no drafting, accept length 1.00 by "
         "design) and are left out of the collapse check" if view.windows else
         "the adaptive server served a steps-0 tier (no drafting) and no decode lines are available to separate it")
        + (f"; pooled over the requests the accept length reads {req_al:.2f}" if req_al is not None else ""),
        _ZERO_WHY, "", ev)
    if req_al is not None and spec_ct >= min_tokens and req_al > COLLAPSE_THRESHOLD:
        findings.append(note)
        return "ok", req_al, tot_ct
    # a window that mixes steps 0 with drafting tiers reads diluted: it proves acceptance when above the
    # threshold, but only windows without a steps-0 tier can prove a collapse
    pure = [w for w in drafted if w.tiers is None or 0 not in w.tiers]
    if drafted and (pure or max(w.accept_length for w in drafted) > COLLAPSE_THRESHOLD):
        vals = [w.accept_length for w in drafted]
        mean = sum(vals) / len(vals)
        findings.append(note)
        if max(vals) <= COLLAPSE_THRESHOLD:
            pv = [w.accept_length for w in pure]
            findings.append(_collapse_finding(sum(pv) / len(pv), tot_ct, len(pure), "log",
                                              {"log_accept_lengths": pv[:20], "adaptive": True, **ev}))
            return "collapsed", sum(pv) / len(pv), tot_ct
        return "ok", mean, tot_ct
    note.message += ": acceptance UNKNOWN until a decode window runs at steps ≥ 1 only"
    note.fix = ("measure the draft at a concurrency whose slot drafts (e.g. below 8 with the default config), or "
                "launch without a steps-0 candidate")
    findings.append(note)
    return "unknown", None, tot_ct


__all__ = ["COLLAPSE_THRESHOLD", "AdaptiveView", "CollapseDecision", "CollapseWatch", "VerifyReport",
           "adaptive_view", "log_accept_lengths", "verify_server"]
