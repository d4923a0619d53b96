#!/usr/bin/env bash
# two 25-minute stages from I9 with I10's seed (46): more memory contrast (M), a stronger unlikelihood on remembered mines (U)
set -u
cd "$(dirname "$0")/../../.."
REC="--seed 46 --minutes 25 --lr 5e-4 --dagger-from 0 --dagger-share 0.6 --memory-contrast 1 --memory-pairs on --invalid-unlikelihood 2 --mine-unlikelihood 2 --data-thread on --reflection-share 0.2 --eval-every 1000 --eval-tasks 32"
mkdir -p "${OUT:-/tmp/stage-levers}"
FROM=experiments/results/base-memory-phase/checkpoint-i9
date -u +%FT%TZ > ${OUT:-/tmp/stage-levers}/started
npm run model:sft-base -- --from $FROM $REC --memory-share 0.4 --memory-weight 10 --memory-unlikelihood 10 --out ${OUT:-/tmp/stage-levers}/M > ${OUT:-/tmp/stage-levers}/M.log 2>&1 &
npm run model:sft-base -- --from $FROM $REC --memory-share 0.25 --memory-weight 6 --memory-unlikelihood 20 --out ${OUT:-/tmp/stage-levers}/U > ${OUT:-/tmp/stage-levers}/U.log 2>&1 &
wait
date -u +%FT%TZ > ${OUT:-/tmp/stage-levers}/finished
