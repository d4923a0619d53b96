/**
 * What `lamer train --resume` reads and decides, without a server: the curve file's checks, the
 * settings that must match, the walk back to the newest iteration whose version can be served
 * (on the server, or as a checkpoint copy in the output folder, imported), and the checkpoint
 * copies kept after each iteration.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  jobFile, keepCheckpoint, pruneCheckpoints, pruneJobs, readCurve, resumeConflicts, resumeFrom, writeAtomic, writeJob, type CurveFile, type VersionAccess,
} from '../../src/cli/train-resume.js';
import type { CurvePoint } from '../../src/eval/experiment.js';
import { tmpDir } from '../helpers/index.js';

const point = (iteration: number, rolloutVersion: string, trainedVersion: string | null): CurvePoint => ({
  iteration, rolloutVersion, trainedVersion, jobId: `job_${iteration}`, jobStatus: trainedVersion ? 'succeeded' : 'failed', sessions: 4, meanReturn: 1,
  meanReturnFirstAttempt: 1, passAtK: { 1: 0.5 }, invalidActionRate: 0, loss: 0.1, entropy: 1, clipFrac: 0, groups: 2, zeroAdvantageGroups: 0, samples: 9,
  tokensTrained: 100, rolloutSeconds: 1, trainSeconds: 2, wallSeconds: 3 * (iteration + 1), rolloutErrors: 0,
});

/** A curve of `n` iterations: iteration k plays v<k> (v0 = base) and trains v<k+1>. */
const curveOf = (n: number): CurveFile => ({
  config: { env: 'minesweeper', algorithm: 'lamer', tasksPerIter: 2, group: 2, seed: 0, iterations: n },
  startVersion: 'base',
  heldOutStart: null,
  points: Array.from({ length: n }, (_, k) => point(k, k === 0 ? 'base' : `v${k}`, `v${k + 1}`)),
});

/** A VersionAccess over a set of versions, recording what it was asked to do. */
function fakeAccess(versions: string[], canImport: boolean) {
  const have = new Set(versions);
  const done: string[] = [];
  const access: VersionAccess = {
    has: async (v) => have.has(v),
    importCheckpoint: canImport ? async (v, dir) => { have.add(v); done.push(`import ${v} from ${path.basename(path.dirname(dir))}/${path.basename(dir)}`); } : null,
    activate: async (v) => { done.push(`activate ${v}`); },
  };
  return { access, done };
}

describe('readCurve and the job files', () => {
  it('readCurve reads what lamer train writes; no file is null', () => {
    const out = tmpDir('lamer-resume-');
    expect(readCurve(out)).toBeNull();
    writeAtomic(path.join(out, 'learning-curve.json'), JSON.stringify(curveOf(2)));
    expect(readCurve(out)!.points.map((p) => p.iteration)).toEqual([0, 1]);
    expect(existsSync(path.join(out, 'learning-curve.json.tmp'))).toBe(false);
  });

  it('one file per iteration under jobs/; pruneJobs removes those of an iteration and later', () => {
    const out = tmpDir('lamer-resume-');
    pruneJobs(out, 0); // no folder: nothing to do
    for (const k of [0, 1, 2, 10]) writeJob(out, k, { id: `job_${k}` } as never);
    expect(readdirSync(path.join(out, 'jobs')).sort()).toEqual(['iteration-0000.json', 'iteration-0001.json', 'iteration-0002.json', 'iteration-0010.json']);
    expect(JSON.parse(readFileSync(jobFile(out, 1), 'utf8'))).toEqual({ iteration: 1, job: { id: 'job_1' } });
    writeFileSync(path.join(out, 'jobs', 'notes.txt'), 'kept');
    pruneJobs(out, 2);
    expect(readdirSync(path.join(out, 'jobs')).sort()).toEqual(['iteration-0000.json', 'iteration-0001.json', 'notes.txt']);
  });

  it.each([
    ['not JSON', '{', /learning-curve\.json is not JSON/],
    ['no points', '{"config":{}}', /is not a learning curve \(no config and points\)/],
    ['points out of order', JSON.stringify({ config: {}, points: [point(1, 'base', 'v1')] }), /its points are not iterations 0\.\.0 in order/],
  ])('refuses a file that is %s, naming it', (_name, text, message) => {
    const out = tmpDir('lamer-resume-');
    writeFileSync(path.join(out, 'learning-curve.json'), text);
    expect(() => readCurve(out)).toThrow(message);
  });
});

