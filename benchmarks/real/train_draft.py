#!/usr/bin/env python3
"""Train an EAGLE3 draft for the test bed's target with SpecForge's own model and loss (online, one GPU).

What SpecForge 0.2.0 (the sgl-project trainer; ``specforge`` on the package index) provides and this
script uses unchanged:

- the draft: ``specforge.modeling.draft.llama3_eagle.LlamaForCausalLMEagle3`` (``midlayer.*``, ``fc``,
  ``norm``, ``lm_head`` and the ``t2d`` / ``d2t`` buffers: the names SGLang's EAGLE3 loader reads,
  ``specforge/export/to_sglang.py``);
- the training-time-test unroll and loss: ``specforge.algorithms.eagle3.model.OnlineEagle3Model``
  (``length`` = TTT steps, per-step losses weighted ``0.8**i`` as ``Eagle3TrainStrategy`` does);
- the target-side shift: ``specforge.modeling.target.target_head.TargetHead.preprocess`` (logits and
  input ids moved one token left, the loss mask unshifted);
- the reduced vocabulary: ``specforge.data.preprocessing.process_token_dict_to_mappings`` over the
  answer tokens (``d2t`` holds offsets: target id = draft id + d2t[draft id], as SGLang reads it);
- the SGLang-facing export: non-embedding keys only, then ``apply_legacy_rope_scaling``.

What this script does itself, because SpecForge 0.2.0's launcher wants a live SGLang capture server or a
prepared offline hidden-state store: it runs the target with transformers (``output_hidden_states``) and
concatenates the aux layers SGLang captures, ``eagle_aux_hidden_state_layer_ids`` = [1, L/2 − 1, L − 4]
(SpecForge's ``resolve_eagle_capture_layers`` default; SGLang's ``LlamaForCausalLM.
set_eagle3_layers_to_capture`` captures the *inputs* of layers id + 1, which are transformers'
``hidden_states[id + 1]``).  These ids are written into the draft's ``eagle_config`` so serving uses the
layers training used.

Resumable: ``--init DIR`` warm-starts from an earlier run's draft (its d2t/t2d and weights; the optimizer
starts afresh with a short warm-up), so training spans device calls and sessions.  The deadline
(``--minutes``) is wall clock from start; checkpoints are written every ``--save-every`` steps and at the
end, each complete before it replaces the last.

Usage::

    python3 benchmarks/real/train_draft.py --target DIR --data data.jsonl --out DRAFT_DIR \
        [--init DRAFT_DIR] [--minutes 5] [--draft-vocab auto] [--log train.jsonl]

Log lines (JSON): ``{"step", "epoch", "loss", "acc": [per TTT position], "lr", "s"}`` and evaluation lines
``{"eval": true, "acc": [...], "accept_length_est"}`` where ``acc[i]`` is the held-out top-1 agreement
at TTT position i (the draft's i-th token given the earlier ones were right) and ``accept_length_est`` =
1 + Σ_k Π_{i<k} acc[i] over 3 steps: what a chain of 3 would accept if greedy agreement were acceptance.
``--smoke`` replaces the two GPU-only pieces (SpecForge's Triton loss, a compiled helper) with plain
torch so the data path can be checked on a CPU; it trains nothing worth serving.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path


def log(fh, rec: dict) -> None:
    line = json.dumps(rec)
    print(line, flush=True)
    if fh:
        fh.write(line + "\n")
        fh.flush()


def load_examples(path: str, max_len: int) -> list[tuple[list[int], list[int], str]]:
    """(input_ids, loss_mask, category) per answer: the prompt masked out, the answer trained on."""
    out = []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        r = json.loads(line)
        ids = list(r["prompt_ids"]) + list(r["output_ids"])
        mask = [0] * len(r["prompt_ids"]) + [1] * len(r["output_ids"])
        ids, mask = ids[:max_len], mask[:max_len]
        if sum(mask) >= 8:
            out.append((ids, mask, r.get("category", "")))
    return out


def draft_config(target_cfg: dict, draft_vocab: int, aux_ids: list[int]) -> dict:
    """config.json of the draft: the target's shapes, one layer, its own (untied) reduced-vocab head."""
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "hidden_act", "rms_norm_eps", "max_position_embeddings", "vocab_size", "rope_theta",
            "rope_parameters", "rope_scaling", "bos_token_id", "eos_token_id", "pad_token_id",
            "attention_bias", "mlp_bias")
    cfg = {k: target_cfg[k] for k in keep if k in target_cfg}
    cfg.update({
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "draft_vocab_size": draft_vocab,
        "target_hidden_size": target_cfg["hidden_size"],
        # the target ties its head to its embedding; the draft's head is its own (draft_vocab rows)
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(aux_ids), "use_aux_hidden_state": True},
    })
    return cfg


