#!/usr/bin/env bash
# specdash against a REAL SGLang 0.5.14 server on the lent H200 (issue #6).
#
# One device call per phase (each well under 10 minutes; a call soon after the last finds SGLang,
# the tiny models and the JIT caches in place):
#   run(command="source .whl/carry/device_up.sh && bash benchmarks/h200/run.sh 1", carry=[".whl/carry"])
#   run(command="source .whl/carry/device_up.sh && bash benchmarks/h200/run.sh 2", carry=[".whl/carry"])
# .whl/carry is built here by ../shared/sglang/gpu/build_carry.sh with EXTRA_PKGS for specdash's
# dependencies the device image lacks (textual, textual-plotext, plotext, tomlkit, …).
# specdash runs from the carried checkout (no install): python3 -m specdash with PYTHONPATH.
# Everything is written under $OUT (files come back: at most 8, so results are packed in one tarball).
set -uo pipefail
PHASE=${1:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/specdash-h200-out}
WORK=${WORK:-/tmp/specdash-h200-work}
W=$WORK/h200-phase$PHASE
mkdir -p "$W"
SD="python3 -m specdash"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$W/steps.log"; }
export SPECDASH_READY_TIMEOUT=300

log "phase $PHASE on $(hostname); $(python3 -c 'import sglang,torch;print("sglang",sglang.__version__,"torch",torch.__version__)' 2>&1 | tail -1)"
nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv > "$W/nvidia-smi-start.csv" 2>&1

if [ "$PHASE" = 1 ]; then
  for p in profiles/h200-tiny-*.toml; do
    n=$(basename "$p" .toml)
    $SD doctor --profile "$p" --json > "$W/doctor-$n.json" 2> "$W/doctor-$n.err"; echo "$n exit $?" >> "$W/doctor-exit.txt"
  done
  $SD doctor --profile h200-tiny-eagle-wrongalgo > "$W/doctor-wrongalgo.txt" 2>&1
  $SD profile show h200-tiny-steps1-draft16 > "$W/show-steps1-draft16.txt" 2>&1
  log "doctor done: $(tr '\n' ' ' < "$W/doctor-exit.txt")"
  # EAGLE3 vs the no-speculation baseline: two launches, paired A/B with a bootstrap CI.
  $SD --bench --profile h200-tiny-eagle3 --baseline h200-tiny-baseline --suite h200-tiny \
      --out "$W/runs" --json > "$W/ab-eagle3-vs-baseline.json" 2> "$W/ab.err"
  log "A/B exit $?"
  for d in "$W"/runs/*-h200-tiny-*; do [ -f "$d/summary.json" ] && python3 benchmarks/h200/agreement.py "$d"; done \
      > "$W/agreement.json" 2>&1
  log "agreement written"
fi

if [ "$PHASE" = 2 ]; then
  # The seeds' fault, forced past the doctor: post-launch verification must call it a wiring fault.
  $SD --bench --profile h200-tiny-eagle-wrongalgo --suite h200-tiny --repeats 1 --force \
      --out "$W/runs" --json > "$W/bench-wrongalgo.json" 2> "$W/bench-wrongalgo.err"
  log "wrong-algo bench exit $? (1 expected: verification failed)"
  # The silent adjustment: asked 16, effective 2, read back from the real server.
  $SD --bench --profile h200-tiny-steps1-draft16 --suite h200-tiny --repeats 1 \
      --out "$W/runs" --json > "$W/bench-steps1-draft16.json" 2> "$W/bench-steps1-draft16.err"
  log "steps1-draft16 bench exit $?"
  # The dashboard, headless, against a live EAGLE3 server it launches; NVML vs nvidia-smi meanwhile.
  python3 benchmarks/h200/tui_live.py --profile h200-tiny-eagle3 --out "$W" > "$W/tui.log" 2>&1
  log "TUI screenshots exit $?"
fi

if [ "$PHASE" = 3 ]; then
  # nvidia-h200-x2: tensor parallel 2 with the seeds' NCCL variables (NVLink multicast stays off).
  python3 -c "import torch;print('GPUs', torch.cuda.device_count())" >> "$W/steps.log" 2>&1
  # NVML vs nvidia-smi on both devices while torch holds 20 GiB on each
  python3 -c "
import subprocess, sys, torch
x = [torch.empty(20 * 2**30, dtype=torch.uint8, device=f'cuda:{i}') for i in range(torch.cuda.device_count())]
torch.cuda.synchronize()
print(subprocess.run([sys.executable, 'benchmarks/h200/nvml_compare.py'], capture_output=True, text=True).stdout)
" > "$W/nvml-compare-x2.json" 2>&1
  log "NVML compare on x2 written"
  $SD --bench --profile h200x2-tiny-eagle3-tp2 --baseline h200x2-tiny-baseline-tp2 --suite h200-tiny --repeats 1 \
      --out "$W/runs" --json > "$W/ab-tp2.json" 2> "$W/ab-tp2.err"
  log "TP 2 A/B exit $?"
  for d in "$W"/runs/*-h200x2-tiny-*; do [ -f "$d/summary.json" ] && python3 benchmarks/h200/agreement.py "$d"; done \
      > "$W/agreement-tp2.json" 2>&1
fi

nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv > "$W/nvidia-smi-end.csv" 2>&1
# server logs are big: keep their heads and tails only in the tarball
find "$W/runs" -name server.log -size +200k -exec sh -c 'head -c 60000 "$1" > "$1.head"; tail -c 60000 "$1" > "$1.tail"; rm "$1"' _ {} \; 2>/dev/null
tar -C "$WORK" -czf "$OUT/h200-phase$PHASE.tar.gz" "h200-phase$PHASE"
log "packed $(du -h "$OUT/h200-phase$PHASE.tar.gz" | cut -f1)"
cp "$W/steps.log" "$OUT/steps-phase$PHASE.log"
