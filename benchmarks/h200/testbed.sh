#!/usr/bin/env bash
# The 8B-shaped tuning testbed on the lent H200: real SGLang 0.5.14, Llama-3.1-8B shapes with dummy weights
# (benchmarks/h200/testbed.py writes the config-only dirs), acceptance set by SGLang's SGLANG_SIMULATE_ACC_LEN
# (python/sglang/srt/speculative/spec_utils.py). Profiles profiles/h200-8b-*.toml, suite profiles/suites/h200-8b.toml.
#
# One device call per phase (PHASE below), from the checkout root, with the carry of benchmarks/h200/run.sh:
#   run(command="source .whl/carry/device_up.sh && bash benchmarks/h200/testbed.sh grid-c1-L3", carry=[".whl/carry"])
# device_up.sh builds /root/models/target (the tokenizer this testbed copies; ~0.5 min on a fresh machine, seconds
# on a warm one, inside the call's 10 minutes); this script writes the 8B pair next to it.
# An economical session (~30 min of device time): grid-c1-L3, baseline, grid-c8-L3 (~7 + 6 + 7 min plus the
# machine's start); the tune phases in a later session, tune-live-* once `specdash tune --live` is merged.
#
# Phases (each one call, <= 9 min; per launch: server start to /health 71-84 s on the recorded testbed, plus a
# warm-up, the suite — c1: 8 x 512 tokens, 8-20 s; c8: 24 x 512 tokens, 5-10 s — and the stop: ~90-115 s a point):
#   check                       no launch: testbed --check, doctor --json + profile show --json on the 4
#                               profiles, whether `specdash tune --live` exists. ~0.5 min.
#   baseline                    no speculation at c1 and c8, then the bad start (15,1,16) at c1, L 3.
#                               3 launches, ~5-6 min.
#   grid-c<N>-L<x>              EAGLE3 at concurrency N, SGLANG_SIMULATE_ACC_LEN x, one launch per point of
#                               POINTS (default "2,1,3 3,1,4 1,1,2 3,4,5", most informative first: at L 3 a chain
#                               accepts min(L, steps + 1), so (2,1,3) is the predicted optimum, (3,1,4) SGLang's
#                               own choice and the recording's 452.2 tok/s at c1, (1,1,2) the short side, (3,4,5)
#                               the seeds' tree). 4 launches, ~6.5-8 min. e.g. grid-c1-L3, grid-c8-L3, grid-c1-L2.5.
#                               For another L give POINTS around steps = ceil(L) - 1, e.g. L 5: "4,1,5 3,1,4 5,1,6 3,4,5".
#   sweep-L<x>                  `specdash --bench --sweep concurrency=$SWEEP` (default 1,8) for the baseline and each
#                               point of POINTS at acceptance x: both concurrencies in one launch per point (cache
#                               flushed before each, >= 2 x concurrency requests each), one RUN per point in each
#                               summary.json. 1 + len(POINTS) launches, ~75-90 s each.
#   tune-live-<start>-c<N>-L<x> `specdash tune --profile P --live --budget 6 --json` (+ --suite/--out/--save-to
#                               into the work dir), P = h200-8b-<start>-start (start: seeds | bad) or h200-8b-eagle3
#                               (start: eagle3) at L x, suite at concurrency N. --live is new: when this checkout's
#                               `specdash tune --help` lacks it the phase logs that and exits 3 (~0.5 min).
#                               Duration: whatever --live needs, cut at the phase deadline.
#   tune-relaunch-<start>-c<N>-L<x>  `specdash tune --profile P --budget 6 --json` (the relaunch loop): up to
#                               1 baseline + 6 explorations + a 3-launch A/B = 10 launches ~16 min, MORE than one
#                               call: it is cut at the phase deadline (~4-5 launches: the baseline, the start and
#                               the first 2-3 of the advisor's points; each finished launch's run dir is kept and
#                               collected). TUNE_BUDGET=N changes the budget.
#   startup-c<N>-L<x>           launch-to-ready of one point (STARTUP_POINT, default 4,1,5) launched as the profile
#                               says and with the start-up `specdash tune` gives exploration launches at
#                               concurrency N (specdash.bench.explore: --skip-server-warmup, decode CUDA graphs
#                               up to the batch N needs), alternating, STARTUP_REPS (2) times each. ~80 s a launch.
#   tunes-L<x>                  several tunes in one call, in the order of TUNES (default "relaunch-bad-c1
#                               live-bad-c8"; items MODE-START-cN), each `specdash tune ... --max-time T`, T = min(what
#                               is left of the phase - 15 s, TUNE_MAX_S (300)) - 25 s, --baseline-from the run
#                               directory under BASELINE_DIR (a carried copy of a sweep's baseline, e.g. .whl/base)
#                               when given; LIVE_EXTRA adds flags to the live ones (e.g. "--chain-launches 2
#                               --no-schedule"), TUNE_EXTRA to all (e.g. "--no-final-ab").  One report per item:
#                               attached."tune_report-<item>" in <PHASE>.json.
# Dry run on this machine (no GPU, no SGLang): SIM=1 serves every profile copy with specdash's simulator
# (scenario h200-8b-testbed, real time) and skips the model dirs, e.g.
#   SIM=1 OUT=/tmp/o WORK=/tmp/w BASELINE_DIR=<a sim baseline run dir's parent> bash benchmarks/h200/testbed.sh tunes-L4.2
# Results (at most 3 files come back, all directly under $OUT): steps.log (every step, as it happens),
# <PHASE>.json (one row per run: output_tok_s, accept_length, accept_rate, TTFT/TPOT, time to ready, the
# agreement figures of benchmarks/h200/agreement.py; notes on skipped points; the tune report), <PHASE>.tar.gz
# (the work dir: run dirs, profile/suite copies, show/doctor JSON, stderr of every command; big logs trimmed).
# Exit status: 0 done (skipped points and cut runs are in the notes), 1 nothing measured or the set-up failed,
# 2 usage, 3 tune-live-* without --live in this checkout.
# Knobs (environment): POINTS, TUNE_BUDGET (6), TUNE_EXTRA / LIVE_EXTRA (more tune flags: all / --live only),
# TUNES, TUNE_MAX_S (300), BASELINE_DIR, SIM, PHASE_BUDGET_S (510: script seconds before no new launch is
# started and running ones are stopped), NEED_S (120: seconds a new launch needs), POINT_MAX_S (300),
# MODELS (/root/models), SPECDASH_READY_TIMEOUT (300), OUT, WORK.
set -uo pipefail
PHASE=${1:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/specdash-h200-out}
WORK=${WORK:-/tmp/specdash-h200-work}
MODELS=${MODELS:-/root/models}
POINTS=${POINTS:-"2,1,3 3,1,4 1,1,2 3,4,5"}
SWEEP=${SWEEP:-1,8}
BENCH_EXTRA=()
TUNE_BUDGET=${TUNE_BUDGET:-6}
TUNE_MAX_S=${TUNE_MAX_S:-300}
TUNES=${TUNES:-"relaunch-bad-c1 live-bad-c8"}
PHASE_BUDGET_S=${PHASE_BUDGET_S:-510}
NEED_S=${NEED_S:-120}
POINT_MAX_S=${POINT_MAX_S:-300}
export SPECDASH_READY_TIMEOUT=${SPECDASH_READY_TIMEOUT:-300}
SD="python3 -m specdash"
GRID="python3 $ROOT/benchmarks/h200/testbed_grid.py"
T0=$(date +%s)
mkdir -p "$OUT"
LOG="$OUT/steps.log"
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
left() { echo $(( PHASE_BUDGET_S - ($(date +%s) - T0) )); }