describe('resumeConflicts', () => {
  const recorded = { env: 'minesweeper', params: { rows: 6, cols: 6, mines: 3 }, algorithm: 'lamer', tasksPerIter: 16, group: 8, seed: 0,
    sampling: { temperature: 1, topP: 1, topK: 0 }, availableActions: false, hyperparameters: { lr: 0.0001, gammaTraj: 0.9 }, iterations: 60,
    concurrency: 32, server: 'http://127.0.0.1:1111', klEvery: 1 };
  it('none when only iterations, concurrency, the server or the budget differ (key order does not matter)', () => {
    expect(resumeConflicts(recorded, {
      ...recorded, iterations: 120, concurrency: 8, server: 'http://127.0.0.1:2222', maxWallSeconds: 60,
      params: { mines: 3, cols: 6, rows: 6 }, hyperparameters: { gammaTraj: 0.9, lr: 0.0001 },
    } as never)).toEqual([]);
  });
  it('names every setting that changes what the run computes', () => {
    expect(resumeConflicts(recorded, { ...recorded, group: 4, hyperparameters: { lr: 0.0002, gammaTraj: 0.9 }, heldOut: { tasks: 32, every: 1, seed: 1000000, sampling: { temperature: 0.7, topP: 0.8, topK: 20 } } } as never)).toEqual([
      'group: 8 -> 4',
      'hyperparameters: {"gammaTraj":0.9,"lr":0.0001} -> {"gammaTraj":0.9,"lr":0.0002}',
      'heldOut: null -> {"every":1,"sampling":{"temperature":0.7,"topK":20,"topP":0.8},"seed":1000000,"tasks":32}',
    ]);
  });
});

describe('resumeFrom', () => {
  it('continues after the last iteration when the server has its version: activates it, keeps every point', async () => {
    const { access, done } = fakeAccess(['base', 'v1', 'v2', 'v3'], true);
    const r = await resumeFrom(curveOf(3), tmpDir('lamer-resume-'), access);
    expect(r.points.map((p) => p.iteration)).toEqual([0, 1, 2]);
    expect(r.notes).toEqual([]);
    expect(done).toEqual(['activate v3']);
  });

  it('imports the last iteration\'s checkpoint copy when the server does not have it (a new data directory)', async () => {
    const out = tmpDir('lamer-resume-');
    mkdirSync(path.join(out, 'checkpoint', 'v3'), { recursive: true });
    writeFileSync(path.join(out, 'checkpoint', 'v3', 'model.json'), '{}');
    const { access, done } = fakeAccess(['base'], true);
    const r = await resumeFrom(curveOf(3), out, access);
    expect(r.points).toHaveLength(3);
    expect(done).toEqual(['import v3 from checkpoint/v3', 'activate v3']);
    expect(r.notes).toEqual([`registered v3 (iteration 2) from ${path.join(out, 'checkpoint', 'v3')}`]);
  });

  it('walks back to the newest iteration it can continue and drops the later points', async () => {
    const out = tmpDir('lamer-resume-');
    const { access, done } = fakeAccess(['base', 'v1', 'v2'], true);
    const r = await resumeFrom(curveOf(4), out, access);
    expect(r.points.map((p) => p.iteration)).toEqual([0, 1]);
    expect(done).toEqual(['activate v2']);
    expect(r.notes).toEqual([`dropping iterations 2..3 of 4: the version iteration 3 trained is neither on the server nor in ${path.join(out, 'checkpoint')}; they run again with the same seeds`]);
  });

  it('an iteration whose job trained nothing leaves the version that played it', async () => {
    const c = curveOf(2);
    c.points[1] = point(1, 'v1', null);
    const { access, done } = fakeAccess(['base', 'v1'], false);
    expect((await resumeFrom(c, tmpDir('lamer-resume-'), access)).points).toHaveLength(2);
    expect(done).toEqual(['activate v1']);
  });

  it('with nothing to continue from (a --server without the versions), starts over from the start version', async () => {
    const out = tmpDir('lamer-resume-');
    mkdirSync(path.join(out, 'checkpoint', 'v2'), { recursive: true });
    writeFileSync(path.join(out, 'checkpoint', 'v2', 'model.json'), '{}');
    const { access, done } = fakeAccess(['base'], false); // no import without an in-process server
    const r = await resumeFrom(curveOf(2), out, access);
    expect(r.points).toEqual([]);
    expect(done).toEqual(['activate base']);
    expect(r.notes[0]).toMatch(/^dropping every iteration of 2: /);
  });
});

describe('keepCheckpoint and pruneCheckpoints', () => {
  it('copy a checkpoint folder into out/checkpoint/<version>, replacing an older copy; prune keeps one', () => {
    const root = tmpDir('lamer-resume-');
    const out = path.join(root, 'out');
    for (const v of ['v1', 'v2']) {
      mkdirSync(path.join(root, v), { recursive: true });
      writeFileSync(path.join(root, v, 'weights.bin'), v);
    }
    keepCheckpoint(out, 'v1', path.join(root, 'v1'));
    writeFileSync(path.join(root, 'v1', 'weights.bin'), 'v1 again');
    keepCheckpoint(out, 'v1', path.join(root, 'v1'));
    keepCheckpoint(out, 'v2', path.join(root, 'v2'));
    expect(readdirSync(path.join(out, 'checkpoint')).sort()).toEqual(['v1', 'v2']);
    expect(readFileSync(path.join(out, 'checkpoint', 'v1', 'weights.bin'), 'utf8')).toBe('v1 again');
    pruneCheckpoints(out, 'v2');
    expect(readdirSync(path.join(out, 'checkpoint'))).toEqual(['v2']);
    pruneCheckpoints(path.join(root, 'none'), 'v2'); // no folder: nothing to do
  });
});
