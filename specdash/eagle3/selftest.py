"""``specdash draft selftest DRAFT --sample FILE [--target DIR]``: run the draft head alone.

The lesson of a Kimi-K2.5 EAGLE3 deployment (its draft tested standalone): when a served head collapses,
run it outside the server on a sample from its own training data.  Good step-0 accuracy there
plus a collapse when served means the *wiring* is wrong (algorithm, aux layers, keys, d2t); a
bad score here means the *training* (or the export) is.  This module reimplements SGLang's
``LlamaForCausalLMEagle3`` step-0 forward in torch (imported lazily: the ``drafter`` extra) and
scores it wired right and wired in the ways servers get it wrong.

The forward (``srt/models/llama_eagle3.py`` 0.5.23, ``LlamaForCausalLMEagle3``):

1. ``embeds = embed_tokens[ids]`` — SGLang substitutes the *target's* embedding (unless
   ``target_hidden_size ≠ hidden_size``), hence ``embed_tokens`` in the sample or ``--target``.
2. If the aux input width ≠ hidden_size: optional ``input_norm`` (``norm_before_fc``), optional
   per-chunk ``fc_norm``, then ``fc`` (``[hidden, K·hidden_in]``).  Equal widths skip fc — the
   bypass that makes EAGLE-with-an-EAGLE3-head run silently.
3. Decoder layer 0: ``residual = h``; ``x = cat(input_layernorm(embeds), hidden_norm(h))`` (2 × hidden);
   causal self-attention with RoPE (neox/rotate-half style, ``rope_theta`` from config, GQA);
   ``residual += o_proj(attn)``; MLP (``down(act(gate(x)) * up(x))``) on
   ``post_attention_layernorm(residual)``.
4. ``logits = lm_head(norm(mlp + residual))`` over the draft vocabulary; top-1 draft id ``i`` →
   target id ``i + d2t[i]`` (``hot_token_id = d2t + arange``).

Sample format (one safetensors file; see ``specdash draft selftest --help``):

* ``input_ids`` [T] int — the token sequence;
* ``hidden_states`` [T, K × hidden] float — the K aux states the training used, concatenated in
  training order;
* ``target_ids`` [T] int, optional — ground-truth next token of each position (default:
  ``input_ids`` shifted by one);
* ``hidden_states_all`` [T, (K+1) × hidden], optional — K+1 captured layers in order, one of the
  two K-windows being ``hidden_states``: enables the "shifted by one layer" variant;
* ``embed_tokens`` [vocab, hidden], optional — the target's embedding (else ``--target DIR``'s
  ``model.embed_tokens.weight``, else the draft's own with a note).

Layout (safetensors ``__metadata__`` ``layout``): ``raw`` (default) — ``hidden_states[t]`` is what
the target computed at position ``t``; the draft pairs it with ``input_ids[t+1]`` and predicts
``target_ids[t+1]`` (= ``input_ids[t+2]``), as SGLang's draft-extend does.  ``paired`` — rows are
already paired: ``hidden_states[t]`` with ``input_ids[t]``, predicting ``target_ids[t]``.

Variants: (a) wired right; (b) aux states shifted by one captured layer (needs
``hidden_states_all``); (c) a single layer fed — the last captured layer alone with fc skipped, as
with ``--speculative-algorithm EAGLE``; (d) ``d2t`` read as absolute ids.  All on CPU, float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from specdash.checkpoint.layout import EAGLE3_LAYER_PARTS
from specdash.checkpoint.reader import CheckpointError, ModelDir, read_model_dir
from specdash.sglang.versions import DEFAULT_VERSION, eagle3_param_for_key

SAMPLE_FORMAT_HELP = """\
sample format (one safetensors file):
  input_ids          [T] int             the token sequence
  hidden_states      [T, K*hidden] float the K aux states the training used, concatenated in order
  target_ids         [T] int (optional)  ground-truth next token per position (default: input_ids shifted)
  hidden_states_all  [T, (K+1)*hidden]   (optional) K+1 captured layers: enables 'shifted by one layer'
  embed_tokens       [vocab, hidden]     (optional) target embeddings (else --target DIR, else the draft's)
  __metadata__ layout = raw (default: hidden_states[t] computed at t, paired with input_ids[t+1] to
               predict input_ids[t+2]) | paired (hidden_states[t] paired with input_ids[t])
"""


class SelftestError(Exception):
    """The self-test cannot run (missing torch, unreadable draft or sample, missing weights)."""


@dataclass
class VariantResult:
    """Top-1 accuracy of one wiring: ``accuracy`` in [0, 1] over ``n`` positions, or ``skipped``."""

    name: str
    label: str
    accuracy: float | None = None
    n: int = 0
    skipped: str | None = None
    note: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "label": self.label, "accuracy": self.accuracy, "n": self.n,
                "skipped": self.skipped, "note": self.note}


@dataclass
class SelftestReport:
    """Self-test result: per-variant accuracies, the ceiling and chance level, and a verdict."""

    draft: str
    sample: str
    positions: int
    reachable: float
    chance: float
    variants: list[VariantResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdict: str = ""
    works: bool = False

    def variant(self, name: str) -> VariantResult:
        """The result named ``wired`` | ``shifted`` | ``one_layer`` | ``d2t_absolute``."""
        return next(v for v in self.variants if v.name == name)

    def to_json(self) -> dict:
        return {"draft": self.draft, "sample": self.sample, "positions": self.positions,
                "reachable": self.reachable, "chance": self.chance,
                "variants": [v.to_json() for v in self.variants], "notes": self.notes, "verdict": self.verdict,
                "works": self.works}

    def render(self) -> str:
        lines = [f"drafter self-test: {self.draft} on {self.sample} ({self.positions} positions, step 0, top-1)",
                 f"  targets inside the draft vocabulary: {self.reachable:.1%} (ceiling); chance ≈ {self.chance:.2%}"]
        for v in self.variants:
            val = f"{v.accuracy:6.1%}" if v.accuracy is not None else "  —   "
            lines.append(f"  {val}  {v.label}" + (f"  [skipped: {v.skipped}]" if v.skipped else "")
                         + (f"  ({v.note})" if v.note else ""))
        lines += [f"  note: {n}" for n in self.notes]
        lines.append("")
        lines.append(self.verdict)
        return "\n".join(lines)


# --- loading ------------------------------------------------------------------------------------


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the environment
        raise SelftestError("the drafter self-test needs torch: pip install 'specdash[drafter]'") from None
    return torch


def _load_named(md: ModelDir, names: list[str]) -> dict:
    """Load tensors (torch, float32 for floats) by exact checkpoint name."""
    _torch()
    from safetensors import safe_open

    out = {}
    by_file: dict[str, list[str]] = {}
    for n in names:
        by_file.setdefault(md.tensors[n].file or "", []).append(n)
    for fname, group in by_file.items():
        try:
            with safe_open(str(Path(md.path) / fname), framework="pt") as fh:
                for n in group:
                    t = fh.get_tensor(n)
                    out[n] = t.float() if t.is_floating_point() else t
        except Exception as exc:
            raise SelftestError(f"{md.path}/{fname}: cannot read tensors: {exc}") from None
    return out


def _canonical_map(md: ModelDir) -> dict[str, str]:
    """canonical parameter (midlayer.* / top-level) → checkpoint name, newest naming + layers.0."""
    out: dict[str, str] = {}
    for name in md.tensors:
        p = eagle3_param_for_key(name, DEFAULT_VERSION)
        if p is None:
            base = name.removeprefix("model.")
            if base.startswith("layers.0.") and base[len("layers.0."):] in EAGLE3_LAYER_PARTS:
                p = "midlayer." + base[len("layers.0."):]
        if p is not None:
            out.setdefault(p, name)
    return out


def _load_sample(path: str | Path) -> tuple[dict, dict]:
    torch = _torch()
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            data = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - safe_open is not a dict
    except Exception as exc:
        raise SelftestError(f"{path}: cannot read the sample ({exc}); expected a safetensors file") from None
    for req in ("input_ids", "hidden_states"):
        if req not in data:
            raise SelftestError(f"{path}: the sample has no '{req}' tensor\n{SAMPLE_FORMAT_HELP}")
    data = {k: (v.float() if v.is_floating_point() else v.long()) for k, v in data.items()}
    if data["hidden_states"].dim() == 3:
        data["hidden_states"] = data["hidden_states"].reshape(-1, data["hidden_states"].shape[-1])
    for k in ("input_ids", "target_ids"):
        if k in data:
            data[k] = data[k].reshape(-1)
    if "hidden_states_all" in data and data["hidden_states_all"].dim() == 3:
        data["hidden_states_all"] = data["hidden_states_all"].reshape(-1, data["hidden_states_all"].shape[-1])
    del torch
    return data, meta


def _find_embed(target: str | None) -> tuple[object | None, str]:
    if not target:
        return None, ""
    try:
        md = read_model_dir(target)
    except CheckpointError as exc:
        raise SelftestError(f"--target: {exc}") from None
    for cand in ("model.embed_tokens.weight", "embed_tokens.weight", "language_model.model.embed_tokens.weight",
                 "model.language_model.embed_tokens.weight", "transformer.wte.weight"):
        if cand in md.tensors:
            return _load_named(md, [cand])[cand], f"{target}:{cand}"
    hits = [n for n in md.tensors if n.endswith("embed_tokens.weight")]
    if hits:
        return _load_named(md, [hits[0]])[hits[0]], f"{target}:{hits[0]}"
    raise SelftestError(f"--target {target}: no embed_tokens.weight tensor found")


# --- the forward ----------------------------------------------------------------------------------


class _Head:
    """SGLang's LlamaForCausalLMEagle3, step 0, in plain torch (float32, CPU)."""

    def __init__(self, md: ModelDir, embed, notes: list[str]):
        torch = _torch()
        self.torch = torch
        cfg = md
        self.H = int(cfg.hidden_size)
        self.nh = int(cfg.cfg("num_attention_heads"))
        self.nkv = int(cfg.cfg("num_key_value_heads") or self.nh)
        self.hd = int(cfg.cfg("head_dim") or self.H // self.nh)
        self.eps = float(cfg.cfg("rms_norm_eps", 1e-5) or 1e-5)
        rp = cfg.cfg("rope_parameters") or {}
        self.theta = float(cfg.cfg("rope_theta") or (rp.get("rope_theta") if isinstance(rp, dict) else None) or 10000.0)
        scaling = cfg.cfg("rope_scaling") or (rp if isinstance(rp, dict) else None) or {}
        rtype = (scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default"
        self.rope_scaling = scaling if rtype not in ("default", None) else None
        if self.rope_scaling and rtype not in ("linear", "llama3"):
            notes.append(f"rope_scaling type {rtype!r} not emulated; plain RoPE used (affects long positions only)")
        self.act = str(cfg.cfg("hidden_act", "silu"))
        ec = cfg.config.get("eagle_config") if isinstance(cfg.config.get("eagle_config"), dict) else {}
        self.norm_before_fc = bool(ec.get("norm_before_fc", cfg.cfg("norm_before_fc", False)))
        self.fc_norm_on = bool(cfg.cfg("fc_norm") or cfg.cfg("use_aux_norm"))
        cmap = _canonical_map(md)
        need = ["fc.weight", "norm.weight"] + [f"midlayer.{p}" for p in EAGLE3_LAYER_PARTS]
        missing = [p for p in need if p not in cmap]
        tie = bool(cfg.cfg("tie_word_embeddings", False))
        if not tie and "lm_head.weight" not in cmap:
            missing.append("lm_head.weight")
        if missing:
            raise SelftestError(f"{md.path}: the draft has no tensor for {', '.join(missing)}; run `specdash doctor`")
        optional = [p for p in ("fc.bias", "input_norm.weight", "embed_tokens.weight", "lm_head.bias")
                    if p in cmap] + [p for p in cmap if p.startswith("fc_norm.")]
        names = [cmap[p] for p in need + optional + (["lm_head.weight"] if "lm_head.weight" in cmap else [])]
        raw = _load_named(md, sorted(set(names)) + (["d2t"] if "d2t" in md.tensors else []))
        self.w = {p: raw[cmap[p]] for p in cmap if cmap[p] in raw}
        if embed is None:
            if "embed_tokens.weight" not in self.w:
                raise SelftestError("no embeddings: the sample has no embed_tokens, no --target was given and the "
                                    "draft has none (SGLang uses the target's embed_tokens)")
            embed = self.w["embed_tokens.weight"]
            th = cfg.cfg("target_hidden_size")
            if not th or th == self.H:
                notes.append("embeddings taken from the draft's own embed_tokens.weight; SGLang uses the target's "
                             "(pass --target DIR or put embed_tokens in the sample)")
        self.embed = embed.float()
        self.lm_head = self.embed if tie else self.w["lm_head.weight"]
        self.d2t = raw["d2t"].long().reshape(-1) if "d2t" in raw else None
        self.dvs = int(self.lm_head.shape[0])

    # building blocks
    def rms(self, x, w):
        torch = self.torch
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def _act(self, x):
        F = self.torch.nn.functional
        if self.act.startswith("gelu"):
            return F.gelu(x, approximate="tanh" if "tanh" in self.act else "none")
        return F.silu(x)

    def _rope(self, x, pos):
        torch = self.torch
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        sc = self.rope_scaling
        if sc and (sc.get("rope_type") or sc.get("type")) == "linear" and sc.get("factor"):
            inv = inv / float(sc["factor"])
        elif sc and (sc.get("rope_type") or sc.get("type")) == "llama3":
            f, lo, hi = float(sc.get("factor", 8)), float(sc.get("low_freq_factor", 1)), float(sc.get("high_freq_factor", 4))
            old = float(sc.get("original_max_position_embeddings", 8192))
            wl = 2 * math.pi / inv
            smooth = ((old / wl) - lo) / (hi - lo)
            inv = torch.where(wl > old / lo, inv / f,
                              torch.where(wl < old / hi, inv, (1 - smooth) * inv / f + smooth * inv))
        ang = pos.float()[:, None] * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
        half = self.hd // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    def fc_in(self, hs):
        """Step 2: fc (and optional norms) when the width differs from hidden_size."""
        if hs.shape[-1] == self.H:
            return hs  # SGLang skips fc when the widths already match
        if hs.shape[-1] != self.w["fc.weight"].shape[1]:
            raise SelftestError(f"hidden_states width {hs.shape[-1]} ≠ fc in_features {self.w['fc.weight'].shape[1]}")
        if self.norm_before_fc and "input_norm.weight" in self.w:
            hs = self.rms(hs, self.w["input_norm.weight"])
        norms = sorted(p for p in self.w if p.startswith("fc_norm."))
        if self.fc_norm_on and norms:
            chunks = hs.chunk(len(norms), dim=-1)
            hs = self.torch.cat([self.rms(c, self.w[p]) for c, p in zip(chunks, norms, strict=True)], -1)
        out = hs @ self.w["fc.weight"].T
        if "fc.bias" in self.w:
            out = out + self.w["fc.bias"]
        return out

    def logits(self, ids, hs):
        torch = self.torch
        w = self.w
        T = ids.shape[0]
        emb = self.embed[ids]
        h = self.fc_in(hs)
        residual = h
        x = torch.cat([self.rms(emb, w["midlayer.input_layernorm.weight"]),
                       self.rms(h, w["midlayer.hidden_norm.weight"])], -1)
        q = (x @ w["midlayer.self_attn.q_proj.weight"].T).view(T, self.nh, self.hd)
        k = (x @ w["midlayer.self_attn.k_proj.weight"].T).view(T, self.nkv, self.hd)
        v = (x @ w["midlayer.self_attn.v_proj.weight"].T).view(T, self.nkv, self.hd)
        pos = torch.arange(T)
        q, k = self._rope(q, pos), self._rope(k, pos)
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(self.hd)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(T, self.nh * self.hd)
        residual = attn @ w["midlayer.self_attn.o_proj.weight"].T + residual
        x = self.rms(residual, w["midlayer.post_attention_layernorm.weight"])
        mlp = (self._act(x @ w["midlayer.mlp.gate_proj.weight"].T) * (x @ w["midlayer.mlp.up_proj.weight"].T)) \
            @ w["midlayer.mlp.down_proj.weight"].T
        out = self.rms(mlp + residual, w["norm.weight"])
        logits = out @ self.lm_head.T
        if "lm_head.bias" in w:
            logits = logits + w["lm_head.bias"]
        return logits

    def to_target(self, draft_ids, absolute: bool = False):
        if self.d2t is None:
            return draft_ids
        d2t = self.d2t.to(draft_ids.device)
        return d2t[draft_ids] if absolute else draft_ids + d2t[draft_ids]


# --- entry point ----------------------------------------------------------------------------------


def run_selftest(draft: str | Path, sample: str | Path, target: str | Path | None = None, *,
                 max_positions: int | None = 4096) -> SelftestReport:
    """Score the draft head's step-0 top-1 accuracy on ``sample`` in four wirings.

    Raises:
        SelftestError: torch missing, unreadable draft/sample, missing weights or embeddings.
    """
    torch = _torch()
    notes: list[str] = []
    try:
        md = read_model_dir(draft)
    except CheckpointError as exc:
        raise SelftestError(str(exc)) from None
    if md.virtual:
        raise SelftestError(f"{draft} is a virtual simulator model without weights")
    data, meta = _load_sample(sample)
    embed, embed_src = (data["embed_tokens"], "sample") if "embed_tokens" in data else _find_embed(
        str(target) if target else None)
    if embed_src:
        notes.append(f"embeddings from {embed_src}")
    head = _Head(md, embed, notes)
    layout = str(meta.get("layout", "raw")).lower()
    ids = data["input_ids"]
    hs = data["hidden_states"]
    all_hs = data.get("hidden_states_all")
    T = min(ids.shape[0], hs.shape[0])
    targets = data.get("target_ids")
    if targets is None:
        targets = torch.cat([ids[1:], torch.tensor([-1])])
    if layout == "paired":
        row_ids, row_hs, row_tg = ids[:T], hs[:T], targets[:T]
        row_all = all_hs[:T] if all_hs is not None else None
    else:
        if layout != "raw":
            notes.append(f"unknown layout {layout!r}: read as raw")
        row_ids, row_hs, row_tg = ids[1:T], hs[: T - 1], targets[1:T]
        row_all = all_hs[: T - 1] if all_hs is not None else None
    if max_positions and row_ids.shape[0] > max_positions:
        row_ids, row_hs, row_tg = row_ids[:max_positions], row_hs[:max_positions], row_tg[:max_positions]
        row_all = row_all[:max_positions] if row_all is not None else None
        notes.append(f"first {max_positions} positions scored")
    valid = row_tg >= 0
    n = int(valid.sum())
    if n == 0:
        raise SelftestError(f"{sample}: no positions with a ground-truth next token")
    V = int(md.vocab_size or head.embed.shape[0])
    reach = torch.zeros(max(V, int(row_tg.max()) + 1), dtype=torch.bool)
    all_draft = torch.arange(head.dvs)
    reach[head.to_target(all_draft).clamp(0, reach.shape[0] - 1)] = True
    reachable = float(reach[row_tg[valid]].float().mean())
    chance = 1.0 / head.dvs
    Hin = int(md.cfg("target_hidden_size") or head.H)

    def score(pred_target) -> float:
        return float((pred_target[valid] == row_tg[valid]).float().mean())

    results: list[VariantResult] = []
    with torch.no_grad():
        wired_logits = head.logits(row_ids, row_hs)
        top = wired_logits.argmax(-1)
        results.append(VariantResult("wired", "(a) wired right: K aux states → fc, d2t offsets",
                                     score(head.to_target(top)), n))
        # (b) shifted by one captured layer
        if row_all is None:
            results.append(VariantResult("shifted", "(b) aux states shifted by one layer", None, 0,
                                         "the sample has no hidden_states_all (K+1 captured layers)"))
        else:
            K = row_hs.shape[1] // Hin
            first, last = row_all[:, : K * Hin], row_all[:, Hin: (K + 1) * Hin]
            if torch.allclose(first, row_hs):
                other, txt = last, "one layer later (what a +1 id shift or a capture one layer off does)"
            elif torch.allclose(last, row_hs):
                other, txt = first, "one layer earlier"
            else:
                other, txt = last, "hidden_states matches neither window of hidden_states_all; used the last K"
            results.append(VariantResult("shifted", "(b) aux states shifted by one layer",
                                         score(head.to_target(head.logits(row_ids, other).argmax(-1))), n, note=txt))
        # (c) one layer fed (EAGLE): the last captured layer alone; fc skipped when widths match
        src = row_all if row_all is not None else row_hs
        single = src[:, -Hin:]
        if Hin != head.H:
            results.append(VariantResult("one_layer", "(c) one layer fed (served as EAGLE)", None, 0,
                                         f"target_hidden_size {Hin} ≠ hidden_size {head.H}: SGLang would fail with "
                                         "a shape error instead of running"))
        else:
            results.append(VariantResult(
                "one_layer", "(c) one layer fed, fc skipped (served as EAGLE)",
                score(head.to_target(head.logits(row_ids, single).argmax(-1))), n,
                note="last captured layer; the draft's own lm_head/d2t kept (SGLang would also swap in the target's)"))
        # (d) d2t as absolute ids
        if head.d2t is None:
            results.append(VariantResult("d2t_absolute", "(d) d2t read as absolute ids", None, 0,
                                         "the draft has no d2t"))
        else:
            results.append(VariantResult("d2t_absolute", "(d) d2t read as absolute ids",
                                         score(head.to_target(top, absolute=True)), n))
    rep = SelftestReport(str(draft), str(sample), n, reachable, chance, results, notes)
    rep.verdict, rep.works = _verdict(rep)
    return rep


def _verdict(rep: SelftestReport) -> tuple[str, bool]:
    """(verdict text, True when the head works on its training data)."""
    wired = rep.variant("wired").accuracy or 0.0
    wrong = [v for v in rep.variants if v.name != "wired" and v.accuracy is not None]
    worst = min(wrong, key=lambda v: v.accuracy) if wrong else None
    best_wrong = max(wrong, key=lambda v: v.accuracy) if wrong else None
    head = f"wired right scores {wired:.1%}"
    if best_wrong is not None:
        head += (f"; served wrong the same head would score {worst.accuracy:.1%}"
                 + (f"–{best_wrong.accuracy:.1%}" if best_wrong is not worst and best_wrong.accuracy != worst.accuracy
                    else "")
                 + f" ({', '.join(v.label[1:].split(')')[0] for v in wrong)})")
    rule = ("a head that scores well here but collapses when served points at wiring; a bad score here points at "
            "training")
    good = wired >= max(0.3, 10 * rep.chance) and (rep.reachable == 0 or wired >= 0.35 * rep.reachable)
    if good:
        tail = ("→ this head works on its training data: if SGLang shows accept length ≈ 1, check the wiring "
                "(`specdash doctor`: algorithm, aux layers, weight keys, d2t).")
    else:
        tail = ("→ this head scores poorly even when wired right: suspect training or the export (wrong sample "
                "layout, wrong aux layers in the sample, or a broken checkpoint), not SGLang.")
    return f"{head}: {rule}. {tail}", good


__all__ = ["SAMPLE_FORMAT_HELP", "SelftestError", "SelftestReport", "VariantResult", "run_selftest"]