def pick_vocab(counts: Counter, want: str) -> tuple[int, float]:
    total = sum(counts.values())
    ranked = [c for _, c in counts.most_common()]

    def cover(n: int) -> float:
        return sum(ranked[:n]) / total if total else 0.0

    if want != "auto":
        return int(want), cover(int(want))
    for n in (4096, 8192, 12288, 16384, 24576, 32000):
        if cover(n) >= 0.995:
            return n, cover(n)
    return 32000, cover(32000)


def apply_smoke_patches() -> None:
    """CPU only: plain-torch stand-ins for SpecForge's Triton loss and its compiled target helper."""
    import specforge.algorithms.eagle3.model as m
    import torch

    class _Loss:
        @staticmethod
        def apply(logits, target_p, position_mask):
            lp = torch.log_softmax(logits.float(), -1)
            per = -(target_p * lp).sum(-1, keepdim=True) * position_mask
            return per.sum() / (logits.shape[0] * logits.shape[1])

    m.LogSoftmaxLoss = _Loss
    orig = getattr(m._compute_target_p, "_torchdynamo_orig_callable", None)
    if orig is not None:
        m._compute_target_p = orig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--init", default=None, help="warm start from this draft directory (resume)")
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--draft-vocab", default="auto")
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--ttt", type=int, default=7)
    ap.add_argument("--eval-frac", type=float, default=0.04)
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--log", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="CPU check of the data path (see the docstring)")
    ap.add_argument("--max-steps", type=int, default=0)
    a = ap.parse_args(argv)
    t_start = time.time()
    deadline = t_start + a.minutes * 60

    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    from transformers.models.llama.configuration_llama import LlamaConfig

    if a.smoke:
        apply_smoke_patches()
    from specforge.algorithms.eagle3.model import OnlineEagle3Model
    try:
        import datasets  # noqa: F401 — specforge.data.preprocessing imports it at the top
    except ImportError:  # the mapping function below needs none of it (a machine without a matching pyarrow)
        import types
        sys.modules["datasets"] = types.SimpleNamespace(Dataset=object)
    from specforge.data.preprocessing import process_token_dict_to_mappings
    from specforge.export.checkpoint_io import apply_legacy_rope_scaling
    from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3
    from specforge.utils import padding

    random.seed(a.seed)
    torch.manual_seed(a.seed)
    dev = "cuda" if torch.cuda.is_available() and not a.smoke else "cpu"
    dtype = torch.bfloat16
    fh = open(a.log, "a", encoding="utf-8") if a.log else None

    target_cfg = json.loads(Path(a.target, "config.json").read_text())
    n_layers = int(target_cfg["num_hidden_layers"])
    aux_ids = [1, n_layers // 2 - 1, n_layers - 4]
    examples = load_examples(a.data, a.max_len)
    random.Random(a.seed).shuffle(examples)
    n_eval = max(8, int(len(examples) * a.eval_frac))
    held, train = examples[:n_eval], examples[n_eval:]

    init_cfg = json.loads(Path(a.init, "config.json").read_text()) if a.init else None
    if init_cfg:
        draft_vocab, coverage = int(init_cfg["draft_vocab_size"]), None
    else:
        counts: Counter = Counter()
        for ids, mask, _ in train:
            counts.update(t for t, m in zip(ids, mask) if m)
        draft_vocab, coverage = pick_vocab(counts, a.draft_vocab)
    cfg = draft_config(target_cfg, draft_vocab, aux_ids)
    lcfg = LlamaConfig(**{k: v for k, v in cfg.items() if k not in ("architectures",)})
    for k in ("draft_vocab_size", "target_hidden_size", "eagle_config"):
        setattr(lcfg, k, cfg[k])
    draft = LlamaForCausalLMEagle3(lcfg, attention_backend="sdpa")
    draft.load_embedding(a.target)
    draft.freeze_embedding()
    if init_cfg:
        sd = {}
        for f in sorted(Path(a.init).glob("*.safetensors")):
            sd.update(load_file(str(f)))
        missing, unexpected = draft.load_state_dict(sd, strict=False)
        missing = [k for k in missing if "embed" not in k]
        if missing or unexpected:
            raise SystemExit(f"--init {a.init}: missing {missing}, unexpected {unexpected}")
    else:
        d2t, t2d = process_token_dict_to_mappings(counts, draft_vocab, int(target_cfg["vocab_size"]))
        draft.d2t.copy_(d2t)
        draft.t2d.copy_(t2d)
    draft = draft.to(device=dev, dtype=dtype)
    draft.t2d = draft.t2d.bool()
    model = OnlineEagle3Model(draft, length=a.ttt, attention_backend="sdpa").to(dev)
    target = AutoModelForCausalLM.from_pretrained(a.target, dtype=dtype).to(dev).eval()
    for p in target.parameters():
        p.requires_grad_(False)

    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    steps_per_epoch = math.ceil(len(train) / a.batch)
    warmup = 30 if init_cfg else 60
    log(fh, {"start": True, "train": len(train), "held_out": len(held), "draft_vocab": draft_vocab,
             "vocab_coverage": coverage, "aux_ids": aux_ids, "init": a.init, "device": dev,
             "trainable_params": sum(p.numel() for p in params), "ttt": a.ttt, "batch": a.batch,
             "max_len": a.max_len, "lr": a.lr})

    def batches(items, shuffle):
        order = list(range(len(items)))
        if shuffle:
            random.shuffle(order)
        for i in range(0, len(order), a.batch):
            chunk = [items[j] for j in order[i:i + a.batch]]
            T = a.max_len  # one shape for every batch: no recompiles of SpecForge's compiled helpers
            ids = torch.zeros(len(chunk), T, dtype=torch.long)
            att = torch.zeros(len(chunk), T, dtype=torch.long)
            lm = torch.zeros(len(chunk), T, dtype=torch.long)
            for r, (x, m, _) in enumerate(chunk):
                ids[r, :len(x)] = torch.tensor(x)
                att[r, :len(x)] = 1
                lm[r, :len(m)] = torch.tensor(m)
            lm[:, -1] = 0
            yield ids.to(dev), att.to(dev), lm.to(dev)

    def forward(ids, att, lm):
        with torch.no_grad():
            out = target(input_ids=ids, attention_mask=att, output_hidden_states=True)
            hs = out.hidden_states
            aux = torch.cat([hs[i + 1] for i in aux_ids], dim=-1)
            logits = out.logits
            # TargetHead.preprocess (specforge/modeling/target/target_head.py)
            tgt = padding(logits, left=False)
            ids_s = padding(ids, left=False)
            lmask = lm[..., None]
        plosses, _, acces, *_ = model(input_ids=ids_s, attention_mask=att, loss_mask=lmask, target=tgt,
                                      hidden_states=aux)
        return plosses, acces

    def evaluate() -> dict:
        draft.eval()
        sums = [0.0] * a.ttt
        n = 0
        with torch.no_grad():
            for ids, att, lm in batches(held, False):
                _, acces = forward(ids, att, lm)
                for i, x in enumerate(acces):
                    sums[i] += float(x)
                n += 1
        draft.train()
        acc = [round(s / max(n, 1), 4) for s in sums]
        # acces[i] is agreement at TTT depth i over all positions, already conditional on the unroll
        est, run = 1.0, 1.0
        for i in range(min(3, len(acc))):
            run *= acc[i]
            est += run
        return {"eval": True, "acc": acc, "accept_length_est": round(est, 3)}

    def save(final: bool) -> None:
        tmp = Path(a.out + ".tmp")
        if tmp.exists():
            import shutil
            shutil.rmtree(tmp)
        state = {k: v.detach().to(torch.bfloat16) if v.is_floating_point() else v.detach()
                 for k, v in draft.state_dict().items() if "embed" not in k.lower()}
        state["t2d"] = draft.t2d.detach().bool().cpu()
        state["d2t"] = draft.d2t.detach().long().cpu()
        draft.save_pretrained(str(tmp), state_dict=state, safe_serialization=True)
        conf = json.loads((tmp / "config.json").read_text())
        conf.update({k: cfg[k] for k in ("architectures", "draft_vocab_size", "eagle_config",
                                         "tie_word_embeddings", "target_hidden_size")})
        (tmp / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True))
        apply_legacy_rope_scaling(str(tmp))
        out = Path(a.out)
        if out.exists():
            import shutil
            shutil.rmtree(out)
        tmp.rename(out)
        log(fh, {"saved": str(out), "final": final, "files": sorted(p.name for p in out.iterdir())})

    ev = evaluate()
    ev["step"] = 0
    log(fh, ev)
    step, epoch = 0, 0
    draft.train()
    done = False
    while not done:
        for ids, att, lm in batches(train, True):
            lr = a.lr * min(1.0, (step + 1) / warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            plosses, acces = forward(ids, att, lm)
            loss = sum((0.8 ** i) * p for i, p in enumerate(plosses))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 0.5)
            opt.step()
            step += 1
            if step % 20 == 0 or step == 1:
                log(fh, {"step": step, "epoch": epoch, "loss": round(float(loss), 4),
                         "acc": [round(float(x), 3) for x in acces], "lr": lr,
                         "s": round(time.time() - t_start, 1)})
            if step % a.save_every == 0:
                ev = evaluate()
                ev["step"] = step
                log(fh, ev)
                save(False)
            if time.time() > deadline or (a.max_steps and step >= a.max_steps):
                done = True
                break
        epoch += 1
    ev = evaluate()
    ev["step"] = step
    ev["final"] = True
    log(fh, ev)
    save(True)
    log(fh, {"done": True, "steps": step, "epochs": epoch, "steps_per_epoch": steps_per_epoch,
             "seconds": round(time.time() - t_start, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
