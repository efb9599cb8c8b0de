#!/usr/bin/env bash
# SGLang's adaptive speculation on the lent H200 with the tiny models (real SGLang 0.5.14): the doctor on
# adaptive profiles, per-tier attribution of an interleaved run (steps 1 <-> 3 in one launch, one Decode line
# per iteration, device-timer GPU seconds per phase) checked against meta_info and /metrics, and SGLang's
# default adaptive config at concurrency 32 (slot "32" runs steps 0 or 1: no VERIFY_COLLAPSE expected).
#
#   run(command="source .whl/carry/device_up.sh && bash benchmarks/h200/adaptive.sh", carry=[".whl/carry"])
#
# Two launches of the tiny models (~1-1.5 min each to /health) plus the doctor: ~4-5 min. Everything is
# logged to $OUT/steps.log as it happens; results come back as $OUT/adaptive.json (a few numbers per run)
# and $OUT/adaptive.tar.gz (run directories, doctor JSON, stderr).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export SPECDASH_READY_TIMEOUT=${SPECDASH_READY_TIMEOUT:-300}
OUT=${OUT:-/tmp/specdash-h200-out}
W=${WORK:-/tmp/specdash-h200-work}/adaptive-$(date +%H%M%S)
mkdir -p "$OUT" "$W"
SD="python3 -m specdash"
T0=$(date +%s)
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }

log "adaptive checks: $(python3 -c 'import sglang;print("sglang",sglang.__version__)' 2>&1 | tail -1); work dir $W"
python3 benchmarks/h200/adaptive_setup.py "$W" > "$W/setup.txt" 2>&1 || { log "setup failed: $(tail -3 "$W/setup.txt")"; exit 1; }
for p in tiny-interleave tiny-adaptive-default; do
  $SD doctor --profile "$W/$p.toml" --json > "$W/doctor-$p.json" 2> "$W/doctor-$p.err"
  log "doctor $p exit $?: $(python3 -c "import json,sys;print(', '.join(f['severity']+' '+f['code'] for f in json.load(open(sys.argv[1]))['findings']))" "$W/doctor-$p.json" 2>&1)"
done

bench() {  # bench NAME PROFILE SUITE
  local name=$1
  timeout 330 $SD --bench --profile "$W/$2.toml" --suite "$W/$3.toml" --out "$W/runs-$name" --json \
      > "$W/bench-$name.json" 2> "$W/bench-$name.err"
  local rc=$?
  log "bench $name exit $rc: $(python3 - "$W/bench-$name.json" <<'EOF' 2>&1
import json, sys
try:
    r = json.load(open(sys.argv[1]))["runs"][0]
except Exception as e:  # noqa: BLE001 - a failed run is reported, not raised
    print("no summary:", e); raise SystemExit
tiers = r.get("tiers") or []
print(f"{r.get('output_tok_s')} tok/s, accept length {r.get('accept_length')}, server {r.get('server_accept_length')}, "
      f"verification {r.get('verification', {}).get('status')} "
      f"{[f['code'] for f in r.get('verification', {}).get('findings', [])]}, "
      f"switches {(r.get('adaptive') or {}).get('switches')}, device_time_s {r.get('device_time_s')}, tiers "
      + "; ".join(f"steps {t['speculative_num_steps']}: share {t['share']}, accept length {t['accept_length']}, "
                  f"accept rate {t['accept_rate']}, {t['output_tok_s']} tok/s" for t in tiers))
EOF
)"
  for d in "$W/runs-$name"/*/; do
    [ -f "$d/summary.json" ] && python3 benchmarks/h200/agreement.py "$d" > "$W/agreement-$name.json" 2>&1 \
      && log "agreement $name: $(tr -d '\n' < "$W/agreement-$name.json" | cut -c1-600)"
    grep -c "Switch adaptive runtime state" "$d/server.log" 2>/dev/null | sed "s/^/switch lines in server.log: /" >> "$OUT/steps.log"
  done
}
bench interleave tiny-interleave suite-c1
bench default-c32 tiny-adaptive-default suite-c32

python3 - "$W" > "$OUT/adaptive.json" <<'EOF'
import json, sys
from pathlib import Path
w = Path(sys.argv[1]); out = {}
for f in sorted(w.glob("bench-*.json")):
    try:
        out[f.stem] = json.loads(f.read_text())
    except ValueError as e:
        out[f.stem] = {"error": str(e)}
for f in sorted(w.glob("doctor-*.json")) + sorted(w.glob("agreement-*.json")):
    try:
        out[f.stem] = json.loads(f.read_text())
    except ValueError:
        out[f.stem] = f.read_text()[:2000]
print(json.dumps(out, indent=1))
EOF
find "$W" -name server.log -size +2M -exec sh -c 'tail -c 2000000 "$1" > "$1.tail" && mv "$1.tail" "$1"' _ {} \;
tar -czf "$OUT/adaptive.tar.gz" -C "$(dirname "$W")" "$(basename "$W")"
log "done in $(( $(date +%s) - T0 ))s; $(du -h "$OUT/adaptive.tar.gz" | cut -f1) packed"
