/**
 * A training job's data (step 1 and 2 of ./job-run.ts): the samples a local job trains on, RL
 * from completed training sessions (src/training/data/select.ts filter) with their returns and
 * advantages written back to the step rows, SFT from a demonstration JSONL file; and, for a job on
 * a remote base version, the LaMer training batch written for an external trainer
 * (src/training/data/remote-dataset.ts). Returns and advantages follow docs/method.md.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { AsyncRepositories } from '../../db/async-repositories.js';
import type { ModelRow } from '../../db/schema.js';
import { checkpointText, readCheckpointMetadata } from '../../model/checkpoint.js';
import type { PromptFormat } from '../../model/prompt-format.js';
import type { Tokenizer } from '../../model/tokenizers.js';
import { buildRlSamples, buildSftSamples, parseDemoJsonl, type DataStats, type TrainingSample } from '../data/data.js';
import { buildRemoteBatch, writeRemoteBatch } from '../data/remote-dataset.js';
import { selectTrainingRecords, writeTurnScores } from '../data/select.js';
import { DEFAULT_RETURNS } from '../maths/returns.js';
import { JobRequestError, type CreateJobRequest } from './job-request.js';

/** A job's samples, their counts and the task ids they come from. */
export interface PreparedData {
  samples: TrainingSample[];
  stats: DataStats;
  taskIds: string[];
}

/**
 * The job's samples, their counts and the task ids they come from (the gate checks its tasks are
 * not among them), for a local base version whose checkpoint is `checkpointDir`. RL turn scores are
 * written back to the step rows.
 * @throws the demos file's read or parse error (SFT); DatabaseError when the store refuses.
 */
export async function prepareJobData(
  repos: Pick<AsyncRepositories, 'models' | 'trainingData'>, req: CreateJobRequest, checkpointDir: string,
): Promise<PreparedData> {
  const h = req.hyper ?? {};
  if (req.algorithm === 'sft') {
    const demos = parseDemoJsonl(await readFile(req.demosPath!, 'utf8'));
    const blockSize = await checkpointBlockSize(checkpointDir);
    const built = buildSftSamples(demos, { blockSize, pack: h.pack ?? true, ...(await checkpointTextOf(checkpointDir)) });
    return { ...built, taskIds: [...new Set(demos.map((d) => d.taskId))] };
  }
  // Sessions of remote versions hold another model's token ids: never train the local model on them.
  const remote = new Set(await repos.models.remoteVersions());
  const records = (await selectTrainingRecords(repos.trainingData, req.data ?? {})).filter((r) => !remote.has(r.modelVersion));
  const built = buildRlSamples(records, {
    algorithm: req.algorithm,
    returns: { gammaStep: h.gammaStep ?? DEFAULT_RETURNS.gammaStep, gammaTraj: h.gammaTraj ?? DEFAULT_RETURNS.gammaTraj, mode: h.returnMode ?? DEFAULT_RETURNS.mode },
    invalidPenalty: h.invalidPenalty,
    stepCoef: h.stepCoef,
    reflectionGroup: h.reflectionGroup,
    // each attempt's acting turns, then its reflection, in one sample where the served prompts
    // extend each other (the job unpacks any that do not fit the loaded model's block)
    pack: h.pack ?? true,
    blockSize: await checkpointBlockSize(checkpointDir),
    tokenizer: (await checkpointTextOf(checkpointDir)).tokenizer,
  });
  await writeTurnScores(repos.trainingData, built.scores);
  return { ...built, taskIds: [...new Set(records.map((r) => r.taskId))] };
}

/** Where a remote job's training batch was written: the `batch.jsonl` path, its line count and the data counts. */
export interface RemoteJobBatch {
  file: string;
  samples: number;
  stats: DataStats;
}

/**
 * A job on a remote base version: its weights live elsewhere, so the job writes the LaMer
 * training batch (token ids, old logprobs, returns, advantages) to `<dataDir>/datasets/<jobId>/`
 * for an external trainer, from sessions of that version unless the job's data filter names
 * another; turn scores are written back to the step rows. The base's API key is not written.
 * @throws JobRequestError for an SFT job (nothing to train here) or a batch without samples.
 */
export async function writeRemoteJobBatch(
  trainingData: AsyncRepositories['trainingData'], dataDir: string, id: string, req: CreateJobRequest, base: ModelRow,
): Promise<RemoteJobBatch> {
  if (req.algorithm === 'sft') throw new JobRequestError(`base version '${base.version}' is remote: SFT demonstrations are trained elsewhere from the demos file itself`);
  const h = req.hyper ?? {};
  const returns = { gammaStep: h.gammaStep ?? DEFAULT_RETURNS.gammaStep, gammaTraj: h.gammaTraj ?? DEFAULT_RETURNS.gammaTraj, mode: h.returnMode ?? DEFAULT_RETURNS.mode };
  const { lines, stats, scores } = await buildRemoteBatch(trainingData, {
    algorithm: req.algorithm, data: { modelVersion: base.version, ...(req.data ?? {}) }, returns,
    invalidPenalty: h.invalidPenalty, stepCoef: h.stepCoef, reflectionGroup: h.reflectionGroup,
  });
  if (lines.length === 0) throw new JobRequestError(`no training samples: ${stats.sessions} sessions, ${stats.turns} turns with a model output, ${stats.droppedTurns} dropped`);
  await writeTurnScores(trainingData, scores);
  const remote = { ...(base.engineConfig ?? {}) } as Record<string, unknown>;
  delete remote.apiKey;
  const dir = path.join(dataDir, 'datasets', id);
  const file = await writeRemoteBatch(dir, lines, { jobId: id, algorithm: req.algorithm, baseVersion: base.version, remote, returns, invalidPenalty: h.invalidPenalty ?? null, stepCoef: h.stepCoef ?? null,
    reflectionGroup: h.reflectionGroup ?? 'task', data: stats,
  });
  return { file, samples: lines.length, stats };
}

/** Tokenizer and prompt format of a checkpoint; none (byte, chat) when the folder is not one. */
async function checkpointTextOf(dir: string): Promise<{ tokenizer?: Tokenizer; format?: PromptFormat }> {
  let meta;
  try {
    meta = await readCheckpointMetadata(dir);
  } catch {
    return {};
  }
  const t = checkpointText(meta);
  return { tokenizer: t.tokenizer, format: t.promptFormat };
}

/** Context length of a checkpoint: the builtin GPT's block_size, or 1024 when the folder is not one. */
async function checkpointBlockSize(dir: string): Promise<number> {
  try {
    return (await readCheckpointMetadata(dir)).config.block_size;
  } catch {
    return 1024;
  }
}
