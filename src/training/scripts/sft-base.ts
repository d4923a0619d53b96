/**
 * `npm run model:sft-base [-- --out models/sft] [--tasks 160] [--epochs 2] ...`: the SFT warm start
 * (the shipped `models/base` checkpoint), reproducible end to end:
 *   1. the random initialisation is written again with `npm run model:init` (cpu backend, seed
 *      1337: the same bytes as the shipped random-init base) into a temporary folder;
 *   2. solver demonstrations are generated with `lamer demos` (MineSweeper only, board from
 *      --params, default 4x4 with 2 mines: the board of the experiment in docs/RESULTS.md; seeds
 *      from the training range, so no held-out eval task is seen);
 *   3. an `sft` training job (src/training/job.ts runTrainingJob, the same runner the server's
 *      jobs use) trains on them from the random init, and the checkpoint is written to --out
 *      (which must not exist or be empty), with the data, commands and hyperparameters in its
 *      metadata and a `sft-demos.jsonl` copy of the demonstrations beside it.
 * Progress: one JSON line per iteration on stderr. Units: seconds; tokens are byte tokens.
 */
import { spawnSync } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { readCheckpointMetadata } from '../../model/checkpoint.js';
import { buildSftSamples, parseDemoJsonl } from '../data.js';
import { createModelIO } from '../gpt-adapter.js';
import { runTrainingJob } from '../job.js';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..');

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: 'models/sft' },
    env: { type: 'string', default: 'minesweeper' },
    params: { type: 'string', default: '{"rows":4,"cols":4,"mines":2}' },
    tasks: { type: 'string', default: '160' },
    'fail-rate': { type: 'string', default: '0.5' },
    seed: { type: 'string', default: '0' },
    epochs: { type: 'string', default: '2' },
    lr: { type: 'string', default: '1e-3' },
    minibatch: { type: 'string', default: '16' },
    backend: { type: 'string', default: 'wasm' },
  },
});

function run(cmd: string, args: string[]): void {
  process.stderr.write(`$ ${cmd} ${args.join(' ')}\n`);
  const r = spawnSync(cmd, args, { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}`);
}

async function main(): Promise<void> {
  const out = path.resolve(values.out!);
  if (existsSync(out) && (await readdir(out)).length > 0) throw new Error(`${out} exists and is not empty`);
  const work = await mkdtemp(path.join(tmpdir(), 'lamer-sft-base-'));
  try {
    const initDir = path.join(work, 'init');
    run('npx', ['tsx', 'src/model/scripts/init-base.ts', initDir]);
    const demosPath = path.join(work, 'demos.jsonl');
    const demoArgs = ['--env', values.env!, '--tasks', values.tasks!, '--seed', values.seed!, '--fail-rate', values['fail-rate']!, '--params', values.params!, '--out', demosPath];
    run('npx', ['tsx', 'src/cli/index.ts', 'demos', ...demoArgs]);
    const demos = parseDemoJsonl(await readFile(demosPath, 'utf8'));
    const { config } = await readCheckpointMetadata(initDir);
    const { samples, stats } = buildSftSamples(demos, { blockSize: config.block_size });
    const promptTokens = samples.reduce((a, s) => a + s.promptTokenIds.length, 0);
    process.stderr.write(JSON.stringify({ demos: demos.length, samples: samples.length, reflections: samples.filter((s) => s.kind === 'reflection').length, promptTokens, outputTokens: stats.outputTokens }) + '\n');
    const hyper = { lr: Number(values.lr), epochs: Number(values.epochs), minibatchSize: Number(values.minibatch), seed: 1 };
    const io = await createModelIO({ backend: values.backend as 'wasm' | 'cpu' });
    const res = await runTrainingJob(
      {
        algorithm: 'sft', baseCheckpointDir: initDir, outputDir: out, hyper, dataStats: stats,
        meta: {
          version: 'base', source: 'sft', parent: 'random-init (npm run model:init, seed 1337)', script: 'npm run model:sft-base',
          demos: { command: `lamer demos ${demoArgs.slice(0, -2).join(' ')}`, sessions: demos.length, samples: samples.length },
          hyper,
        },
      },
      samples,
      {
        io,
        onProgress: (p) => process.stderr.write(JSON.stringify({ iteration: p.iteration, of: p.totalIterations, loss: +p.metrics.loss.toFixed(4), tokensPerSec: Math.round(p.metrics.tokensPerSec), seconds: +p.metrics.seconds.toFixed(2) }) + '\n'),
      },
    );
    await copyFile(demosPath, path.join(out, 'sft-demos.jsonl'));
    const tokens = res.metrics.reduce((a, m) => a + m.tokens, 0);
    const first = res.metrics.slice(0, 5).reduce((a, m) => a + m.loss, 0) / Math.min(5, res.metrics.length);
    const last = res.metrics.slice(-5).reduce((a, m) => a + m.loss, 0) / Math.min(5, res.metrics.length);
    console.log(JSON.stringify({ out, iterations: res.iterations, samples: res.samples, tokens, seconds: +res.seconds.toFixed(1), tokensPerSec: Math.round(tokens / res.seconds), lossFirst5: +first.toFixed(4), lossLast5: +last.toFixed(4) }));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
