#!/usr/bin/env bash
# A tuned-study rerun that outlives sessions and machines. From the repository root:
#
#   benchmarks/studies/tuned/rerun_in_background.sh WORK "BLOCK BLOCK ..." ["BLOCK ..." ...]
#
# WORK is a folder outside the repository (e.g. /tmp/tuned-rerun). Each quoted list of blocks (ENV/REGIME, in the order
# to run them; a held-out block in the list of the block whose searches it tests, after it, unless those searches are
# committed already: checked) is one runner:
# runners run side by side, cell by cell, from a clean worktree of HEAD (WORK/worktree, made once and moved to HEAD
# on a later start; .venv linked from this checkout), writing into WORK, with no report after each block
# (--cells-only: a report lowers every cell's programs, minutes of a runner's time; --report makes it at the end). The cells already committed in the staging
# folder (benchmarks/results/lag_robustness/PRESET-rerun) are copied into WORK first, so nothing finished runs again.
# Every 20 minutes, while this checkout is on the branch it started on with no uncommitted changes, a committer adopts
# the cells that finished into the staging folder (--adopt WORK --cells-only: clean, current cells only) and commits
# that folder's cells alone; it ends after the runners, with a last commit. All run at the lowest priority, in
# sessions of their own (setsid); logs: WORK/runner-N.log, WORK/commit.log.
#
# WORK/pgids names each process group: pause the runners (e.g. for the test suite) with kill -STOP -- -PGID, resume
# with -CONT, stop with kill -- -PGID (pause the committer too and a git command of yours may wait on its lock).
# `rerun_in_background.sh --commit-now WORK` runs one committer round at once (e.g. before a session ends).
# PRESET (default tuned) and INTERVAL_S (default 1200) can be set in the environment, and RERUN_UNTIL
# (YYYY-MM-DDTHH:MM, local): no runner starts a cell estimated to end after it (a cell is trained whole: one cut off
# when a session ends is lost), e.g. RERUN_UNTIL=$(date -d '+170 min' +%FT%H:%M) for a session that ends in three hours.
set -euo pipefail

lowest_priority() {  # nice alone does not reach across setsid's scheduler groups (autogroups): lower the group's too
  renice -n 19 -p $$ >/dev/null 2>&1 || true
  # only a session of its own (setsid): a round run by hand from a shell would lower that shell's whole session
  if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ]; then
    echo 19 >/proc/$$/autogroup 2>/dev/null || true
  fi
}

run_blocks() {  # --runner WORK PRESET BLOCK...: the blocks one after the other, in the worktree
  local work=$1 preset=$2 block
  shift 2
  lowest_priority
  cd "$work/worktree"
  for block in "$@"; do
    .venv/bin/python -m benchmarks.studies.tuned --preset "$preset" --out-dir "$work" --block "$block" --cells-only \
      ${RERUN_UNTIL:+--until "$RERUN_UNTIL"} \
      || echo "[$(date +%H:%M)] block $block ended with an error; going on with the next"
  done
  echo "[$(date +%H:%M)] runner done"
}

