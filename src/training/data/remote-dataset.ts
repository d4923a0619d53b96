/**
 * The LaMer training batch of a remote model version, as a dataset for an external trainer (TRL,
 * verl, OpenRLHF): a training job whose base version is served by a remote OpenAI-compatible
 * server cannot update its weights here, so it computes exactly what a local job would (returns
 * with gamma_step / gamma_traj, advantages per algorithm, zero-advantage groups kept;
 * docs/method.md#advantages) and writes them with what the remote engine recorded. Format: docs/remote-engines.md
 * "Training data for remote versions".
 *
 * Files, in `<dataDir>/datasets/<jobId>/`:
 * - `batch.jsonl`: one line per kept turn (action or reflection), {@link RemoteBatchLine};
 * - `meta.json`: job id, algorithm, base version and its remote server (no API key), return and
 *   advantage settings, data counts.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ReflectionGroup, StepKind } from '../../domain.js';
import { ensureDir } from '../../ensure-dir.js';
import type { AsyncTrainingData } from '../../db/async-repositories.js';
import type { StepOutput } from '../../db/training-data.js';
import { buildRlSamples, type DataStats, type RlAlgorithm, type StepRecord, type TurnScore } from './data.js';
import type { ReturnConfig } from '../maths/returns.js';
import { selectTrainingRecords, type DataFilter } from './select.js';

/** One turn of the batch. Token arrays are null where the remote server did not return them. */
export interface RemoteBatchLine {
  schemaVersion: 1;
  sessionId: string;
  taskId: string;
  attempt: number;
  step: number;
  kind: StepKind;
  modelVersion: string;
  /** Chat messages sent (system: instructions; user: the LaMer prompt), or null for a turn of a local version. */
  messages: Array<{ role: string; content: string }> | null;
  /** The model's full text. */
  output: string;
  promptTokenIds: number[] | null;
  outputTokenIds: number[] | null;
  /** Logprobs of the output tokens as sampled (the PPO "old" logprobs), `[outLen]`, or null. */
  oldLogprobs: number[] | null;
  /** Per-turn advantage (the same for every token of the turn). */
  advantage: number;
  /** Cross-episode return G of the turn. */
  return: number;
  /** Sampling of the call (temperature, topP, topK, seed, maxTokens), when recorded. */
  sampling: Record<string, unknown> | null;
  /** A turn of the session's OpenAI-compatible endpoint: the `tools`, `tool_choice`,
   *  `parallel_tool_calls` and `response_format` the agent sent (passed to the remote server as
   *  sent); null for other turns or when none was sent. */
  passthrough: Record<string, unknown> | null;
  /** A turn of the session's OpenAI-compatible endpoint: the answer's tool calls as the remote
   *  server returned them (`output` is then '' when the answer was only tool calls); else null. */
  toolCalls: unknown[] | null;
}

/** What a batch line reads from a step's remote engine record (src/policy/engine.ts GenerationRecord). */
type EngineRecord = { messages?: RemoteBatchLine['messages']; sampling?: Record<string, unknown>; passthrough?: Record<string, unknown> };

export interface RemoteBatchOptions {
  algorithm: RlAlgorithm;
  data: DataFilter;
  returns: ReturnConfig;
  invalidPenalty?: number;
  stepCoef?: number;
  reflectionGroup?: ReflectionGroup;
}

/**
 * Builds the batch: training records of the filter, turns without returned token ids included
 * (their advantages need only rewards and observations), advantages as for a local job.
 * @returns the lines, the data counts and the scores to write back to the steps.
 */
export async function buildRemoteBatch(
  data: AsyncTrainingData,
  opts: RemoteBatchOptions,
): Promise<{ lines: RemoteBatchLine[]; stats: DataStats; scores: TurnScore[] }> {
  const records = await selectTrainingRecords(data, opts.data);
  const key = (s: string, a: number, t: number, k: string) => `${s}\u0000${a}\u0000${t}\u0000${k}`;
  const extra = new Map<string, StepOutput>();
  const ids = [...new Set(records.map((r) => r.sessionId))];
  for (const r of await data.stepOutputs(ids)) extra.set(key(r.sessionId, r.attempt, r.step, r.kind), r);
  // A model turn whose server returned no token ids still is a turn: give it one placeholder token
  // so that the advantage computation keeps it; the line reports the arrays as null.
  const placeholder = new Set<string>();
  const filled: StepRecord[] = records.map((r) => {
    const e = extra.get(key(r.sessionId, r.attempt, r.step, r.kind));
    if (e?.output === null || e?.output === undefined || (r.outputTokenIds && r.outputTokenIds.length > 0 && r.logprobs && r.promptTokenIds)) return r;
    placeholder.add(key(r.sessionId, r.attempt, r.step, r.kind));
    return { ...r, promptTokenIds: r.promptTokenIds ?? [], outputTokenIds: [0], logprobs: [0] };
  });
  const built = buildRlSamples(filled, {
    algorithm: opts.algorithm, returns: opts.returns, invalidPenalty: opts.invalidPenalty, stepCoef: opts.stepCoef, reflectionGroup: opts.reflectionGroup,
  });
  const byKey = new Map(records.map((r) => [key(r.sessionId, r.attempt, r.step, r.kind), r]));
  const lines = built.samples.map((s): RemoteBatchLine => {
    const k = key(s.sessionId, s.attempt, s.step, s.kind);
    const e = extra.get(k);
    const rec = e?.engineRecord as EngineRecord | null | undefined;
    const toolCalls = (e?.turn as { toolCalls?: unknown[] | null } | null | undefined)?.toolCalls;
    const ph = placeholder.has(k);
    const orig = byKey.get(k)!;
    return {
      schemaVersion: 1,
      sessionId: s.sessionId,
      taskId: s.taskId,
      attempt: s.attempt,
      step: s.step,
      kind: s.kind,
      modelVersion: orig.modelVersion,
      messages: rec?.messages ?? null,
      output: e?.output ?? '',
      promptTokenIds: ph ? orig.promptTokenIds : s.promptTokenIds,
      outputTokenIds: ph ? orig.outputTokenIds : s.outputTokenIds,
      oldLogprobs: ph ? orig.logprobs : s.oldLogprobs,
      advantage: s.advantage,
      return: s.return,
      sampling: rec?.sampling ?? null,
      passthrough: rec?.passthrough ?? null,
      toolCalls: toolCalls && toolCalls.length > 0 ? toolCalls : null,
    };
  });
  return { lines, stats: built.stats, scores: built.scores };
}

/**
 * Writes `batch.jsonl` and `meta.json` into `dir` (created).
 * @returns the path of `batch.jsonl`.
 */
export async function writeRemoteBatch(dir: string, lines: readonly RemoteBatchLine[], meta: Record<string, unknown>): Promise<string> {
  await ensureDir(dir);
  const file = path.join(dir, 'batch.jsonl');
  await writeFile(file, lines.map((l) => JSON.stringify(l)).join('\n') + (lines.length > 0 ? '\n' : ''));
  await writeFile(path.join(dir, 'meta.json'), JSON.stringify({ schemaVersion: 1, ...meta }, null, 2) + '\n');
  return file;
}
