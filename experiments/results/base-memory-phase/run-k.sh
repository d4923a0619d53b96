#!/usr/bin/env bash
# Run K (docs/RESULTS.md): a from-scratch rebuild of the base in one script, on the OpenBLAS matmul:
# run H's recipe (src/recipes/configs/base.json) for 40 minutes, then I5's memory-lever recipe from
# its last iterate for 65 minutes. usage: experiments/results/base-memory-phase/run-k.sh OUT_DIR
set -euo pipefail
K=$(realpath -m "${1:?usage: run-k.sh OUT_DIR}")
cd "$(dirname "$0")/../../.."
mkdir -p "$K"
date -u +%FT%TZ > "$K/started"
npm run model:sft-base -- --config src/recipes/configs/base.json --out "$K/K1" --minutes 40 --seed 61 --eval-every 2000 > "$K/K1.log" 2>&1
npm run model:sft-base -- --from "$K/K1/last-iterate" --out "$K/K2" --seed 62 --minutes 65 --lr 5e-4 --dagger-from 0 --dagger-share 0.6 \
  --memory-contrast 1 --memory-pairs on --memory-share 0.25 --memory-unlikelihood 10 --invalid-unlikelihood 2 --mine-unlikelihood 2 \
  --data-thread on --reflection-share 0.2 --memory-weight 6 --eval-every 1500 --eval-tasks 32 --probe-boards 100 > "$K/K2.log" 2>&1
date -u +%FT%TZ > "$K/finished"