adopt_and_commit() {  # WORK PRESET STAGING BRANCH: one round of the committer
  local work=$1 preset=$2 staging=$3 branch=$4 added
  if [ "$(git symbolic-ref -q --short HEAD || echo '(detached)')" != "$branch" ]; then
    echo "[$(date +%H:%M)] the checkout is not on $branch: not committing cells now"
    return
  fi
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "[$(date +%H:%M)] the checkout has uncommitted changes: not committing cells now"
    return
  fi
  .venv/bin/python -m benchmarks.studies.tuned --preset "$preset" --adopt "$work" --out-dir "$staging" --cells-only \
    | grep -v "^[^ ]*: refused: stale" || true  # the stale cells a WORK may hold from older code are not news
  added=$(git status --porcelain --untracked-files=all -- "$staging/cells" | grep '\.json$' | sed 's|.*/||; s|\.json$||' \
    | tr '\n' ' ' || true)
  [ -n "$added" ] || return 0
  # each cell records the clean commit and the machine that made it
  if git add -- "$staging"/cells/*.json && git commit -q -m "Tuned study rerun ($preset): $(echo "$added" | wc -w) \
cells finished: $added" -- "$staging/cells"; then
    echo "[$(date +%H:%M)] committed: $added"
  else
    git reset -q -- "$staging/cells"  # leave nothing staged behind a failed commit
    echo "[$(date +%H:%M)] the commit failed (above); the cells stay in $staging, uncommitted"
  fi
}

commit_loop() {  # --committer WORK PRESET STAGING BRANCH INTERVAL_S RUNNER_PID...: until the runners end
  local work=$1 preset=$2 staging=$3 branch=$4 interval=$5 pid alive
  shift 5
  lowest_priority
  while true; do
    sleep "$interval" &
    wait $! || true
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    adopt_and_commit "$work" "$preset" "$staging" "$branch"
    [ "$alive" = 1 ] || { echo "[$(date +%H:%M)] the runners have ended: committer done"; return; }
  done
}

case "${1:-}" in
  --runner) shift; run_blocks "$@"; exit ;;
  --committer) shift; commit_loop "$@"; exit ;;
  --commit-now)  # one round, from the checkout's root, at the caller's priority, onto the branch checked out
    [ $# -eq 2 ] || { echo "usage: $0 --commit-now WORK" >&2; exit 2; }
    work=$(realpath -m "$2")
    cd "$(git rev-parse --show-toplevel)"
    branch=$(git symbolic-ref -q --short HEAD) || { echo "the checkout is on no branch: not committing" >&2; exit 2; }
    adopt_and_commit "$work" "${PRESET:-tuned}" "benchmarks/results/lag_robustness/${PRESET:-tuned}-rerun" "$branch"
    exit ;;
esac
if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi
ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
SCRIPT=$ROOT/benchmarks/studies/tuned/rerun_in_background.sh
WORK=$(realpath -m "$1")
shift
PRESET=${PRESET:-tuned}
INTERVAL_S=${INTERVAL_S:-1200}
STAGING=benchmarks/results/lag_robustness/$PRESET-rerun
case "$WORK/" in "$ROOT"/*)
  echo "WORK ($WORK) must be outside the repository: the runners write there from their own worktree" >&2
  exit 2
esac
[ -x .venv/bin/python ] || { echo "no .venv here: python3 -m venv .venv && .venv/bin/pip install -e '.[dev,brax]'" >&2; exit 2; }
if [ -f "$WORK/pgids" ]; then
  while read -r name pgid; do
    if kill -0 -- "-$pgid" 2>/dev/null; then
      echo "$name (process group $pgid, $WORK/pgids) still runs: stop it first (kill -- -$pgid)" >&2
      exit 2
    fi
  done <"$WORK/pgids"
fi
# unknown blocks, a block in two lists, a held-out block away from (or before) the block it takes its searches from
# when they are not all committed yet
RERUN_UNTIL=${RERUN_UNTIL:-} .venv/bin/python - "$PRESET" "$STAGING" "$@" <<'EOF' || exit 2
import os
import sys
from pathlib import Path
from benchmarks.studies.tuned.study import parse_until, runner_problems
problems = runner_problems(sys.argv[1], [blocks.split() for blocks in sys.argv[3:]], Path(sys.argv[2]))
if os.environ["RERUN_UNTIL"]:
    try:
        print(f"RERUN_UNTIL: no runner starts a cell estimated to end after {parse_until(os.environ['RERUN_UNTIL'])}")
    except ValueError as error:
        problems.append(f"RERUN_UNTIL={os.environ['RERUN_UNTIL']}: {error}")
for problem in problems:
    print(problem, file=sys.stderr)
sys.exit(2 if problems else 0)
EOF
BRANCH=$(git symbolic-ref -q --short HEAD) || { echo "the checkout is on no branch: the committer would not know where to commit" >&2; exit 2; }

mkdir -p "$WORK/cells"
if [ ! -d "$WORK/worktree" ]; then
  git worktree add --detach "$WORK/worktree" HEAD >/dev/null
  ln -s "$ROOT/.venv" "$WORK/worktree/.venv"
elif [ "$(git -C "$WORK/worktree" rev-parse HEAD)" != "$(git rev-parse HEAD)" ]; then
  echo "the worktree was at $(git -C "$WORK/worktree" rev-parse --short HEAD): moving it to HEAD"
  git -C "$WORK/worktree" checkout -q --detach "$(git rev-parse HEAD)"
fi
echo "runners: clean worktree of $(git -C "$WORK/worktree" rev-parse --short HEAD) in $WORK/worktree"
copied=0
for cell in "$STAGING"/cells/*.json; do
  [ -e "$cell" ] || continue
  [ -e "$WORK/cells/$(basename "$cell")" ] || { cp "$cell" "$WORK/cells/"; copied=$((copied + 1)); }
done
echo "copied $copied committed cells of $STAGING into $WORK/cells"

: >"$WORK/pgids"
runners=()
n=0
for blocks in "$@"; do
  n=$((n + 1))
  # shellcheck disable=SC2086  # a list of blocks, split on purpose
  setsid nohup "$SCRIPT" --runner "$WORK" "$PRESET" $blocks >>"$WORK/runner-$n.log" 2>&1 </dev/null &
  runners+=($!)
  echo "runner-$n $!" >>"$WORK/pgids"
  echo "runner $n: $blocks (log $WORK/runner-$n.log)"
done
setsid nohup "$SCRIPT" --committer "$WORK" "$PRESET" "$STAGING" "$BRANCH" "$INTERVAL_S" "${runners[@]}" \
  >>"$WORK/commit.log" 2>&1 </dev/null &
echo "committer $!" >>"$WORK/pgids"
echo "committer: every ${INTERVAL_S}s into $STAGING on $BRANCH (log $WORK/commit.log); process groups in $WORK/pgids"
