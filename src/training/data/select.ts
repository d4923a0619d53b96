/**
 * Reading training data from the database and writing computed returns/advantages back
 * (docs/protocol.md "List, close, trajectory, memory, stats": a session's trajectory shows returns
 * and advantages once computed).
 *
 * A job trains on recorded sessions with `mode = 'train'` and `status = 'completed'`, optionally
 * filtered by creation time, env label, task ids and the model version the session pinned.
 */
import type { AsyncTrainingData } from '../../db/async-repositories.js';
import type { SessionRow, StepRow } from '../../db/schema.js';
import type { SamplerSettings, StepRecord, TurnScore } from './data.js';

export interface DataFilter {
  /** Sessions created at or after this time, ms since the Unix epoch. */
  since?: number;
  env?: string;
  taskIds?: string[];
  modelVersion?: string;
  /** Cap on sessions, newest first. */
  maxSessions?: number;
}

/** Sampler settings from a stored sampling object (missing keys: temperature 1, topP 1, topK 0); null for none. */
function samplerOf(stored: unknown): SamplerSettings | null {
  if (stored === null || stored === undefined || typeof stored !== 'object') return null;
  const s = stored as Partial<SamplerSettings>;
  return { temperature: s.temperature ?? 1, topP: s.topP ?? 1, topK: s.topK ?? 0 };
}

/**
 * Step records of the completed training sessions matching `filter`, ordered by task id, the
 * session's sampling seed (sessions without one after those with one), creation time and session
 * id, then attempt, step and kind (action before reflection).
 *
 * Each record's `sampling` is the sampler that produced its output: a turn of the session's
 * OpenAI-compatible endpoint carries its own (`turn.sampling`: the request's temperature, top_p and
 * top_k over the session's, src/agent/turns.ts turnSampling), every other record its session's.
 * The job recomputes the behaviour policy from it (samples.ts behaviourOf), so a turn the agent
 * sampled at temperature 0.5 is not trained as if sampled at the session's 1.
 *
 * The order does not depend on when concurrent rollouts happened to start: session ids are
 * time-ordered, so ordering by id alone made the order of the job's samples (and with it the
 * seeded minibatch shuffle and the trained weights) differ between two runs of the same seeded
 * rollouts.
 */
export async function selectTrainingRecords(data: AsyncTrainingData, filter: DataFilter = {}): Promise<StepRecord[]> {
  const chosen = chooseTrainingSessions(await data.completedTrainSessions(filter), filter);
  if (chosen.length === 0) return [];
  return trainingRecordsOf(chosen, await data.stepRowsOf(chosen.map((r) => r.id)));
}

/** A completed training session as the selection reads it. */
type ChosenSession = Pick<SessionRow, 'id' | 'taskId' | 'createdAt' | 'sampling'>;

/**
 * The sessions a selection trains on, in the order of their records (see selectTrainingRecords):
 * the newest `filter.maxSessions` when set, then by task id, seed, creation time and id.
 */
export function chooseTrainingSessions(found: readonly ChosenSession[], filter: DataFilter = {}): ChosenSession[] {
  let ids = [...found];
  if (filter.maxSessions !== undefined) {
    ids = ids.sort((a, b) => b.createdAt - a.createdAt).slice(0, filter.maxSessions);
  }
  const seedOf = (s: unknown) => {
    const v = (s as { seed?: unknown } | null)?.seed;
    return typeof v === 'number' && Number.isFinite(v) ? v : Number.POSITIVE_INFINITY;
  };
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return ids.sort((a, b) => cmp(a.taskId, b.taskId) || seedOf(a.sampling) - seedOf(b.sampling) || a.createdAt - b.createdAt || cmp(a.id, b.id));
}

/**
 * The step records of `chosen` (chooseTrainingSessions' order) from their step rows `rows`, as
 * the store orders them: (session id, attempt, step, kind).
 */
export function trainingRecordsOf(chosen: readonly ChosenSession[], rows: readonly StepRow[]): StepRecord[] {
  const taskOf = new Map(chosen.map((r) => [r.id, r.taskId]));
  const samplingOf = new Map(chosen.map((r) => [r.id, samplerOf(r.sampling)]));
  const rank = new Map(chosen.map((r, i) => [r.id, i]));
  const out: StepRecord[] = [];
  // the stable sort below keeps the store's order within a session and puts sessions in rank order
  for (const r of rows) {
    out.push({
      sessionId: r.sessionId, taskId: taskOf.get(r.sessionId)!, attempt: r.attempt, step: r.step, kind: r.kind,
      observation: r.observation, reward: r.reward, done: r.done, success: r.success, invalidAction: r.invalidAction,
      promptTokenIds: r.promptTokenIds ?? null, outputTokenIds: r.outputTokenIds ?? null, logprobs: r.logprobs ?? null,
      modelVersion: r.modelVersion, availableActions: r.availableActions ?? null,
      sampling: samplerOf((r.turn as { sampling?: unknown } | null)?.sampling) ?? samplingOf.get(r.sessionId) ?? null,
    });
  }
  return out.sort((a, b) => rank.get(a.sessionId)! - rank.get(b.sessionId)!);
}

/**
 * The task ids of the sessions a job with data filter `filter` would train on now (the promotion
 * gate checks that its tasks are not among them): those of chooseTrainingSessions, each once.
 */
export async function trainingTaskIds(data: AsyncTrainingData, filter: DataFilter = {}): Promise<string[]> {
  return [...new Set(chooseTrainingSessions(await data.completedTrainSessions(filter), filter).map((r) => r.taskId))];
}

/** Store each turn's return and advantage on its step row (dropped turns too, with advantage 0). */
export function writeTurnScores(data: AsyncTrainingData, scores: readonly TurnScore[]): Promise<void> {
  return data.writeStepScores(scores);
}
