/**
 * What `lamer train` keeps in its output folder after every iteration, and `--resume`, which
 * continues from it (docs/training.md "Resuming a run").
 *
 * After iteration k the output folder holds, each file replaced whole (written aside, then renamed):
 * - `learning-curve.json`: the settings, the start version, its held-out figures and the points
 *   of iterations 0..k (src/eval/experiment.ts CurvePoint);
 * - `jobs/iteration-<k>.json` (k in 4 digits): `{iteration, job}`, iteration k's training job as the
 *   API answered it (its data counts and the metrics of every optimiser step), one file per
 *   iteration, never rewritten (a record under git grows by one file an iteration);
 * - `checkpoint/<version>/`: a copy of the checkpoint the iteration trained (the in-process server's
 *   only; a `--server` keeps its own), the folder of the previous iteration removed after the
 *   curve names the new one.
 *
 * `--resume` reads the curve, refuses other settings (`resumeConflicts`), and walks back from its
 * last point to the newest whose version the server can serve: registered there, or (in-process)
 * in `checkpoint/`, from where it is copied into the data directory and registered
 * (`ModelRegistry.registerCheckpoint`). Later points are dropped (their iterations run again, with
 * the same seeds); that version is activated, and the run goes on after it.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { CurvePoint, ExperimentOptions, JobView } from '../eval/experiment.js';
import type { HeldOutFigures } from '../eval/experiment-probes.js';
import { Http, HttpError } from '../eval/http.js';

/** `learning-curve.json` as `lamer train` writes it. */
export interface CurveFile {
  config: Record<string, unknown>;
  startVersion?: string;
  heldOutStart?: HeldOutFigures | null;
  startedAt?: string;
  points: CurvePoint[];
  wallSeconds?: number;
}

/** The file of iteration `k`'s job under `out`. */
export const jobFile = (out: string, k: number): string => path.join(out, 'jobs', `iteration-${String(k).padStart(4, '0')}.json`);

/** Write iteration `k`'s job as `jobs/iteration-<k>.json` (whole). */
export function writeJob(out: string, k: number, job: JobView): void {
  mkdirSync(path.join(out, 'jobs'), { recursive: true });
  // one line: a run of 60 iterations at T=16 G=8 keeps 60 of these (about 100 optimiser steps each) in git
  writeAtomic(jobFile(out, k), JSON.stringify({ iteration: k, job }) + '\n');
}

/** Remove the job files of iterations `from` and later (iterations a resumed run plays again). */
export function pruneJobs(out: string, from: number): void {
  const dir = path.join(out, 'jobs');
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const m = /^iteration-(\d+)\.json$/.exec(name);
    if (m && Number(m[1]) >= from) rmSync(path.join(dir, name), { force: true });
  }
}

/** Write `file` whole: to `<file>.tmp`, then renamed over it (a crash leaves the old file or the new one). */
export function writeAtomic(file: string, text: string): void {
  writeFileSync(file + '.tmp', text);
  renameSync(file + '.tmp', file);
}

/** The curve in `out`, or null when there is none. @throws Error naming the file when it is not a curve. */
export function readCurve(out: string): CurveFile | null {
  const file = path.join(out, 'learning-curve.json');
  if (!existsSync(file)) return null;
  let c: CurveFile;
  try {
    c = JSON.parse(readFileSync(file, 'utf8')) as CurveFile;
  } catch (e) {
    throw new Error(`${file} is not JSON: ${(e as Error).message}`);
  }
  if (!c || typeof c !== 'object' || !Array.isArray(c.points) || typeof c.config !== 'object' || c.config === null) {
    throw new Error(`${file} is not a learning curve (no config and points)`);
  }
  if (c.points.some((p, i) => p?.iteration !== i)) {
    throw new Error(`${file}: its points are not iterations 0..${c.points.length - 1} in order`);
  }
  return c;
}

/** Settings that change what a run computes; the others (iterations, the server, concurrency, the wall-clock budget) may differ. */
const RESULT_SETTINGS = [
  'env', 'params', 'algorithm', 'tasksPerIter', 'group', 'seed', 'sampling', 'availableActions', 'hyperparameters', 'maxSteps', 'heldOut', 'klEvery',
] as const;

