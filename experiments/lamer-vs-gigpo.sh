#!/usr/bin/env bash
# LaMer vs GiGPO in the paper's setting (docs/method.md#defaults), everything with one
# command. For each game of $GAMES (MineSweeper 6x6 with 3 mines, Sokoban 6x6 with 2 boxes), from
# the same SFT start ($BASE, models/base), for each training seed of $SEEDS train
#   lamer  LaMer: G trials x 3 attempts per task, reflection_only memory, reflections trained,
#          gamma_traj $GAMMA_MS (MineSweeper) / $GAMMA_SOKO (Sokoban), the paper's best values;
#   gigpo  GiGPO as the paper's baseline: 3G single-attempt sessions per task (no reflection);
#   lamer-own (only when named in ARMS) LaMer with the ablation of docs/method.md "GiGPO", a departure
#          from the reference: each reflection's episode term centred among its task's reflections
#          only (and action turns among action turns), `lamer train --reflection-group own`;
# so both RL arms see the same number of trajectories per task: G trials x 3 attempts = 3G
# single attempts (a LaMer trial stops at its first success, as in the paper, so it may play
# fewer), on the same T fresh training tasks per iteration (same seed -> same tasks), each for
# exactly $ITER iterations (no wall-clock budget; the paper: 16 tasks x 8 trials, 300 iterations).
# Training rollouts sample at temperature 1.0, top-p 1, top-k 0 (no truncation; $TRAIN_SAMPLING),
# the paper's training setting; the job trains that same sampling distribution
# (src/training/run/job.ts). Each point of a run's learning curve also holds the job's clip fraction,
# its action entropy, the KL of the rollout policy from the start (every $KL_EVERY iterations) and
# the held-out pass@1..3 of the version it trained on $HELDOUT_TASKS held-out tasks (eval seeds from
# $HELDOUT_SEED, apart from the final evaluation's; every $HELDOUT_EVERY iterations and the last;
# LaMer arms as 3-attempt sessions, GiGPO as independent retries; src/eval/experiment-probes.ts).
# Then every trained run and the SFT start are evaluated on the same
# $EVAL_TASKS held-out tasks of the game (eval seeds from 0), 3 attempts, at the eval's sampling
# 0.7 / top-p 0.8 / top-k 20 ($EVAL_SAMPLING, the paper's eval): LaMer and one SFT row as 3-attempt
# sessions with reflections, GiGPO and the other SFT row as 3 independent single-attempt retries
# without reflection (as the paper evaluates its baselines). AVAILABLE_ACTIONS=1 sends the env's
# legal actions with every step, in training and in evaluation; the default is 0 (the model
# writes its own action) when $BASE is a compact-format checkpoint, else 1.
# Output: OUT_DIR/<game>/<arm>/seed-<s>/learning-curve.json, OUT_DIR/<game>/eval-<arm>-seed<s>.json (and eval-lamer-independent-seed<s>.json: a LaMer run's weights as 3 independent retries, the same-weights control of memory),
# OUT_DIR/<game>/eval-sft-{lamer-mode,independent}.json, OUT_DIR/<game>/timings.jsonl (wall and
# CPU seconds of each training and eval), and, after each game (FINAL=1), OUT_DIR/report.md and
# OUT_DIR/curves-<game>.svg (experiments/lamer-vs-gigpo-report.ts) and, unless RESULTS='', the marked
# section lamer-vs-gigpo-paper of $RESULTS (written, never committed by this script).
# Resumable, one command: rerun it. A finished piece (an eval file, a curve with $ITER points) is
# kept; an unfinished training run continues after its last finished iteration (`lamer train
# --resume`, docs/training.md "Resuming a run": after every iteration a run's folder holds its curve,
# its jobs/iteration-<k>.json and a copy of the checkpoint it trained; the next iteration plays the
# same task and sampling seeds it would have played unbroken). OUT_DIR/meta.json records the
# commit and settings of the first invocation; a later invocation with other settings is refused
# (exit 2).
# COMMIT=1: records land in git as they are made, so the next session resumes from a clean clone.
# A run trains $COMMIT_EVERY iterations per `lamer train` invocation; after each, its curve and the
# new jobs/iteration-<k>.json files are copied to $RECORD (same layout as OUT_DIR) and committed,
# and every $CHECKPOINT_EVERY iterations and at its last iteration so is its latest checkpoint
# (<run>/checkpoint/<version>/, 3.6 MB for the shipped base; the run's previous committed one is
# removed in the same commit, so a checkout holds one per run; git's history keeps each:
# ITER / CHECKPOINT_EVERY + 1 per run, 7 x 3.6 MB for 60 iterations at 10). The same after each
# finished eval (with the run's final checkpoint, which the eval scored), each SFT eval and each
# report (JSON, report.md, svg; never data directories or databases). With COMMIT=1 a rerun first
# copies what $RECORD holds and OUT_DIR lacks into OUT_DIR (when its meta.json records the same
# settings): on a fresh clone each run then continues after its last committed checkpoint (the
# iterations recorded after it run again, with the same seeds; at most CHECKPOINT_EVERY - 1 of them),
# and on the machine that ran it after its last finished iteration (OUT_DIR has its own checkpoint).
# Each eval's server writes its output to OUT_DIR/<game>/server-<eval>.log; if it exits before it
# is ready (or is not ready within 120 s) the run stops at once, exit 1, with its exit status and
# the log's last lines.
#
# Usage: experiments/lamer-vs-gigpo.sh OUT_DIR
# Settings (environment):
#   GAMES="minesweeper-6x6-3 sokoban-6x6-2" SEEDS="0 1 2" ARMS="lamer gigpo"   what to run
#   (ARMS="lamer lamer-own gigpo" adds the ablation)
#   ITER=12 T=8 G=8 LR=1e-4 GAMMA_MS=0.9 GAMMA_SOKO=0.6                          how to train
#   (the run of 2026-12-02 in docs/RESULTS.md; LR from a 1-iteration pilot)
#   TRAIN_SAMPLING=1/1/0 EVAL_SAMPLING=0.7/0.8/20 (temperature/top-p/top-k) AVAILABLE_ACTIONS=0|1
#   EVAL_TASKS=256 BASE=models/base CONCURRENCY=32 PORT0=18431
#   HELDOUT_TASKS=32 (0: no held-out probe) HELDOUT_EVERY=1 HELDOUT_SEED=1000000 KL_EVERY=1 (0: no KL)
#   FINAL=1 (0: only the runs of $SEEDS x $ARMS and their evals; no SFT evals, no report)
#   COMMIT=0 COMMIT_EVERY=1 CHECKPOINT_EVERY=10 RECORD=experiments/results/lamer-vs-gigpo-paper RESULTS=docs/RESULTS.md
#   SEEDS= or ARMS= (set and empty) trains nothing: with FINAL=1, only the SFT evals and the report.
# Two cores: run two invocations on the same OUT_DIR with disjoint GAMES/SEEDS/ARMS, FINAL=0,
# distinct PORT0 and LAMER_TRAIN_WORKERS=1, then one plain invocation (it finds those runs done).
# Tiny check: ITER=2 SEEDS=0 T=2 G=2 EVAL_TASKS=4 HELDOUT_TASKS=4 RESULTS= experiments/lamer-vs-gigpo.sh /tmp/lvg-tiny
# Cost on this project's 2-core machine (measured 2026-12-01/02 with ITER=1 runs, this script at
# nice 19). Quiet machine: a training iteration takes about 9 s at T=2 G=2 (either game and arm)
# and 70 s at T=8 G=8 (MineSweeper LaMer: 13 s of rollouts + 57 s of job, 77 CPU s; MineSweeper
# GiGPO the same CPU time); an eval about 5 s of server start + 0.2-0.4 s per task (1-2 minutes
# at 256 tasks). Beside two other trainings on both cores about twice that (T=2 G=2: 12-19 s;
# T=4 G=4: 25-44 s an iteration). The default run (2 games x 3 seeds x 2 arms x 12 iterations of
# T=8 G=8, 22 evals of 256 tasks) took 93 minutes on 2026-12-02 as two invocations side by side (one
# game each; 34 pieces summing to 10,207 s wall), with other work beside it. The tiny check above
# takes about 5-8 minutes, most of it tsx and server start-up.
# T x G sets the trajectories per iteration: the paper's 16 tasks x 8 trials is T=16 G=8 (about
# twice the time). With COMMIT=1 each of a run's `lamer train --resume` invocations (one per
# COMMIT_EVERY iterations) starts tsx, the in-process server and the model again: 27 s before the
# first rollout, measured on 2026-12-06 with the machine loaded (load average 17, this script at
# nice 19); COMMIT_EVERY=5 pays it once in 5 iterations. The held-out probe (32 tasks x 3 attempts)
# and the KL replays (the first trial of each task) add rollouts of their own to each iteration.
set -euo pipefail
# The whole script is one compound command, read before it runs: a checkout or merge that changes
# this file during a run cannot break the run (bash reads a script as it goes). The sources are
# read afresh by each piece (every train and eval starts tsx), so run it from a checkout nothing
# else changes meanwhile (its own git worktree, for instance); timings.jsonl names the code
# (tree of src/) each piece ran.
{
case "${1:-}" in
  ''|-h|--help)
    echo "usage: experiments/lamer-vs-gigpo.sh OUT_DIR (settings through the environment: see the header of this file)" >&2; exit 2 ;;
