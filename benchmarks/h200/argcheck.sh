#!/usr/bin/env bash
# SGLang 0.5.14's own argument checks on the lent H200, before any model load (specdash doctor → ARGCHECK).
#
# One device call, from the checkout root, with the carry of benchmarks/h200/run.sh:
#   run(command="source .whl/carry/device_up.sh && bash benchmarks/h200/argcheck.sh", carry=[".whl/carry"])
# device_up.sh puts real SGLang 0.5.14 on PYTHONPATH (/root/site) and the tiny models in /root/models.
#
# Three launches that 0.5.14 refuses, each judged by `specdash doctor --json` (nothing is launched):
#   lora      EAGLE3 with --enable-lora --lora-paths: check_lora_server_args, 'Currently LoRA is only compatible
#             with NGRAM speculative decoding.' (server_args.py:6850)
#   pp        EAGLE3 with --pp-size 2: check_server_args, 'Pipeline parallelism is not compatible with overlap
#             schedule, speculative decoding'
#   dflash    DFLASH with --speculative-num-draft-tokens 16 --speculative-dflash-block-size 8: the speculative
#             hook's 'Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ.'
# and one healthy control (EAGLE3 3/1/8: accepted, draft tokens reported as the 4 SGLang will use).
# Pass: each refusal is an ARGCHECK error quoting SGLang's message, within 15 s of wall time per doctor run,
# with the GPU's memory use unchanged (no CUDA context kept, no weights loaded). Results: $OUT/argcheck/
# (one doctor JSON per case, summary.json, steps.log); ~1-2 min of device time.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
W="${OUT:-/tmp/out}/argcheck"
mkdir -p "$W/profiles"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$W/steps.log"; }
M=/root/models
log "sglang $(python3 -c 'import importlib.metadata as m; print(m.version("sglang"))' 2>&1 | tail -1) on $(hostname)"
mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }

profile() {  # name, algorithm, extra args (TOML list body)
  cat > "$W/profiles/$1.toml" <<EOF
name = "argcheck-$1"
[server]
launcher = "sglang"
model_path = "$M/target"
sglang_version = "0.5.14"
python = "python3"
extra_args = [$3]
[speculative]
algorithm = "$2"
draft_model_path = "$M/draft_aligned"
EOF
}
profile lora EAGLE3 '"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--enable-lora", "--lora-paths", "a='"$M"'/lora", "--max-loras-per-batch", "1"'
profile pp EAGLE3 '"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--pp-size", "2"'
profile dflash DFLASH '"--speculative-num-draft-tokens", "16", "--speculative-dflash-block-size", "8"'
profile ok EAGLE3 '"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8"'

# device_up.sh starts three JIT kernel builds (nvcc) in the background on a fresh loan: they compete with the
# checks for the CPU, which a user's doctor run never meets. The quiet round (always run) waits for them first (at most
# $QUIET_WAIT_S, default 300 s) and says how long; COLD=1 measures one extra round while they still run.
building() { pgrep -f "prewarm|sgl_kernel.rmsnorm|silu_and_mul|top_k_renorm_probs" >/dev/null 2>&1; }
ROUNDS="${ROUNDS:-quiet}"
[ "${COLD:-0}" = 1 ] && building && ROUNDS="cold $ROUNDS"
# STANDIN=torchvision: a round with those modules stood in for although installed ($SPECDASH_ARGCHECK_STANDIN;
# SGLang 0.5.14 imports only torchvision.io.decode_jpeg at module level, for request-time image decoding).
[ -n "${STANDIN:-}" ] && case " $ROUNDS " in *" standin "*) ;; *) ROUNDS="$ROUNDS standin" ;; esac
# Where the child's time goes: python -X importtime of the module the check imports (top 25 by cumulative us).
imports() {
  python3 -X importtime -c "import sglang.srt.server_args" 2> "$W/importtime-$1.txt" >/dev/null
  python3 - "$W/importtime-$1.txt" <<'PY' | tee -a "$W/steps.log"
import sys
rows = []
for line in open(sys.argv[1]):
    if line.startswith("import time:") and "|" in line:
        _, cum, name = line[len("import time:"):].split("|", 2)
        try:
            rows.append((int(cum), name.rstrip()))
        except ValueError:
            pass
rows.sort(reverse=True)
print(f"import sglang.srt.server_args: {rows[0][0] / 1e6:.2f} s cumulative; top modules (s):")
for us, name in rows[1:26]:
    print(f"  {us / 1e6:7.2f} {name}")
PY
}
before=$(mem)
for round in $ROUNDS; do
if [ "$round" = quiet ]; then
  t0=$(date +%s); while building && [ $(( $(date +%s) - t0 )) -lt "${QUIET_WAIT_S:-300}" ]; do sleep 2; done
  log "quiet round: waited $(( $(date +%s) - t0 )) s for device_up's background kernel builds; load $(cut -d' ' -f1-3 /proc/loadavg)"
