// Types of src/ui/metrics.js (browser module, plain JavaScript) for the TypeScript tests.

/** One sample of the Prometheus text format. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
/** A cumulative histogram: [upper bound `le` (Infinity for +Inf), count of observations <= le] by increasing le. */
export type Buckets = Array<[number, number]>;

export function parseProm(text: string): PromSample[];
export function stepFigures(samples: PromSample[]): { steps: number; buckets: Buckets };
export function histogramQuantile(q: number, buckets: Buckets): number | null;
export function histogramDelta(now: Buckets, before: Buckets): Buckets;
