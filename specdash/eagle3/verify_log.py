"""Post-launch verification: the server log scan (loader, capture, memory, shape and argparse errors and
warnings → ``VERIFY_LOG`` findings).  Part of :mod:`specdash.eagle3.verify`.
"""

from __future__ import annotations

import re

from specdash.eagle3.findings import Finding

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


def _quote(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a sentence end (or, failing that, a word end),
    with "…" when anything was cut — a log quote that ends mid-word reads as a different message."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = max(head.rfind(". "), head.rfind("! "), head.rfind("? "))
    if end >= limit // 2:
        return head[: end + 1] + " …"
    space = head.rfind(" ")
    return (head[:space] if space >= limit // 2 else head).rstrip(" ,;:") + " …"


def scan_log(lines: list[str], draft_info, findings: list[Finding]) -> None:
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
                "VERIFY_LOG", "error", f"memory failure at start-up or under load: '{_quote(body, 200)}'",
                "Weights, KV pool and CUDA-graph buffers do not fit in mem_fraction_static × GPU memory; with a draft, "
                "older releases applied the fraction twice and mis-estimated draft memory, so one fraction OOMs and the "
                "next lower one has no KV room (sglang#6875, #4330; PR #28855).",
                "run `specdash doctor` with the GPU memory known (MEMORY check); on builds without PR #28855 search "
                "--mem-fraction-static empirically, shrink the draft, lower --max-running-requests / --context-length, "
                "or raise tp_size", {"line": i + 1, "text": body}))
            continue
        m = _SHAPE.search(line)
        if m:
            add(f"shape:{_quote(body, 80)}", _shape_finding(body, m, draft_info, i))
            continue
        if _CAPTURE.search(line):
            add("capture", Finding("VERIFY_LOG", "error", f"the target cannot capture EAGLE3 aux states: '{_quote(body, 200)}'",
                                   "SGLang raises this for target classes without set_eagle3_layers_to_capture "
                                   "(attention_backend_setup.py).", "use a target family SGLang supports for EAGLE3, or EAGLE",
                                   {"line": i + 1, "text": body}))
            continue
        if _CTXLEN.search(line):
            if "ValueError" in line or "To allow overriding" in line:
                add("ctx", Finding("VERIFY_LOG", "error", f"context-length check failed: '{_quote(body, 200)}'",
                                   "The draft is built with the target's context length (eagle_worker_v2.py); "
                                   "without SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 SGLang raises ValueError.",
                                   "set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in [env] or lower --context-length",
                                   {"line": i + 1, "text": body}))
            else:
                # With the variable set SGLang only logs this and overrides the draft's length (ModelConfig._derive_context_length).
                add("ctx-warn", Finding("VERIFY_LOG", "info",
                                        f"the draft's context length was overridden: '{_quote(body, 160)}'",
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
            add(f"loader:{_quote(body, 60)}", Finding(
                "VERIFY_LOG", "warning", f"the loader reports skipped/unused weights: '{_quote(body, 200)}'",
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
                add(f"exc:{_quote(body, 80)}", Finding("VERIFY_LOG", "error", f"exception in the server log: {_quote(body, 200)}",
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
        "VERIFY_LOG", "error", f"tensor shape mismatch in the server log: '{_quote(body, 200)}'{detail}",
        "In EAGLE3 the fc input is K aux states × hidden; a multiple of hidden that is short by one means one "
        "captured layer is missing — e.g. ids in the boundary convention whose last layer is never captured "
        "(sglang#32226: 8640 vs 5760).",
        "run `specdash doctor` (AUX_LAYERS shows the layers SGLang captures); do not hand-shift ids — use a build "
        "that reads the head's convention (PR #32334 for gpt-oss)", ev)