esac
OUT=$(realpath -m "$1")
# Paths below (node_modules, src, models) are the repository's: run from its root wherever called from.
cd "$(dirname "$0")/.."
ROOT=$(pwd)
GAMES=${GAMES-"minesweeper-6x6-3 sokoban-6x6-2"}
SEEDS=${SEEDS-"0 1 2"}
ARMS=${ARMS-"lamer gigpo"}
ITER=${ITER:-12}
T=${T:-8}; G=${G:-8}; LR=${LR:-1e-4}
GAMMA_MS=${GAMMA_MS:-0.9}; GAMMA_SOKO=${GAMMA_SOKO:-0.6}
TRAIN_SAMPLING=${TRAIN_SAMPLING:-1/1/0}
EVAL_SAMPLING=${EVAL_SAMPLING:-0.7/0.8/20}
EVAL_TASKS=${EVAL_TASKS:-256}
BASE=${BASE:-models/base}
RESULTS=${RESULTS-docs/RESULTS.md}
CONCURRENCY=${CONCURRENCY:-32}
PORT=${PORT0:-18431}
FINAL=${FINAL:-1}
COMMIT=${COMMIT:-0}
COMMIT_EVERY=${COMMIT_EVERY:-1}; CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-10}
HELDOUT_TASKS=${HELDOUT_TASKS:-32}; HELDOUT_EVERY=${HELDOUT_EVERY:-1}; HELDOUT_SEED=${HELDOUT_SEED:-1000000}; KL_EVERY=${KL_EVERY:-1}
RECORD=${RECORD:-experiments/results/lamer-vs-gigpo-paper}
# the compact base writes its own actions (its rows are measured both ways; issue 22): default 0 there
if [ -z "${AVAILABLE_ACTIONS:-}" ]; then
  AVAILABLE_ACTIONS=$(node -e 'try{const m=require(process.argv[1]);console.log(m.userDefinedMetadata?.lamer?.promptFormat?.name==="compact"?0:1)}catch{console.log(1)}' "$(realpath -m "$BASE/model.json")")