# --- the phase name -------------------------------------------------------------------------------------
KIND="" C="" L="" MODE="" START=""
if [[ $PHASE =~ ^grid-c([0-9]+)-L([0-9]+(\.[0-9]+)?)$ ]]; then
  KIND=grid C=${BASH_REMATCH[1]} L=${BASH_REMATCH[2]}
elif [[ $PHASE =~ ^sweep-L([0-9]+(\.[0-9]+)?)$ ]]; then
  KIND=sweep C=1 L=${BASH_REMATCH[1]}
elif [[ $PHASE =~ ^tune-(live|relaunch)-(seeds|bad|eagle3)-c([0-9]+)-L([0-9]+(\.[0-9]+)?)$ ]]; then
  KIND=tune MODE=${BASH_REMATCH[1]} START=${BASH_REMATCH[2]} C=${BASH_REMATCH[3]} L=${BASH_REMATCH[4]}
elif [[ $PHASE =~ ^tunes-L([0-9]+(\.[0-9]+)?)$ ]]; then
  KIND=tunes L=${BASH_REMATCH[1]}
elif [[ $PHASE =~ ^startup-c([0-9]+)-L([0-9]+(\.[0-9]+)?)$ ]]; then
  KIND=startup C=${BASH_REMATCH[1]} L=${BASH_REMATCH[2]}
