/**
 * A record, not a benchmark: where in a Sokoban answer the invalid moves fall, from an eval report
 * (`npm run eval:base -- --reports DIR` writes `sokoban-6x6-2-lamer.json`).
 * `npx tsx experiments/results/base-run-f/sokoban-invalid-moves.ts REPORT.json`
 *
 * Replays every attempt's answers in the env from the task's initial state, and beside it the moves
 * one by one (the env's rules: a move that does not move is a no-op, the turn's other moves still
 * apply; a turn stops at a push that solves the puzzle or leaves it dead), and counts the answers
 * the env flags invalid and, per move position 1-3, the no-op moves; the two counts of answers
 * must agree (checked).
 *
 * Measured 2026-12-02 (row (a), 128 tasks): models/base 377 of 1,099 answers invalid, no-op moves
 * at positions 1 / 2 / 3: 150 / 203 / 168; run D 465 of 1,193, 172 / 194 / 288.
 */
import { readFileSync } from 'node:fs';
import { applyMove, parseMoves, parseSokoban, SokobanEnv } from '../../../src/envs/sokoban.js';
import { makeEnv } from '../../../src/envs/index.js';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: npx tsx experiments/results/base-run-f/sokoban-invalid-moves.ts REPORT.json\n');
  process.exit(2);
}
const report = JSON.parse(readFileSync(file, 'utf8')) as { env: string; sessions: Array<{ taskId: string; attempts: Array<{ trajectory: string[] }> }> };
const perPosition = [0, 0, 0];
let answers = 0, withNoOp = 0, flagged = 0;
for (const s of report.sessions) {
  const seed = Number(s.taskId.split('seed=')[1]);
  for (const a of s.attempts) {
    const env = makeEnv(report.env) as SokobanEnv;
    let state = parseSokoban(env.reset(seed).observation);
    for (const answer of a.trajectory) {
      answers++;
      const moves = parseMoves(answer);
      let bad = moves.length === 0;
      for (const [j, m] of moves.entries()) {
        const o = applyMove(state, m);
        if (!o.moved) {
          perPosition[j]!++;
          bad = true;
          continue;
        }
        state = o.state;
        if (o.push && (state.boxes.every((b) => state.target[b]) || env.isDead(state))) break;
      }
      if (bad) withNoOp++;
      const r = env.step(answer);
      if (r.invalidAction) flagged++;
      if (r.done) break;
    }
  }
}
if (flagged !== withNoOp) throw new Error(`replay disagrees with the env: ${withNoOp} answers with a no-op, the env flagged ${flagged}`);
console.log(JSON.stringify({ report: file, answers, invalid: withNoOp, noOpAtMovePosition: perPosition }));