fi
for g in $GAMES; do
  case $g in minesweeper-*|sokoban-*) ;; *) echo "unknown game '$g' in GAMES (minesweeper-RxC-M or sokoban-RxC-B)" >&2; exit 2 ;; esac
done
for a in $ARMS; do
  case $a in lamer|lamer-own|gigpo) ;; *) echo "unknown arm '$a' in ARMS (lamer, lamer-own, gigpo)" >&2; exit 2 ;; esac
done
case $AVAILABLE_ACTIONS in 0|1) ;; *) echo "AVAILABLE_ACTIONS must be 0 or 1, got '$AVAILABLE_ACTIONS'" >&2; exit 2 ;; esac
case $COMMIT in 0|1) ;; *) echo "COMMIT must be 0 or 1, got '$COMMIT'" >&2; exit 2 ;; esac
# numbers, checked before meta.json is written (a bad value would otherwise fail inside the first
# piece and leave an OUT_DIR that refuses the corrected settings)
for kv in ITER="$ITER" T="$T" G="$G" EVAL_TASKS="$EVAL_TASKS" CONCURRENCY="$CONCURRENCY" COMMIT_EVERY="$COMMIT_EVERY" CHECKPOINT_EVERY="$CHECKPOINT_EVERY" HELDOUT_EVERY="$HELDOUT_EVERY"; do
  case ${kv#*=} in ''|*[!0-9]*|0) echo "${kv%%=*} must be a positive integer, got '${kv#*=}'" >&2; exit 2 ;; esac
done
for kv in HELDOUT_TASKS="$HELDOUT_TASKS" HELDOUT_SEED="$HELDOUT_SEED" KL_EVERY="$KL_EVERY"; do
  case ${kv#*=} in ''|*[!0-9]*) echo "${kv%%=*} must be an integer >= 0, got '${kv#*=}'" >&2; exit 2 ;; esac
done
for kv in LR="$LR" GAMMA_MS="$GAMMA_MS" GAMMA_SOKO="$GAMMA_SOKO"; do
  node -e 'const x=Number(process.argv[1]); process.exit(process.argv[1].trim() !== "" && Number.isFinite(x) && x > 0 && x <= 1 ? 0 : 1)' "${kv#*=}" \
    || { echo "${kv%%=*} must be a number in (0, 1], got '${kv#*=}'" >&2; exit 2; }
done
sampling_flags() { # "temperature/top-p/top-k" NAME -> the CLI's flags
  local t p k
  IFS=/ read -r t p k <<<"$1"
  [ -n "$t" ] && [ -n "$p" ] && [ -n "$k" ] || { echo "$2 must be temperature/top-p/top-k, got '$1'" >&2; exit 2; }
  echo "--temperature $t --top-p $p --top-k $k"
}
flags=$(sampling_flags "$TRAIN_SAMPLING" TRAIN_SAMPLING); read -r -a TRAIN_FLAGS <<<"$flags"
flags=$(sampling_flags "$EVAL_SAMPLING" EVAL_SAMPLING); read -r -a EVAL_FLAGS <<<"$flags"
AA=(); [ "$AVAILABLE_ACTIONS" = 1 ] && AA=(--available-actions)
mkdir -p "$OUT"
LOG="$OUT/progress.log"
META=$(node -e '
  const [commit, dirty, ...kv] = process.argv.slice(1);
  const settings = Object.fromEntries(kv.map((x) => [x.slice(0, x.indexOf("=")), x.slice(x.indexOf("=") + 1)]));
  console.log(JSON.stringify({ commit, dirty: dirty !== "", settings }, null, 1));
' "$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  "$(git status --porcelain -- src experiments/*.sh experiments/*.ts models 2>/dev/null)" \
  ITER="$ITER" T="$T" G="$G" LR="$LR" GAMMA_MS="$GAMMA_MS" GAMMA_SOKO="$GAMMA_SOKO" TRAIN_SAMPLING="$TRAIN_SAMPLING" \
  EVAL_SAMPLING="$EVAL_SAMPLING" AVAILABLE_ACTIONS="$AVAILABLE_ACTIONS" EVAL_TASKS="$EVAL_TASKS" BASE="$BASE" CONCURRENCY="$CONCURRENCY" \
  HELDOUT_TASKS="$HELDOUT_TASKS" HELDOUT_EVERY="$HELDOUT_EVERY" HELDOUT_SEED="$HELDOUT_SEED" KL_EVERY="$KL_EVERY")
same_settings() { # meta.json file -> exit 0 when it records this invocation's settings
  [ "$(node -e 'const a=require(process.argv[1]), b=JSON.parse(process.argv[2]); console.log(JSON.stringify(a.settings)===JSON.stringify(b.settings) ? 1 : 0)' "$(realpath "$1")" "$META")" = 1 ]
}
lamer() { node_modules/.bin/tsx src/cli/index.ts "$@"; }
say() { echo "$(date -u +%FT%TZ) $*" | tee -a "$LOG"; }
points() { node -e "try{console.log(require(process.argv[1]).points.length)}catch{console.log(0)}" "$(realpath -m "$1")"; }
# the version a curve's last iteration left (the one it trained, else the one that played it); '' without one
last_version() { node -e "try{const p=require(process.argv[1]).points.at(-1);console.log(p?(p.trainedVersion??p.rolloutVersion):'')}catch{console.log('')}" "$(realpath -m "$1")"; }

# --- records (COMMIT=1) ---
# checked before anything is written: a refused invocation leaves OUT_DIR as it was
[ ! -s "$OUT/meta.json" ] || same_settings "$OUT/meta.json" || { echo "$OUT/meta.json records other settings; use another OUT_DIR (recorded: $(cat "$OUT/meta.json"))" >&2; exit 2; }
if [ "$COMMIT" = 1 ]; then
  REC=$(realpath -m "$RECORD")
  case $REC in "$ROOT"/*) ;; *) echo "RECORD ($REC) must be inside the repository ($ROOT)" >&2; exit 2 ;; esac
  [ ! -s "$REC/meta.json" ] || same_settings "$REC/meta.json" || { echo "$REC/meta.json records other settings; use another RECORD (recorded: $(cat "$REC/meta.json"))" >&2; exit 2; }
fi
[ -s "$OUT/meta.json" ] || echo "$META" >"$OUT/meta.json"
if [ "$COMMIT" = 1 ] && [ -s "$REC/meta.json" ]; then
  # what an earlier session recorded (curves, job files, checkpoints, evals): back into OUT_DIR
  # unless there already (OUT_DIR's own files are as new or newer)
  (cd "$REC" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name 'weights.bin' \) ! -name meta.json) | while read -r f; do
    [ -e "$OUT/$f" ] && continue
    mkdir -p "$(dirname "$OUT/$f")"; cp "$REC/$f" "$OUT/$f"; say "restored ${f#./} from $RECORD"
  done
fi
# Copy OUT_DIR-relative files to $RECORD and commit exactly those paths (under a lock: two
# invocations may share OUT_DIR). A folder is copied whole, replacing what $RECORD held there.
# A failed commit is logged; the files stay in OUT_DIR.
# CHECKPOINT=<run folder, OUT_DIR-relative> (set by the caller) also records that run's latest
# checkpoint copy, removing the one recorded before it.
CHECKPOINT=
record() { # message files...
  [ "$COMMIT" = 1 ] || return 0
  local msg=$1 f v paths=(); shift
  # meta.json: the first invocation's (commit and settings), kept once recorded
  [ -e "$REC/meta.json" ] || { mkdir -p "$REC"; cp "$OUT/meta.json" "$REC/meta.json"; }
  paths+=("$REC/meta.json")
  for f in "$@"; do
    [ -e "$OUT/$f" ] || continue
    mkdir -p "$(dirname "$REC/$f")"
    if [ -d "$OUT/$f" ]; then rm -rf "$REC/$f"; cp -r "$OUT/$f" "$REC/$f"; else cp "$OUT/$f" "$REC/$f"; fi
    paths+=("$REC/$f")
  done
  if [ -n "$CHECKPOINT" ] && v=$(last_version "$OUT/$CHECKPOINT/learning-curve.json") && [ -n "$v" ] \
    && [ -s "$OUT/$CHECKPOINT/checkpoint/$v/weights.bin" ]; then
    mkdir -p "$REC/$CHECKPOINT/checkpoint"
    find "$REC/$CHECKPOINT/checkpoint" -mindepth 1 -maxdepth 1 ! -name "$v" -exec rm -rf {} +
    rm -rf "$REC/$CHECKPOINT/checkpoint/$v.tmp"; cp -r "$OUT/$CHECKPOINT/checkpoint/$v" "$REC/$CHECKPOINT/checkpoint/$v.tmp"
    rm -rf "$REC/$CHECKPOINT/checkpoint/$v"; mv "$REC/$CHECKPOINT/checkpoint/$v.tmp" "$REC/$CHECKPOINT/checkpoint/$v"
    paths+=("$REC/$CHECKPOINT/checkpoint")
  fi
  local st
  st=$( (
    flock 9
    # -A: the checkpoint folder's removals too
    git add -A -- "${paths[@]}" || exit 1
    if git diff --cached --quiet -- "${paths[@]}"; then echo unchanged; else git commit -q -m "lamer-vs-gigpo-paper record: $msg" -- "${paths[@]}" && echo committed; fi
  ) 9>"$OUT/.commit.lock" 2>>"$LOG") || true
  case $st in
    committed|unchanged) say "record $msg: $st ($RECORD)" ;;
    *) say "COMMIT of '$msg' failed (the files are in $OUT; see $LOG)" ;;
  esac
}

# --- timing: wall and CPU seconds (this shell's reaped children) of each piece ---
# (`times` must run in this shell, not in a command substitution's subshell: hence the file)
TIMES="$OUT/.times"
cpu_now() { times >"$TIMES"; awk 'NR==2 { s=0; for (i=1;i<=NF;i++) { split($i,a,"m"); s+=a[1]*60+substr(a[2],1,length(a[2])-1) } printf "%.2f", s }' "$TIMES" >"$TIMES.cpu"; }
# the code a piece ran: the tree of src/ at HEAD, "+dirty" when src/ has uncommitted changes
code_id() { echo "$(git rev-parse --short=12 HEAD:src 2>/dev/null || echo unknown)$( [ -z "$(git status --porcelain -- src 2>/dev/null)" ] || echo +dirty)"; }
T0=; C0=
tic() { T0=$(date +%s.%N); cpu_now; C0=$(cat "$TIMES.cpu"); }
toc() { # game piece
  local w c
  cpu_now
  w=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'); c=$(awk -v a="$C0" -v b="$(cat "$TIMES.cpu")" 'BEGIN{printf "%.1f", b-a}')
  printf '{"piece":"%s","wallS":%s,"cpuS":%s,"at":"%s","code":"%s"}\n' "$2" "$w" "$c" "$(date -u +%FT%TZ)" "$(code_id)" >>"$OUT/$1/timings.jsonl"
  say "$2 ($1): ${w} s wall, ${c} s CPU"
}

arm_flags() { # arm gamma -> the lamer train flags of the arm
  case $1 in
    lamer) echo "--algorithm lamer --group $G --gamma-traj $2" ;;
    lamer-own) echo "--algorithm lamer --group $G --gamma-traj $2 --reflection-group own" ;;
    gigpo) echo "--algorithm gigpo --group $G" ;;
  esac
}
HELDOUT=(); [ "$HELDOUT_TASKS" -gt 0 ] && HELDOUT=(--heldout-tasks "$HELDOUT_TASKS" --heldout-every "$HELDOUT_EVERY" --heldout-seed "$HELDOUT_SEED" --heldout-sampling "$EVAL_SAMPLING")

# Train (or continue) one run to $ITER iterations, $COMMIT_EVERY iterations per `lamer train --resume`
# with COMMIT=1 (all at once otherwise), recording after each. A run with $ITER points is done
# when its data directory is there (its last version active, for the evals) or its evals are; a
# run restored from $RECORD without its data gets it back from its checkpoint copy (lamer train
# --resume registers it).
train() { # game arm seed
  local game=$1 arm=$2 seed=$3 dir="$OUT/$1/$2/seed-$3" rel="$1/$2/seed-$3" gamma n prev target chunk files flags
  case $game in minesweeper-*) gamma=$GAMMA_MS ;; *) gamma=$GAMMA_SOKO ;; esac
  read -r -a flags <<<"$(arm_flags "$arm" "$gamma")"
  n=$(points "$dir/learning-curve.json")
  if [ "$n" -ge "$ITER" ] && { [ -s "$dir/data/lamer.db" ] || evals_done "$game" "$arm" "$seed"; }; then
    say "train $game $arm seed $seed: done already"; return
  fi
  mkdir -p "$dir"
  chunk=$ITER; [ "$COMMIT" = 1 ] && chunk=$COMMIT_EVERY
  while :; do
    prev=$n
    target=$(( n + chunk < ITER ? n + chunk : ITER ))
    if [ "$target" -gt "$n" ]; then say "train $game $arm seed $seed: iterations $n..$((target - 1)) of $ITER"
    else say "train $game $arm seed $seed: $n iterations recorded; restoring its last version into $dir/data"; fi
    tic
    # training seeds: disjoint task ranges per seed (seed * 100000 + iteration * T + i), the same for both arms
    lamer train --env "$game" "${flags[@]}" --iterations "$target" --tasks-per-iter "$T" --resume \
      --lr "$LR" --seed $((seed * 100000)) --concurrency "$CONCURRENCY" "${AA[@]}" "${TRAIN_FLAGS[@]}" "${HELDOUT[@]}" --kl-every "$KL_EVERY" --quiet \
      --out "$dir" --data-dir "$dir/data" --base-model-dir "$BASE" >>"$LOG" 2>&1
    toc "$game" "train $arm seed $seed to $target"
    n=$(points "$dir/learning-curve.json")
    files=("$rel/learning-curve.json" "$rel/jobs" "$game/timings.jsonl")
    # the checkpoint every $CHECKPOINT_EVERY iterations and at the last
    CHECKPOINT=; { [ "$n" -ge "$ITER" ] || [ $((n / CHECKPOINT_EVERY)) -gt $((prev / CHECKPOINT_EVERY)) ]; } && CHECKPOINT=$rel
    record "$game $arm seed $seed: iteration $((n - 1)) of $ITER" "${files[@]}"
    CHECKPOINT=
    [ "$n" -lt "$ITER" ] || break
    [ "$n" -gt "$prev" ] || { say "train $game $arm seed $seed: no iteration added ($n of $ITER); see $LOG"; exit 1; }
  done
}
evals_done() { # game arm seed: every eval file of the run is there
  local f
  for f in "eval-$2-seed$3.json" $(case $2 in lamer*) echo "eval-$2-independent-seed$3.json" ;; esac); do [ -s "$OUT/$1/$f" ] || return 1; done
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

evaluate() { # game name data-dir extra-eval-flags... (a server over the data dir: its last trained version is active)
  local game=$1 name=$2 data=$3 rc=0 file; shift 3
  file="$OUT/$game/eval-$name.json"
  if [ -s "$file" ]; then say "eval $game $name: done already"; return; fi
  PORT=$((PORT + 1))
  tic
  LAMER_DATA_DIR="$data" LAMER_BASE_MODEL_DIR="$BASE" LAMER_PORT=$PORT LAMER_LOG_LEVEL=warn node_modules/.bin/tsx src/cli/index.ts serve \
    >"$OUT/$game/server-$name.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "$PORT" "$OUT/$game/server-$name.log" "$name"
  say "eval $game $name"
  # lamer eval exits 1 when some sessions ended with an error but still writes its report (the
  # errors are in it and in the log): keep going then. Without a report (e.g. its 3 s /healthz
  # check timed out on a loaded machine, which stops it before any session) it is tried again,
  # 3 times in all; then the run stops.
  local try
  for try in 1 2 3; do
    rc=0
    lamer eval --env "$game" --tasks "$EVAL_TASKS" --attempts 3 --concurrency "$CONCURRENCY" --seed 0 \
      "${AA[@]}" "${EVAL_FLAGS[@]}" --quiet --server "http://127.0.0.1:$PORT" --out "$file" "$@" >>"$LOG" 2>&1 || rc=$?
    { [ "$rc" = 0 ] || [ -s "$file" ]; } && break
    [ "$try" = 3 ] || { say "eval $game $name: exit $rc without a report (try $try of 3); again in 10 s"; sleep 10; }
  done
  kill "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=
  if [ "$rc" != 0 ]; then
    [ -s "$file" ] || { say "eval $game $name failed (exit $rc), no report: see $LOG"; exit 1; }
    say "eval $game $name: exit $rc (some sessions ended with errors; counted in the report, see $LOG)"
  fi
  toc "$game" "eval $name"
}
SERVER_PID=
trap '[ -z "$SERVER_PID" ] || kill "$SERVER_PID" 2>/dev/null || true' EXIT

for game in $GAMES; do
  mkdir -p "$OUT/$game"
  for seed in $SEEDS; do
    for arm in $ARMS; do
      train "$game" "$arm" "$seed"
      case $arm in
        lamer*)
          evaluate "$game" "$arm-seed$seed" "$OUT/$game/$arm/seed-$seed/data"
          # the same weights without memory: what memory itself adds (experiments/lamer-vs-gigpo-memory.ts)
          evaluate "$game" "$arm-independent-seed$seed" "$OUT/$game/$arm/seed-$seed/data" --independent-attempts ;;
        *) evaluate "$game" "$arm-seed$seed" "$OUT/$game/$arm/seed-$seed/data" --independent-attempts ;;
      esac
      # with the final checkpoint the evals scored
      CHECKPOINT="$game/$arm/seed-$seed"
      record "$game $arm seed $seed evaluated" "$game/$arm/seed-$seed/learning-curve.json" "$game/eval-$arm-seed$seed.json" \
        $(case $arm in lamer*) echo "$game/eval-$arm-independent-seed$seed.json" ;; esac) "$game/timings.jsonl"
      CHECKPOINT=
    done
  done
  [ "$FINAL" = 1 ] || continue
  # the common starting point, both ways
  evaluate "$game" sft-lamer-mode "$OUT/$game/sft-data"
  evaluate "$game" sft-independent "$OUT/$game/sft-data" --independent-attempts
  record "$game SFT start" "$game/eval-sft-lamer-mode.json" "$game/eval-sft-independent.json" "$game/timings.jsonl"
  say "report (games so far)"
  node_modules/.bin/tsx experiments/lamer-vs-gigpo-report.ts "$OUT" ${RESULTS:+--results "$RESULTS"} --curve-every $(( ITER > 20 ? ITER / 10 : 1 )) >>"$LOG"
  record "report after $game" report.md $(cd "$OUT" && ls curves-*.svg 2>/dev/null)
done
if [ "$FINAL" = 1 ]; then say "done: $OUT/report.md"; else say "runs of games '$GAMES' x seeds '$SEEDS' x arms '$ARMS' done (FINAL=0: no SFT evals, no report)"; fi
exit 0
}