elif [[ $PHASE = baseline || $PHASE = check ]]; then
  KIND=$PHASE
else
  echo "usage: testbed.sh check | baseline | grid-c<N>-L<x> | sweep-L<x> | tune-{live,relaunch}-{seeds,bad,eagle3}-c<N>-L<x> | tunes-L<x> | startup-c<N>-L<x>" >&2
  echo "testbed.sh: unknown phase '$PHASE'" | tee -a "$LOG" >&2
  exit 2
fi
if [[ -n $C ]] && (( C < 1 )); then echo "testbed.sh: concurrency must be >= 1" | tee -a "$LOG" >&2; exit 2; fi

W="$WORK/testbed-$PHASE-$(date +%H%M%S)"   # fresh per call: a warm machine keeps the last call's WORK
mkdir -p "$W/profiles" "$W/runs"
NOTES="$W/notes.txt"; : > "$NOTES"
note() { echo "$*" >> "$NOTES"; log "$*"; }

log "phase $PHASE on $(hostname): work dir $W, deadline ${PHASE_BUDGET_S}s; $(python3 -c 'import sglang,torch;print("sglang",sglang.__version__,"torch",torch.__version__)' 2>&1 | tail -1)"
nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv > "$W/nvidia-smi-start.csv" 2>&1

# --- pack: called on every exit path ------------------------------------------------------------------
collect() {
  local attach=() f n
  for f in "$W"/tune*.json; do [[ -s $f ]] && n=$(basename "$f" .json) && attach+=(--attach "${n/tune/tune_report}=$f"); done
  for f in "$W"/tune*.err; do [[ -s $f ]] && n=$(basename "$f" .err) && attach+=(--attach "${n/tune/tune_stderr}=$f"); done
  $GRID collect --phase "$PHASE" --out "$OUT/$PHASE.json" --notes-file "$NOTES" ${attach[@]+"${attach[@]}"} \
      "$W"/runs/*/ > "$W/collect.txt" 2> "$W/collect.err" || log "collect failed: $(tail -1 "$W/collect.err")"
}
pack() {
  collect
  log "results: $(tr '\n' ';' < "$W/collect.txt")"
  nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv > "$W/nvidia-smi-end.csv" 2>&1
  find "$W" -name server.log -size +200k -exec sh -c \
      'head -c 60000 "$1" > "$1.head"; tail -c 60000 "$1" > "$1.tail"; rm "$1"' _ {} \; 2>/dev/null
  tar -C "$(dirname "$W")" -czf "$OUT/$PHASE.tar.gz" "$(basename "$W")"
  log "packed $OUT/$PHASE.tar.gz ($(du -h "$OUT/$PHASE.tar.gz" | cut -f1)); phase $PHASE done in $(( $(date +%s) - T0 ))s"
}

# --- set-up: the model pair, the profile and suite copies ----------------------------------------------
if [[ ${SIM:-0} = 1 ]]; then echo "SIM=1: a dry run on specdash's simulator, no model dirs" > "$W/testbed.txt"; rc=0
else python3 benchmarks/h200/testbed.py --root "$MODELS" > "$W/testbed.txt" 2>&1; rc=$?; fi
log "testbed.py --root $MODELS exit $rc: $(tail -1 "$W/testbed.txt")"
if (( rc != 0 )); then note "model dirs not ready (see testbed.txt in the tarball): phase stopped"; cat "$W/testbed.txt" >> "$LOG"; pack; exit 1; fi

# copy of profile $1 (a name under profiles/) at acceptance $2 and point $3 ("" = the profile's own), with the
# exploration start-up of `specdash tune` at concurrency $4 when given: prints its path
mkprof() {
  local src="profiles/$1.toml" out args=(--root "$MODELS")
  out="$W/profiles/$1${2:+-L$2}${3:+-$(tr ',' '_' <<< "$3")}${4:+-fast$4}.toml"
  [[ -n $2 ]] && args+=(--acc-len "$2")
  [[ -n $3 ]] && args+=(--point "$3")
  [[ -n ${4:-} ]] && args+=(--fast-start "$4")
  [[ ${SIM:-0} = 1 ]] && args+=(--sim)
  if $GRID profile "$src" --out "$out" "${args[@]}" > /dev/null 2>> "$W/mkprof.err"; then echo "$out"; else
    log "profile copy of $1 (L ${2:-profile's}, point ${3:-profile's}) failed: $(tail -1 "$W/mkprof.err")" >&2; return 1; fi
}
# copy of the suite at concurrency $1 (about 3 x N requests: 4 prompts x max(2, ceil(3N/4)) repeats)
mksuite() {
  local c=$1 reps=$(( (3 * $1 + 3) / 4 )); (( reps < 2 )) && reps=2
  $GRID suite profiles/suites/h200-8b.toml --out "$W/suite-c$c.toml" --concurrency "$c" --repeats "$reps" \
      > /dev/null 2>> "$W/mksuite.err" && echo "$W/suite-c$c.toml"
}

wait_gpu_idle() {  # a stopped server frees its ~85 GiB within seconds; say so when it does not
  local used=0 i
  for i in $(seq 1 30); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' ')
    [[ ${used:-0} =~ ^[0-9]+$ ]] && (( used < 2000 )) && return 0
    sleep 2
  done
  log "WARNING: GPU still holds ${used} MiB after 60 s: $(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1 | tr '\n' ';')"
}

# one launch: label $1, profile file $2, suite file $3
bench() {
  local label=$1 pf=$2 suite=$3 t rc
  t=$(left)
  if (( t < NEED_S )); then note "SKIPPED $label: ${t}s left before the ${PHASE_BUDGET_S}s deadline, a launch needs ~${NEED_S}s"; return; fi
  $SD profile show "$pf" --json > "$W/show-$label.json" 2> "$W/show-$label.err"
  $GRID rewritten "$W/show-$label.json" > "$W/rewritten-$label.txt" 2>&1
  rc=$?
  if (( rc == 3 )); then note "SKIPPED $label: $(cat "$W/rewritten-$label.txt")"; return; fi
  if (( rc != 0 )); then note "SKIPPED $label: profile show failed: $(tail -1 "$W/show-$label.err")"; return; fi
  wait_gpu_idle
  t=$(left); (( t -= 10 )); (( t > POINT_MAX_S )) && t=$POINT_MAX_S
  log "bench $label: $(basename "$pf"), $(basename "$suite"), timeout ${t}s"
  timeout -k 20 "$t" $SD --bench --profile "$pf" --suite "$suite" --out "$W/runs" --json ${BENCH_EXTRA[@]+"${BENCH_EXTRA[@]}"} \
      > "$W/bench-$label.json" 2> "$W/bench-$label.err"
  rc=$?
  log "bench $label exit $rc$( ((rc == 124 || rc == 137)) && echo ' (TIMED OUT: stopped at the deadline)'): $($GRID brief "$W/bench-$label.json" "$W/bench-$label.err" 2>&1)"
  (( rc != 0 )) && tail -5 "$W/bench-$label.err" | sed 's/^/    /' >> "$LOG"
  collect
}

# --- phases --------------------------------------------------------------------------------------------
doctor_all() {
  local p n
  for p in baseline eagle3 seeds-start bad-start; do
    n=h200-8b-$p
    pf=$(mkprof "$n" "" "") || continue
    $SD doctor --profile "$pf" --json --concurrency 8 > "$W/doctor-$n.json" 2> "$W/doctor-$n.err"
    log "doctor $n exit $? ($(python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print(", ".join(f["severity"]+" "+f["code"] for f in d["findings"]))' "$W/doctor-$n.json" 2>&1))"
    $SD profile show "$pf" --json > "$W/show-$n.json" 2>&1
  done
}

# one `specdash tune`: mode $1 (live | relaunch), start $2 (seeds | bad | eagle3), concurrency $3, file tag $4
# ("" = tune.json / tune.err, else tune$4.json ...).  --max-time: what is left of the phase, at most TUNE_MAX_S;
# --baseline-from: the run directory under BASELINE_DIR measured at L's server without speculation, when given.
run_tune() {
  local mode=$1 start=$2 c=$3 tag=$4 base s P t rc launches bdir args extra
  case $start in seeds) base=h200-8b-seeds-start ;; bad) base=h200-8b-bad-start ;; *) base=h200-8b-eagle3 ;; esac
  s=$(mksuite "$c") || { note "suite copy failed: $(tail -1 "$W/mksuite.err")"; return 1; }
  P=$(mkprof "$base" "$L" "") || { note "profile copy of $base failed"; return 1; }
  $SD tune --help > "$W/tune-help.txt" 2>&1
  args=(--profile "$P" --budget "$TUNE_BUDGET" --json)
  if [[ $mode = live ]]; then
    if ! grep -q -- '--live' "$W/tune-help.txt"; then
      note "NOT RUN: this checkout's 'specdash tune' has no --live flag (tune-help.txt in the tarball lists its flags); merge the --live work and run this phase again"
      return 3
    fi
    args=(--profile "$P" --live --budget "$TUNE_BUDGET" --json)
    # shellcheck disable=SC2206  # LIVE_EXTRA is split on purpose (e.g. "--chain-launches 2 --no-schedule")
    [[ -n ${LIVE_EXTRA:-} ]] && args+=($LIVE_EXTRA)
  fi
  # shellcheck disable=SC2206  # TUNE_EXTRA is split on purpose (e.g. "--no-final-ab")
  [[ -n ${TUNE_EXTRA:-} ]] && args+=($TUNE_EXTRA)
  if [[ -n ${BASELINE_DIR:-} ]]; then
    bdir=$(dirname "$(find "$ROOT/$BASELINE_DIR" -name summary.json -path '*baseline*' | head -1)" 2>/dev/null)
    if [[ -n $bdir && -d $bdir ]]; then args+=(--baseline-from "$bdir"); else
      note "BASELINE_DIR $BASELINE_DIR holds no baseline run directory: the tune launches its own baseline"; fi
  fi
  mkdir -p "$W/presets" "$W/config"
  wait_gpu_idle
  t=$(left); (( t -= 15 ))
  if (( t < NEED_S )); then note "NOT RUN: tune$tag needs at least ${NEED_S}s, ${t}s left"; return 1; fi
  (( t > TUNE_MAX_S )) && t=$TUNE_MAX_S
  args+=(--max-time "$(( t - 25 ))")
  extra=(--suite "$s" --out "$W/runs" --save-to "$W/presets")
  log "tune$tag ($mode) from $(basename "$P") at c$c: specdash tune ${args[*]} ${extra[*]}, timeout ${t}s"
  # cwd = $W and XDG_CONFIG_HOME under it: defaults (runs/, the user preset dir) land in the tarball too
  ( cd "$W" && XDG_CONFIG_HOME="$W/config" timeout -k 30 "$t" $SD tune "${args[@]}" "${extra[@]}" ) \
      > "$W/tune$tag.json" 2> "$W/tune$tag.err"
  rc=$?
  launches=$(find "$W" -name summary.json -path '*/runs/*' | wc -l)
  if (( rc == 124 || rc == 137 )); then
    note "tune$tag ($mode) CUT at the phase deadline ($launches launch(es) in the work dir so far): no tune report; the finished launches are the rows"
  else
    log "tune$tag ($mode) exit $rc ($launches launch(es) in the work dir so far): $(python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print("best",d.get("best"),"start",d.get("start"),"launches",d.get("launches"),"stop:",d.get("stop_reason"))' "$W/tune$tag.json" 2>&1 | tail -1)"
  fi
  (( rc != 0 )) && tail -5 "$W/tune$tag.err" | sed 's/^/    /' >> "$LOG"
  collect
  return 0
}

case $KIND in
  check)
    python3 benchmarks/h200/testbed.py --check --root "$MODELS" > "$W/testbed-check.txt" 2>&1
    log "testbed.py --check exit $?: $(tail -1 "$W/testbed-check.txt")"
    doctor_all
    if $SD tune --help 2>&1 | grep -q -- '--live'; then log "specdash tune --live: present"; else
      note "specdash tune --live: ABSENT in this checkout (tune-live-* phases will exit 3)"; fi
    ;;
  baseline)
    doctor_all
    s1=$(mksuite 1) && s8=$(mksuite 8) || { note "suite copies failed: $(tail -1 "$W/mksuite.err")"; pack; exit 1; }
    pf=$(mkprof h200-8b-baseline "" "") && bench baseline-c1 "$pf" "$s1"
    [[ -n ${pf:-} ]] && bench baseline-c8 "$pf" "$s8"
    pf=$(mkprof h200-8b-bad-start 3 "") && bench bad-start-15_1_16-c1-L3 "$pf" "$s1"
    ;;
  grid)
    s=$(mksuite "$C") || { note "suite copy failed: $(tail -1 "$W/mksuite.err")"; pack; exit 1; }
    log "grid at c$C, L $L: points $POINTS"
    for pt in $POINTS; do
      pf=$(mkprof h200-8b-eagle3 "$L" "$pt") || { note "SKIPPED point $pt: no profile copy"; continue; }
      bench "eagle3-$(tr ',' '_' <<< "$pt")-c$C-L$L" "$pf" "$s"
    done
    ;;
  sweep)
    s=$(mksuite 1) || { note "suite copy failed: $(tail -1 "$W/mksuite.err")"; pack; exit 1; }
    BENCH_EXTRA=(--sweep "concurrency=$SWEEP" --baseline none)
    log "sweep at concurrency $SWEEP, L $L: baseline, then points $POINTS"
    pf=$(mkprof h200-8b-baseline "" "") && bench "baseline-sweep" "$pf" "$s"
    for pt in $POINTS; do
      pf=$(mkprof h200-8b-eagle3 "$L" "$pt") || { note "SKIPPED point $pt: no profile copy"; continue; }
      bench "eagle3-$(tr ',' '_' <<< "$pt")-sweep-L$L" "$pf" "$s"
    done
    ;;
  tune)
    run_tune "$MODE" "$START" "$C" ""
    (( $? == 3 )) && { pack; exit 3; }
    ;;
  startup)
    # the same point launched as the profile says and with tune's exploration start-up, alternating
    s=$(mksuite "$C") || { note "suite copy failed: $(tail -1 "$W/mksuite.err")"; pack; exit 1; }
    pt=${STARTUP_POINT:-4,1,5}
    full=$(mkprof h200-8b-eagle3 "$L" "$pt") && fast=$(mkprof h200-8b-eagle3 "$L" "$pt" "$C") || {
      note "profile copies failed: $(tail -1 "$W/mkprof.err")"; pack; exit 1; }
    log "startup at c$C, L $L, point $pt: $(grep -o 'exploration start-up.*' "$fast" | head -1)"
    for r in $(seq 1 "${STARTUP_REPS:-2}"); do
      bench "full-$r-c$C-L$L" "$full" "$s"
      bench "fast-$r-c$C-L$L" "$fast" "$s"
    done
    ;;
  tunes)
    log "tunes at L $L: $TUNES"
    for item in $TUNES; do
      if [[ ! $item =~ ^(live|relaunch)-(seeds|bad|eagle3)-c([0-9]+)$ ]]; then
        note "SKIPPED tune '$item': not MODE-START-cN (e.g. relaunch-bad-c1)"; continue; fi
      run_tune "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}" "-${item}"
    done
    ;;
esac
pack
if [[ $KIND != check ]] && ! grep -q "tok/s" "$W/collect.txt"; then log "no launch of this phase produced a result"; exit 1; fi
exit 0
