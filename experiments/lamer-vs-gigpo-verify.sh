#!/usr/bin/env bash
# Re-runs the first training iteration of each arm of a recorded experiments/lamer-vs-gigpo.sh run and
# checks that it reproduces the recorded curve's first point (experiments/lamer-vs-gigpo-verify.ts).
# The recorded run names the commit that trained it (RECORDED_DIR/meta.json "commit"); the check
# runs that commit's code, from a temporary git worktree of this repository sharing this
# checkout's node_modules, with one training worker per job as the recorded runs had.
#
# Usage: experiments/lamer-vs-gigpo-verify.sh [RECORDED_DIR] [WORK_DIR]
#   RECORDED_DIR default experiments/results/lamer-vs-gigpo (the MineSweeper 4x4 run: one game, its files
#   at the top); a run in the paper's setting (experiments/results/lamer-vs-gigpo-paper) has a folder per
#   game, checked one game at a time (GAME); WORK_DIR default a new temporary folder.
# Settings (environment): SEED=0 ARMS (the arms recorded for that seed; default "lamer gigpo
# gigpo-ref" for the 4x4 run, "lamer gigpo" for the paper's setting) GAME=minesweeper-6x6-3 (paper's setting).
# meta.json: {"commit": sha, "settings": {"T": 8, "G": 4, ...}} (experiments/lamer-vs-gigpo.sh's settings
# that were not defaults; values without spaces). Each run is also evaluated on 1 task (the script's
# own step after training; cheap).
# Cost: one iteration per arm on one core, about 4 (lamer), 2 (gigpo) and 12 (gigpo-ref) minutes.
set -euo pipefail
REC=$(realpath "${1:-experiments/results/lamer-vs-gigpo}")
WORK=${2:-$(mktemp -d /tmp/lvg-verify.XXXXXX)}
SEED=${SEED:-0}
if ls "$REC"/eval-*.json >/dev/null 2>&1; then # one-game layout (the MineSweeper 4x4 run)
  ARMS=${ARMS:-"lamer gigpo gigpo-ref"}; SUB=; GAMES_SETTING=()
else
  GAME=${GAME:-minesweeper-6x6-3}; ARMS=${ARMS:-"lamer gigpo"}; SUB="/$GAME"; GAMES_SETTING=(GAMES="$GAME")
fi
ROOT=$(git rev-parse --show-toplevel)
META="$REC/meta.json"
[ -s "$META" ] || { echo "no $META: not a recorded run" >&2; exit 2; }
COMMIT=$(node -e 'console.log(require(process.argv[1]).commit)' "$META")
SETTINGS=$(node -e 'const m=require(process.argv[1]).settings;console.log(Object.entries(m).filter(([,v])=>!/\s/.test(String(v))).map(([k,v])=>k+"="+v).join(" "))' "$META")
mkdir -p "$WORK"
TREE="$WORK/tree"
echo "recorded run: $REC (commit $COMMIT, settings $SETTINGS); work dir $WORK"
git -C "$ROOT" worktree add --detach "$TREE" "$COMMIT" >/dev/null
trap 'git -C "$ROOT" worktree remove --force "$TREE" >/dev/null 2>&1 || true' EXIT
ln -s "$ROOT/node_modules" "$TREE/node_modules"
# the script as that commit had it: under bench/ before the experiments moved to experiments/
RUN=experiments/lamer-vs-gigpo.sh; [ -e "$TREE/$RUN" ] || RUN=bench/lamer-vs-gigpo.sh
(cd "$TREE" && env $SETTINGS "${GAMES_SETTING[@]}" ITER=1 SEEDS="$SEED" ARMS="$ARMS" FINAL=0 COMMIT=0 RESULTS= LAMER_TRAIN_WORKERS=1 EVAL_TASKS=1 \
  bash "$RUN" "$WORK/runs")
cd "$ROOT" && node_modules/.bin/tsx experiments/lamer-vs-gigpo-verify.ts "$REC$SUB" "$WORK/runs$SUB" "$SEED" $ARMS
