#!/usr/bin/env bash
# Run L (docs/RESULTS.md): a from-scratch rebuild of the base in one script, on the OpenBLAS matmul:
# run H's recipe (src/recipes/configs/base.json) for 60 minutes, then I5's memory-lever recipe from
# its last iterate for 48 minutes. usage: experiments/results/base-memory-phase/run-l.sh OUT_DIR
set -euo pipefail
L=$(realpath -m "${1:?usage: run-l.sh OUT_DIR}")
cd "$(dirname "$0")/../../.."
mkdir -p "$L"
date -u +%FT%TZ > "$L/started"
npm run model:sft-base -- --config src/recipes/configs/base.json --out "$L/L1" --minutes 60 --seed 61 --eval-every 2000 > "$L/L1.log" 2>&1
npm run model:sft-base -- --from "$L/L1/last-iterate" --out "$L/L2" --seed 62 --minutes 48 --lr 5e-4 --dagger-from 0 --dagger-share 0.6 \
  --memory-contrast 1 --memory-pairs on --memory-share 0.25 --memory-unlikelihood 10 --invalid-unlikelihood 2 --mine-unlikelihood 2 \
  --data-thread on --reflection-share 0.2 --memory-weight 6 --eval-every 1500 --eval-tasks 32 --probe-boards 100 > "$L/L2.log" 2>&1
date -u +%FT%TZ > "$L/finished"
