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
