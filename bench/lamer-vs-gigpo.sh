#!/usr/bin/env bash
# The experiment of issue 5 item 7 (docs/RESULTS.md, "LaMer vs GiGPO"): LaMer and GiGPO trained from
# the same SFT warm start (models/base, `npm run model:sft-base`) on MineSweeper 4x4 with 2 mines,
# the same trajectories per task (LaMer: G trials x 3 attempts; GiGPO: 3G single attempts) and the
# same number of iterations (LaMer's, which runs first under a wall-clock budget), then both
# evaluated with `lamer eval` on 128 held-out tasks with 3 attempts (GiGPO: independent retries,
# no reflection), and the SFT start both ways. Every rollout and evaluation step sends the env's
# legal actions (availableActions): the server picks one of them by the model's likelihood. Usage: bench/lamer-vs-gigpo.sh OUT_DIR [LAMER_MINUTES]
set -euo pipefail
OUT=${1:?usage: bench/lamer-vs-gigpo.sh OUT_DIR [LAMER_MINUTES]}
MINUTES=${2:-30}
BASE=${BASE:-models/base}  # the SFT warm start (the runs in docs/RESULTS.md used models/sft: the same bytes)
T=${T:-8}; G=${G:-4}; LR=${LR:-5e-5}  # tasks per iteration, group size, learning rate
# rollout sampling: the eval setting (0.7 / 0.8 / 20); at LaMer's training temperature 1.0 the small
# SFT model's reflections derail at the first token (see docs/RESULTS.md)
SAMPLING=(--temperature 0.7 --top-p 0.8 --top-k 20)
PARAMS='{"rows":4,"cols":4,"mines":2}'
mkdir -p "$OUT"
lamer() { npx tsx src/cli/index.ts "$@"; }
stamp() { date -u +%H:%M:%S; }

echo "$(stamp) lamer training (budget $MINUTES min)"
lamer train --env minesweeper --params "$PARAMS" --algorithm lamer --iterations 100 --max-minutes "$MINUTES" \
  --tasks-per-iter "$T" --group "$G" --lr "$LR" --gamma-traj 0.9 --concurrency 32 --available-actions "${SAMPLING[@]}" --quiet \
  --out "$OUT/lamer" --data-dir "$OUT/lamer-data" --base-model-dir "$BASE"
N=$(node -e "console.log(require('$OUT/lamer/learning-curve.json').points.length)")
echo "$(stamp) gigpo training ($N iterations, as many as lamer)"
lamer train --env minesweeper --params "$PARAMS" --algorithm gigpo --iterations "$N" \
  --tasks-per-iter "$T" --group "$G" --lr "$LR" --concurrency 32 --available-actions "${SAMPLING[@]}" --quiet \
  --out "$OUT/gigpo" --data-dir "$OUT/gigpo-data" --base-model-dir "$BASE"

# evaluate: a server over each run's data directory (its last trained version is active)
evaluate() { # name data-dir port extra-eval-flags...
  local name=$1 data=$2 port=$3; shift 3
  LAMER_DATA_DIR="$data" LAMER_BASE_MODEL_DIR="$BASE" LAMER_PORT=$port LAMER_LOG_LEVEL=warn node_modules/.bin/tsx src/cli/index.ts serve &
  local pid=$!
  for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 1; done
  echo "$(stamp) eval $name"
  lamer eval --env minesweeper --params "$PARAMS" --tasks 128 --attempts 3 --concurrency 32 --seed 0 --available-actions --quiet \
    --server "http://127.0.0.1:$port" --out "$OUT/eval-$name.json" "$@" | tee "$OUT/eval-$name.txt"
  kill "$pid"; wait "$pid" || true
}
evaluate lamer "$OUT/lamer-data" 18431
evaluate gigpo "$OUT/gigpo-data" 18432 --independent-attempts
# the common starting point, both ways
evaluate sft-lamer-mode "$OUT/sft-data" 18433
evaluate sft-independent "$OUT/sft-data" 18434 --independent-attempts
echo "$(stamp) done"