/** A JSON value with object keys sorted, for comparing settings; undefined as null. */
function canonical(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).filter((k) => o[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * The result-changing settings in which `now` differs from the curve's `recorded` ones, as
 * "name: recorded -> now" (empty when the run may be resumed with `now`).
 */
export function resumeConflicts(recorded: Record<string, unknown>, now: Partial<ExperimentOptions>): string[] {
  const out: string[] = [];
  for (const k of RESULT_SETTINGS) {
    const a = canonical(recorded[k]);
    const b = canonical((now as Record<string, unknown>)[k]);
    if (a !== b) out.push(`${k}: ${a} -> ${b}`);
  }
  return out;
}

/** The version a point leaves active: the one its job trained, else the one that played it. */
export const versionAfter = (p: CurvePoint): string => p.trainedVersion ?? p.rolloutVersion;

/** How `resumeFrom` reaches the server's versions. */
export interface VersionAccess {
  /** Whether the server has `version`. */
  has(version: string): Promise<boolean>;
  /** Copy `<out>/checkpoint/<version>` into the server's data and register it (in-process only); null when not possible. */
  importCheckpoint: ((version: string, dir: string) => Promise<void>) | null;
  activate(version: string): Promise<void>;
}

/** The HTTP side of VersionAccess: GET /v1/models/{v} (404: absent), POST /v1/models/{v}/activate. */
export function httpVersions(server: string, apiKey: string | undefined): Pick<VersionAccess, 'has' | 'activate'> {
  const http = new Http(server, apiKey, 300_000);
  return {
    async has(v) {
      try {
        await http.get(`/v1/models/${encodeURIComponent(v)}`);
        return true;
      } catch (e) {
        if (e instanceof HttpError && e.status === 404) return false;
        throw e;
      }
    },
    async activate(v) {
      await http.post(`/v1/models/${encodeURIComponent(v)}/activate`, undefined, { idempotent: true });
    },
  };
}

/**
 * Bring the server to the newest point of `curve` it can continue from (module doc) and activate
 * that point's version (the start version when no point can be continued).
 * @returns the points kept and the lines said about it.
 * @throws HttpError when the server refuses a look-up or the activation; errors of the import.
 */
export async function resumeFrom(curve: CurveFile, out: string, access: VersionAccess): Promise<{ points: CurvePoint[]; notes: string[] }> {
  const notes: string[] = [];
  const points = curve.points;
  let k = points.length - 1;
  for (; k >= 0; k--) {
    const v = versionAfter(points[k]!);
    if (await access.has(v)) break;
    const dir = path.join(out, 'checkpoint', v);
    if (access.importCheckpoint && existsSync(path.join(dir, 'model.json'))) {
      await access.importCheckpoint(v, dir);
      notes.push(`registered ${v} (iteration ${k}) from ${dir}`);
      break;
    }
  }
  if (k < points.length - 1) {
    const what = k < 0 ? 'every iteration' : `iterations ${k + 1}..${points.length - 1}`;
    const where = `neither on the server nor in ${path.join(out, 'checkpoint')}`;
    notes.push(`dropping ${what} of ${points.length}: the version iteration ${points.length - 1} trained is ${where}; they run again with the same seeds`);
  }
  const kept = points.slice(0, k + 1);
  const target = k >= 0 ? versionAfter(points[k]!) : (curve.startVersion ?? points[0]?.rolloutVersion);
  if (target !== undefined) await access.activate(target);
  return { points: kept, notes };
}

/**
 * Keep a copy of the checkpoint `version` (folder `from`) as `<out>/checkpoint/<version>/`:
 * copied aside, then renamed. @returns the folder.
 */
export function keepCheckpoint(out: string, version: string, from: string): string {
  const root = path.join(out, 'checkpoint');
  const dest = path.join(root, version);
  const tmp = `${dest}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  cpSync(from, tmp, { recursive: true });
  rmSync(dest, { recursive: true, force: true });
  renameSync(tmp, dest);
  return dest;
}

/** Remove every folder of `<out>/checkpoint/` but `keep`'s. */
export function pruneCheckpoints(out: string, keep: string): void {
  const root = path.join(out, 'checkpoint');
  if (!existsSync(root)) return;
  for (const name of readdirSync(root)) if (name !== keep) rmSync(path.join(root, name), { recursive: true, force: true });
}