elif [ "$round" = standin ]; then
  export SPECDASH_ARGCHECK_STANDIN="$STANDIN"
  log "standin round: SPECDASH_ARGCHECK_STANDIN=$STANDIN"
else
  log "cold round: background kernel builds still running; load $(cut -d' ' -f1-3 /proc/loadavg)"
fi
case "$round" in standin) ;; *) imports "$round" ;; esac
# CASES: a subset of the four (default all), for a call short of device time
for c in ${CASES:-lora pp dflash ok}; do
  t0=$(date +%s.%N)
  python3 -m specdash doctor --profile "$W/profiles/$c.toml" --json > "$W/$c.$round.json" 2> "$W/$c.$round.err"
  rc=$?
  t1=$(date +%s.%N)
  log "$c: exit $rc in $(python3 -c "print(round($t1 - $t0, 1))") s, GPU memory used $(mem) MiB (before: $before)"
  echo "{\"case\": \"$c\", \"round\": \"$round\", \"exit\": $rc, \"wall_s\": $(python3 -c "print(round($t1 - $t0, 2))"), \"gpu_mem_before_mib\": \"$before\", \"gpu_mem_after_mib\": \"$(mem)\"}" > "$W/$c.$round.run.json"
done
done
unset SPECDASH_ARGCHECK_STANDIN
# The verdict: the quiet round (a user's doctor run on an idle host); the other rounds are reported beside it.
python3 - "$W" $ROUNDS <<'PY' | tee -a "$W/steps.log"
import json, pathlib, sys
w = pathlib.Path(sys.argv[1])
out, ok_all = [], True
for rnd in sys.argv[2:]:
  for c, want in (("lora", "Currently LoRA is only compatible with NGRAM"), ("pp", "Pipeline parallelism is not compatible"),
                ("dflash", "--speculative-dflash-block-size are set but they differ"), ("ok", None)):
      if not (w / f"{c}.{rnd}.run.json").exists():  # not among CASES
          continue
      run = json.loads((w / f"{c}.{rnd}.run.json").read_text())
      try:
          rep = json.loads((w / f"{c}.{rnd}.json").read_text())
      except ValueError:
          rep = {"findings": []}
      arg = [f for f in rep["findings"] if f["code"] == "ARGCHECK"]
      errs = [f for f in arg if f["severity"] == "error"]
      if want:
          good = any(want in f["message"] for f in errs) and run["wall_s"] < 15
      else:
          good = not errs and any(f["severity"] == "info" and "accept" in f["message"] for f in arg)
      ok_all &= good or rnd != "quiet"
      out.append({"round": rnd, "case": c, "pass": good, "wall_s": run["wall_s"], "exit": run["exit"],
                  "argcheck": [{k: f[k] for k in ("severity", "message")} | {"seconds": f["evidence"].get("seconds"),
                               "where": f["evidence"].get("where"),
                               "import_seconds": f["evidence"].get("import_seconds"),
                               "stage_seconds": f["evidence"].get("stage_seconds"),
                               "standins": f["evidence"].get("standins"),
                               "stubbed": f["evidence"].get("stubbed")} for f in arg],
                  "gpu_mem_mib": [run["gpu_mem_before_mib"], run["gpu_mem_after_mib"]]})
      print(f"{rnd} {c}: {'PASS' if good else 'FAIL'} {run['wall_s']} s " + (errs[0]["message"][:160] if errs else
            (arg[0]["message"][:160] if arg else "no ARGCHECK finding")))
(w / "summary.json").write_text(json.dumps({"pass": ok_all, "cases": out}, indent=2))
sys.exit(0 if ok_all else 1)
PY
