/**
 * What a training job is asked to do (the body of `POST /v1/training/jobs`, docs/protocol.md
 * "Training jobs"), and the parts around it that the job manager (./manager.ts), the running of one
 * job (./job-run.ts), its promotion gate (./gate-run.ts) and the schedule (./scheduler.ts) share:
 * the model registry and the logger as they use them, and the error of a queued job that cannot
 * run as requested.
 */
import type { ModelRow } from '../../db/schema.js';
import type { ReflectionGroup } from '../../domain.js';
import type { GateSpec } from '../../shared/promotion-gate.js';
import type { Algorithm } from '../data/data.js';
import type { DataFilter } from '../data/select.js';
import type { ReturnMode } from '../maths/returns.js';
import type { TrainingHyper } from './job.js';

/** What a client asks for (the body of `POST /v1/training/jobs`). */
export interface CreateJobRequest {
  algorithm: Algorithm;
  /** RL data filter; ignored for SFT. */
  data?: DataFilter;
  /** SFT: path of a DemoSession JSONL file (src/envs/demos.ts). */
  demosPath?: string;
  /** Version to start from; default: the active version. */
  baseVersion?: string;
  /** Name of the new version; default `<algorithm>-<job id prefix>`. */
  version?: string;
  /** Activate the new version when the job succeeds. Default false. */
  activate?: boolean;
  /** Promotion gate: activate the new version only when it beats the active one on held-out tasks (never together with `activate`). */
  gate?: GateSpec;
  hyper?: TrainingHyper & {
    gammaStep?: number;
    gammaTraj?: number;
    returnMode?: ReturnMode;
    invalidPenalty?: number;
    stepCoef?: number;
    reflectionGroup?: ReflectionGroup;
  };
}

/** The model registry as the manager needs it (src/agent/models.ts ModelRegistry fits). */
export interface VersionRegistry {
  active(): ModelRow;
  get(version: string): Promise<ModelRow | undefined>;
  activate(version: string): Promise<unknown>;
}

export interface ManagerLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
  error(o: object, msg?: string): void;
}

/** A queued job that cannot run as requested (base version gone, version name taken meanwhile, no training data): the job fails with this message. */
export class JobRequestError extends Error {
  constructor(message: string) { super(message); this.name = 'JobRequestError'; }
}
