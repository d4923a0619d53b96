#!/usr/bin/env bash
# LaMer vs GiGPO on MineSweeper 4x4 with 2 mines (docs/RESULTS.md), everything with one command:
# from the same SFT warm start (models/base), for each training seed in $SEEDS train
#   lamer      LaMer: G trials x 3 attempts per task, reflection_only memory, gamma_traj 0.9;
#   gigpo      GiGPO as the paper's baseline: 3G single-attempt sessions per task;
#   gigpo-ref  GiGPO as the reference code's MineSweeper script trains it
#              (examples/minesweeper/gigpo_minesweeper_qwen3_4b.sh: env.num_attempts=3 with
#              reflections in training, traj_gamma 0.6, group 24 = 3x LaMer's 8 trials, validated
#              with val_do_reflection=False): GREF trials x 3 attempts, gamma_traj 0.6;
# each for exactly $ITER iterations of $T fresh training tasks (no wall-clock budget), then
# evaluate every trained run and the SFT start on the same $EVAL_TASKS held-out tasks (3 attempts;
# GiGPO rows as independent retries without reflection, as the paper and the reference validate
# them), and write OUT_DIR/report.md, OUT_DIR/curves.svg and (unless RESULTS='') the
# lamer-vs-gigpo-redone section of docs/RESULTS.md (bench/lamer-vs-gigpo-report.ts).
# Rollouts and evaluation sample at 0.7 / top-p 0.8 / top-k 20 with the env's legal actions
# (availableActions); training recomputes that same sampling distribution (src/training/job.ts).
# Finished pieces (a curve with $ITER points, an eval file) are kept when the command is rerun.
# Each eval's server writes its output to OUT_DIR/server-<eval>.log; if it exits before it is
# ready (or is not ready within 120 s) the run stops at once, exit 1, with its exit status and the
# log's last lines.
#
# Usage: bench/lamer-vs-gigpo.sh OUT_DIR
# Settings (environment): ITER=30 SEEDS="0 1 2" ARMS="lamer gigpo gigpo-ref" T=8 G=4 GREF=3*G
#   LR=5e-5 EVAL_TASKS=256 BASE=models/base RESULTS=docs/RESULTS.md CONCURRENCY=32 PORT0=18431
#   FINAL=1 (0: only the runs of $SEEDS x $ARMS and their evals; no SFT evals, no report).
#   SEEDS= or ARMS= (set and empty) trains nothing: with FINAL=1, only the SFT evals and the report.
# OUT_DIR/meta.json records the commit and settings of the first invocation (what
# bench/lamer-vs-gigpo-verify.sh re-runs); a later invocation with other settings is refused.
# Two cores: run two invocations on the same OUT_DIR with disjoint SEEDS/ARMS, FINAL=0, distinct
# PORT0 and LAMER_TRAIN_WORKERS=1, then one plain invocation (it finds those runs done).
# Tiny check: ITER=1 SEEDS=0 T=2 G=2 EVAL_TASKS=8 RESULTS= bench/lamer-vs-gigpo.sh /tmp/lvg-tiny
set -euo pipefail
case "${1:-}" in
  ''|-h|--help) echo "usage: bench/lamer-vs-gigpo.sh OUT_DIR (settings through the environment: see the header of this file)" >&2; exit 2 ;;
esac
OUT=$(realpath -m "$1")
# Paths below (node_modules, src, models) are the repository's: run from its root wherever called from.
cd "$(dirname "$0")/.."
ITER=${ITER:-30}
SEEDS=${SEEDS-"0 1 2"}
ARMS=${ARMS-"lamer gigpo gigpo-ref"}
T=${T:-8}; G=${G:-4}; GREF=${GREF:-$((3 * G))}; LR=${LR:-5e-5}
EVAL_TASKS=${EVAL_TASKS:-256}
BASE=${BASE:-models/base}
RESULTS=${RESULTS-docs/RESULTS.md}
CONCURRENCY=${CONCURRENCY:-32}
PORT=${PORT0:-18431}
FINAL=${FINAL:-1}
SAMPLING=(--temperature 0.7 --top-p 0.8 --top-k 20)
PARAMS='{"rows":4,"cols":4,"mines":2}'
mkdir -p "$OUT"
LOG="$OUT/progress.log"
META=$(node -e '
  const [commit, dirty, ...kv] = process.argv.slice(1);
  const settings = Object.fromEntries(kv.map((x) => [x.slice(0, x.indexOf("=")), x.slice(x.indexOf("=") + 1)]));
  console.log(JSON.stringify({ commit, dirty: dirty !== "", settings }, null, 1));
' "$(git rev-parse HEAD 2>/dev/null || echo unknown)" "$(git status --porcelain -- src bench models 2>/dev/null)" \
  ITER="$ITER" T="$T" G="$G" GREF="$GREF" LR="$LR" EVAL_TASKS="$EVAL_TASKS" BASE="$BASE" CONCURRENCY="$CONCURRENCY")
if [ -s "$OUT/meta.json" ]; then
  same=$(node -e 'const a=require(process.argv[1]), b=JSON.parse(process.argv[2]); console.log(JSON.stringify(a.settings)===JSON.stringify(b.settings) ? 1 : 0)' "$(realpath "$OUT/meta.json")" "$META")
  [ "$same" = 1 ] || { echo "$OUT/meta.json records other settings; use another OUT_DIR (recorded: $(cat "$OUT/meta.json"))" >&2; exit 2; }
else
  echo "$META" >"$OUT/meta.json"
fi
lamer() { node_modules/.bin/tsx src/cli/index.ts "$@"; }
say() { echo "$(date -u +%FT%TZ) $*" | tee -a "$LOG"; }
points() { node -e "try{console.log(require(process.argv[1]).points.length)}catch{console.log(0)}" "$(realpath -m "$1")"; }

train() { # arm seed
  local arm=$1 seed=$2 dir="$OUT/$1/seed-$2" flags
  case $arm in
    lamer) flags=(--algorithm lamer --group "$G" --gamma-traj 0.9) ;;
    gigpo) flags=(--algorithm gigpo --group "$G") ;;
    gigpo-ref) flags=(--algorithm lamer --group "$GREF" --gamma-traj 0.6) ;;
    *) echo "unknown arm $arm" >&2; exit 2 ;;
  esac
  if [ "$(points "$dir/learning-curve.json")" = "$ITER" ]; then say "train $arm seed $seed: done already"; return; fi
  rm -rf "$dir"; mkdir -p "$dir"
  say "train $arm seed $seed: $ITER iterations"
  # training seeds: disjoint task ranges per seed (seed * 100000 + iteration * T + i)
  lamer train --env minesweeper --params "$PARAMS" "${flags[@]}" --iterations "$ITER" --tasks-per-iter "$T" \
    --lr "$LR" --seed $((seed * 100000)) --concurrency "$CONCURRENCY" --available-actions "${SAMPLING[@]}" --quiet \
    --out "$dir" --data-dir "$dir/data" --base-model-dir "$BASE" >>"$LOG" 2>&1
}

