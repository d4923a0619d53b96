// Replays every attempt of a Sokoban eval:base report (eval:base --reports) from its task seed with
// the game's own code (src/envs/sokoban.ts) and writes one JSON line per attempt: how it ended,
// and for an attempt that ended dead (the env ends it at the push that leaves the puzzle
// unsolvable) that push: the box's cell before it (row, col, 0-based as observations number them)
// and the direction, with the final box cells. okReplay says whether the replay gives the reported
// return, success, end and invalid count. Read by same-push.py.
// usage: npx tsx dead-pushes.mts REPORT.json > OUT.jsonl
import { readFileSync } from 'node:fs';
import { makeEnv } from '../../../src/envs/index.js';
import { SokobanEnv } from '../../../src/envs/sokoban.js';

const rep = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as {
  sessions: Array<{ taskId: string; trial: number; attempts: Array<{ attempt: number; success: boolean; return: number; invalidActions: number; endReason: string; trajectory: string[] }> }>;
};
for (const s of rep.sessions) {
  const [envName, seedText] = s.taskId.split(':seed=');
  const env = makeEnv(envName!);
  if (!(env instanceof SokobanEnv)) throw new Error(`${s.taskId}: not a Sokoban task`);
  for (const a of s.attempts) {
    env.reset(Number(seedText));
    let ret = 0, inv = 0, success = false, done = false;
    for (const act of a.trajectory) {
      if (done) break;
      const r = env.step(act);
      ret += r.reward;
      if (r.invalidAction) inv++;
      done = r.done;
      success = r.success;
    }
    const dead = done && !success;
    const d = dead ? env.lastDead : null;
    const cols = env.params.cols;
    const push = d ? { row: Math.floor(d.from / cols), col: d.from % cols, move: d.move } : null;
    const okReplay = Math.abs(ret - a.return) < 1e-6 && success === a.success && (a.endReason === 'done') === done && inv === a.invalidActions;
    console.log(JSON.stringify({
      taskId: s.taskId, trial: s.trial, attempt: a.attempt, success, endReason: a.endReason, dead, push, boxes: dead ? env.state.boxes : null, okReplay,
    }));
  }
}
