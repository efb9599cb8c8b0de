#!/usr/bin/env bash
# Slim the working tree that a device call sends (here, from the checkout root; no GPU):
#   bash benchmarks/real/slim.sh on    before the device calls: the committed results, screenshots and UI snapshots
#                                      leave git's index (`git rm --cached`: the files stay on disk) and are ignored
#                                      through .git/info/exclude, so they do not travel (the device tool sends tracked
#                                      and untracked-not-ignored files, 64 MiB a call with the carry); then rerun
#                                      prepare.sh's packed layout, which sizes its chunks by what is left
#   bash benchmarks/real/slim.sh off   right after the last call (and before any commit): index and exclude restored
#   bash benchmarks/real/slim.sh       says which state the checkout is in
# On 2026-12-07 the tree went from 27.8 MB (on disk, 4 KiB blocks) to 5.0 MB, and the GGUF, the draft, SGLang's site
# and flashinfer's data from five calls to three. While on, `git status` shows those paths as deleted: never commit
# then (`off` first).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PATHS=(benchmarks/results screenshots tests/__snapshots__)
EX=$(git rev-parse --git-path info/exclude)
MARK="# specdash slim.sh (remove with: bash benchmarks/real/slim.sh off)"
case "${1:-status}" in
  on)
    if grep -qxF "$MARK" "$EX" 2> /dev/null; then echo "slim: already on"; exit 0; fi
    if ! git diff --cached --quiet; then echo "slim: the index has staged changes; commit or unstage them first" >&2; exit 1; fi
    git rm -r -q --cached "${PATHS[@]}"
    mkdir -p "$(dirname "$EX")"; { echo "$MARK"; for p in "${PATHS[@]}"; do echo "/$p/"; done; } >> "$EX"
    echo "slim: on; the tree that travels is $(git ls-files -z | xargs -0 du -c --block-size=1 | tail -1 | cut -f1) bytes on disk"
    ;;
  off)
    git reset -q HEAD -- "${PATHS[@]}"
    if [ -f "$EX" ]; then
      awk -v m="$MARK" '$0 == m {skip = 1; next} skip && /^\// {next} {skip = 0; print}' "$EX" > "$EX.tmp" && mv "$EX.tmp" "$EX"
    fi
    echo "slim: off; $(git status --short -- "${PATHS[@]}" | wc -l) path(s) of the slimmed folders differ from HEAD"
    ;;
  status)
    if grep -qxF "$MARK" "$EX" 2> /dev/null; then echo "slim: on (run 'bash benchmarks/real/slim.sh off' before committing)"; else echo "slim: off"; fi
    ;;
  *) echo "usage: bash benchmarks/real/slim.sh [on|off|status]" >&2; exit 2 ;;
esac
