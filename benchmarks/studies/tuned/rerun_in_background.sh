#!/usr/bin/env bash
# A tuned-study rerun that outlives sessions and machines. From the repository root:
#
#   benchmarks/studies/tuned/rerun_in_background.sh WORK "BLOCK BLOCK ..." ["BLOCK ..." ...]
#
# WORK is a folder outside the repository (e.g. /tmp/tuned-rerun). Each quoted list of blocks (ENV/REGIME, in the order
# to run them; a held-out block after the block whose searches it tests) is one runner: runners run side by side, each
# cell by cell, from a clean worktree of HEAD (WORK/worktree, made once; .venv linked from this checkout), writing
# into WORK. The cells already committed in the staging folder (benchmarks/results/lag_robustness/PRESET-rerun) are
# copied into WORK first, so nothing finished is run again. Every 20 minutes, while this checkout has no uncommitted
# changes, the cells that finished are adopted into the staging folder (--adopt WORK --cells-only: clean and current
# cells only) and committed, that folder alone. Runners and the committer run at the lowest priority, in sessions of
# their own (setsid); their logs are WORK/runner-N.log and WORK/commit.log.
#
# Pause every process (e.g. for the test suite): kill -STOP -- -PGID for each PGID in WORK/pgids; resume with -CONT;
# stop with kill -- -PGID. PRESET (default tuned) and INTERVAL_S (default 1200) can be set in the environment.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
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
# a misspelt block is refused before anything starts
.venv/bin/python -c 'import sys; from benchmarks.studies.tuned.study import PRESETS, shard_cells
shard_cells(PRESETS[sys.argv[1]], (), sys.argv[2:])' "$PRESET" $* || exit 2

mkdir -p "$WORK/cells"
if [ ! -d "$WORK/worktree" ]; then
  git worktree add --detach "$WORK/worktree" HEAD >/dev/null
  ln -s "$ROOT/.venv" "$WORK/worktree/.venv"
fi
echo "runners: clean worktree of $(git -C "$WORK/worktree" rev-parse --short HEAD) in $WORK/worktree"
if compgen -G "$STAGING/cells/*.json" >/dev/null; then
  cp -n "$STAGING"/cells/*.json "$WORK/cells/"
  echo "copied $(ls "$STAGING"/cells/*.json | wc -l) committed cells of $STAGING into $WORK/cells"
fi

# nice alone does not reach across setsid's scheduler groups (autogroups): each new session lowers its group's too
LOWEST='renice -n 19 -p $$ >/dev/null 2>&1; echo 19 >/proc/$$/autogroup 2>/dev/null;'
: >"$WORK/pgids"
runner=0
for blocks in "$@"; do
  runner=$((runner + 1))
  loop="$LOWEST cd '$WORK/worktree'; for block in $blocks; do
    .venv/bin/python -m benchmarks.studies.tuned --preset '$PRESET' --out-dir '$WORK' --block \"\$block\" \\
      || echo \"[\$(date +%H:%M)] block \$block ended with an error; going on with the next\"; done"
  setsid nohup bash -c "$loop" >>"$WORK/runner-$runner.log" 2>&1 </dev/null &
  echo $! >>"$WORK/pgids"
  echo "runner $runner: $blocks (log $WORK/runner-$runner.log)"
done

commit="$LOWEST cd '$ROOT'; while true; do sleep $INTERVAL_S
  if [ -n \"\$(git status --porcelain --untracked-files=no)\" ]; then
    echo \"[\$(date +%H:%M)] the checkout has uncommitted changes: not committing cells now\"; continue; fi
  .venv/bin/python -m benchmarks.studies.tuned --preset '$PRESET' --adopt '$WORK' --out-dir '$STAGING' --cells-only \\
    | grep -v 'refused: stale' | tail -n 3
  added=\$(git status --porcelain -- '$STAGING' | sed 's|.*/||; s|\\.json\$||' | tr '\\n' ' ')
  [ -z \"\$added\" ] && continue
  git add -- '$STAGING' && git commit -q -m \"Tuned study rerun ($PRESET): cells finished (clean worktree of \$(git -C '$WORK/worktree' rev-parse --short HEAD), \$(.venv/bin/python -c 'from vaco_jax.runs import machine; print(machine.cpu_model())')): \$added\" -- '$STAGING' \\
    && echo \"[\$(date +%H:%M)] committed: \$added\"
done"
setsid nohup bash -c "$commit" >>"$WORK/commit.log" 2>&1 </dev/null &
echo $! >>"$WORK/pgids"
echo "committer: every ${INTERVAL_S}s into $STAGING (log $WORK/commit.log); process groups in $WORK/pgids"
