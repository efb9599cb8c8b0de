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
# then (`off` first). `on` installs a pre-commit hook that refuses commits (where no hook exists) and records HEAD, so
# that `off` restores the index as it was even after a commit (and says so); refused in a linked worktree (they share
# info/exclude and hooks).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PATHS=(benchmarks/results screenshots tests/__snapshots__)
EX=$(git rev-parse --git-path info/exclude)
MARK="# specdash slim.sh (remove with: bash benchmarks/real/slim.sh off)"
MARK_NL="$MARK; it added the newline above"
LINES=$(printf '/%s/\n' "${PATHS[@]}")$'\n'
BASE=$(git rev-parse --git-dir)/slim-base
HOOK=$(git rev-parse --git-path hooks/pre-commit)
is_on() { grep -qxF -e "$MARK" -e "$MARK_NL" "$EX" 2> /dev/null; }
if [ "$(git rev-parse --path-format=absolute --git-dir)" != "$(git rev-parse --path-format=absolute --git-common-dir)" ]; then
  echo "slim: run it in the main checkout, not in a linked worktree (info/exclude and hooks are shared)" >&2; exit 1
fi
case "${1:-status}" in
  on)
    if is_on; then echo "slim: already on"; exit 0; fi
    if ! git diff --cached --quiet; then echo "slim: the index has staged changes; commit or unstage them first" >&2; exit 1; fi
    git rm -r -q --cached "${PATHS[@]}"
    git rev-parse HEAD > "$BASE"
    mkdir -p "$(dirname "$EX")"
    if [ -s "$EX" ] && [ -n "$(tail -c1 "$EX")" ]; then printf '\n%s\n%s' "$MARK_NL" "$LINES"; else printf '%s\n%s' "$MARK" "$LINES"; fi >> "$EX"
    if [ ! -e "$HOOK" ]; then
      mkdir -p "$(dirname "$HOOK")"
      printf '#!/bin/sh\n# specdash slim.sh guard\necho "slim.sh is on: run bash benchmarks/real/slim.sh off before committing" >&2\nexit 1\n' > "$HOOK"; chmod +x "$HOOK"
    fi
    echo "slim: on; the tree that travels is $(git ls-files -z -c -o --exclude-standard | du -c --block-size=1 --files0-from=- 2> /dev/null | tail -1 | cut -f1) bytes on disk"
    ;;
  off)
    if ! is_on; then echo "slim: already off; nothing done"; exit 0; fi
    base=$(cat "$BASE" 2> /dev/null || git rev-parse HEAD)
    git reset -q "$base" -- "${PATHS[@]}"
    c=$(cat "$EX"; printf x); c=${c%x}
    c=${c/$'\n'"$MARK_NL"$'\n'"$LINES"/}; c=${c/"$MARK"$'\n'"$LINES"/}
    printf '%s' "$c" > "$EX"
    if grep -qxF "# specdash slim.sh guard" "$HOOK" 2> /dev/null; then rm -f "$HOOK"; fi
    rm -f "$BASE"
    if [ "$base" != "$(git rev-parse HEAD)" ]; then
      echo "slim: WARNING: HEAD moved while on (commits since ${base:0:12}); the slimmed paths were re-staged as in ${base:0:12}: check 'git status' and commit them back if a commit deleted them" >&2
    fi
    echo "slim: off; $(git status --short -- "${PATHS[@]}" | wc -l) path(s) of the slimmed folders differ from HEAD"
    ;;
  status)
    if is_on; then echo "slim: on (run 'bash benchmarks/real/slim.sh off' before committing)"; else echo "slim: off"; fi
    ;;
  *) echo "usage: bash benchmarks/real/slim.sh [on|off|status]" >&2; exit 2 ;;
esac