# Wait for the server just started ($SERVER_PID, log $2) to answer /readyz on port $1, for eval $3.
# If it exits first, stop at once: its exit status and the last lines of its log, exit 1; the same
# (the server stopped by the EXIT trap) when it is not ready within 120 s.
wait_ready() {
  local port=$1 slog=$2 name=$3 status
  for _ in $(seq 1 240); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      status=0; wait "$SERVER_PID" || status=$?; SERVER_PID=
      say "eval $name: its server exited (status $status) before it was ready; last lines of $slog:"
      tail -n 20 "$slog" | awk 1 | tee -a "$LOG" >&2
      exit 1
    fi
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
    sleep 0.5
  done
  say "eval $name: its server was not ready within 120 s; last lines of $slog:"
  tail -n 20 "$slog" | awk 1 | tee -a "$LOG" >&2
  exit 1
}

evaluate() { # name data-dir extra-eval-flags... (a server over the data dir: its last trained version is active)
  local name=$1 data=$2 rc=0; shift 2
  if [ -s "$OUT/eval-$name.json" ]; then say "eval $name: done already"; return; fi
  PORT=$((PORT + 1))
  LAMER_DATA_DIR="$data" LAMER_BASE_MODEL_DIR="$BASE" LAMER_PORT=$PORT LAMER_LOG_LEVEL=warn node_modules/.bin/tsx src/cli/index.ts serve \
    >"$OUT/server-$name.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "$PORT" "$OUT/server-$name.log" "$name"
  say "eval $name"
  # lamer eval exits 1 when some sessions ended with an error but still writes its report (the
  # errors are in it and in the log): keep going then; stop only when no report was written.
  lamer eval --env minesweeper --params "$PARAMS" --tasks "$EVAL_TASKS" --attempts 3 --concurrency "$CONCURRENCY" --seed 0 \
    --available-actions --quiet --server "http://127.0.0.1:$PORT" --out "$OUT/eval-$name.json" "$@" >>"$LOG" 2>&1 || rc=$?
  kill "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=
  if [ "$rc" != 0 ]; then
    [ -s "$OUT/eval-$name.json" ] || { say "eval $name failed (exit $rc), no report: see $LOG"; exit 1; }
    say "eval $name: exit $rc (some sessions ended with errors; counted in the report, see $LOG)"
  fi
}
SERVER_PID=
trap '[ -z "$SERVER_PID" ] || kill "$SERVER_PID" 2>/dev/null || true' EXIT

for seed in $SEEDS; do
  for arm in $ARMS; do
    train "$arm" "$seed"
    case $arm in
      lamer) evaluate "$arm-seed$seed" "$OUT/$arm/seed-$seed/data" ;;
      *) evaluate "$arm-seed$seed" "$OUT/$arm/seed-$seed/data" --independent-attempts ;;
    esac
  done
done
[ "$FINAL" = 1 ] || { say "runs of seeds '$SEEDS' x arms '$ARMS' done (FINAL=0: no SFT evals, no report)"; exit 0; }
# the common starting point, both ways
evaluate sft-lamer-mode "$OUT/sft-data"
evaluate sft-independent "$OUT/sft-data" --independent-attempts
say "report"
node_modules/.bin/tsx bench/lamer-vs-gigpo-report.ts "$OUT" ${RESULTS:+--results "$RESULTS"} --curve-every $(( ITER > 20 ? ITER / 10 : 1 )) >>"$LOG"
say "done: $OUT/report.md"
