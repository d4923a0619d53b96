// Types of src/ui/figures.js (browser module, plain JavaScript) for the TypeScript tests.

/** The fields of a `GET /v1/stats` group that figures.js reads. */
export interface StatsGroupLike {
  modelVersion: string;
  env: string | null;
  mode: string | null;
  memory?: string;
  passAtK: Record<string, number>;
}
export interface MemoryBlock<G extends StatsGroupLike> {
  modelVersion: string;
  env: string | null;
  mode: string | null;
  K: number;
  rows: Array<{ group: G; gain: Array<number | null> }>;
}
/** The fields of a trajectory row that figures.js reads. */
export interface StepRowLike {
  step: number;
  action: string | null;
  invalidAction: boolean;
}

export const MEMORY_LABELS: Record<string, string>;
export function memoryLabel(m: string | undefined | null): string;
export function memoryComparison<G extends StatsGroupLike>(groups: G[]): Array<MemoryBlock<G>>;
export function stepCards<R extends StepRowLike>(rows: R[]): Array<R & { invalid: boolean }>;
export function actionsTaken(rows: StepRowLike[]): number;

/** The fields of a `GET /v1/models` item that gateHistory reads (`gate`: the GateReport schema, or null). */
export interface ModelLike {
  version: string;
  status: string;
  createdAt: string;
  gate: null | {
    env: string; tasks: number; seedStart: number; metric: string; margin: number; decision: string; status: string; progress: number;
    incumbent: string | null; promoted: boolean; reason: string | null;
    candidatePassAtK: Record<string, number> | null; incumbentPassAtK: Record<string, number> | null;
    difference: { mean: number; lo: number; hi: number; tasks: number } | null;
  };
}
export interface GateRow {
  version: string; modelStatus: string; status: string; promoted: boolean; reason: string | null; progress: number;
  env: string; tasks: number; metric: string; k: number; margin: number; decision: string; incumbentVersion: string | null;
  candidate: number | null; incumbent: number | null; rise: number | null;
  difference: { mean: number; lo: number; hi: number; tasks: number } | null;
}
export function gateHistory(models: ModelLike[]): GateRow[];
