/**
 * TypeBox schema of a promotion gate's report (docs/training.md "Promotion gate";
 * docs/protocol.md "Training jobs"): its rule, its state and its figures. A training job shows it
 * as `gate`, and the version the gate judged as `gate` (and `metrics.gate`) on the model resource,
 * so it sits here, below both the model registry (src/agent/models.ts) and the job schemas
 * (src/training/schemas.ts). Pass rates, differences and the margin are fractions in [0, 1].
 */
import { Type, type Static } from 'typebox';
import { Nullable, StringEnum } from '../schema-helpers.js';
import { GATE_DECISIONS, GATE_STATUSES } from '../shared/promotion-gate.js';

/** Sampling of a gate's sessions. */
export const GateSampling = Type.Object(
  {
    temperature: Type.Number({ minimum: 0, maximum: 10 }),
    topP: Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
    topK: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
  },
  { additionalProperties: false },
);

const Interval = Type.Object({
  mean: Type.Number({ description: 'mean paired difference new - active (fraction)' }),
  lo: Type.Number(),
  hi: Type.Number(),
  level: Type.Number(),
  resamples: Type.Integer(),
  tasks: Type.Integer({ description: 'tasks both versions played' }),
});

const PassRates = Type.Record(Type.String(), Type.Number());

/** A gate's state and figures (src/training/run/gate.ts `GateReport` is the runner's type of the same object). */
export const GateReport = Type.Object({
  env: Type.String({ description: 'full env name' }),
  tasks: Type.Integer(),
  attempts: Type.Integer(),
  seedStart: Type.Integer(),
  metric: Type.String(),
  margin: Type.Number(),
  decision: StringEnum(GATE_DECISIONS),
  concurrency: Type.Integer(),
  availableActions: Type.Boolean(),
  sampling: GateSampling,
  status: StringEnum(GATE_STATUSES, {
    description: 'pending (training), running, passed, failed (margin not beaten), error (not judged), cancelled',
  }),
  progress: Type.Number({ minimum: 0, maximum: 1, description: "share of the gate's sessions finished" }),
  candidate: Nullable(Type.String(), { description: 'the version judged' }),
  incumbent: Nullable(Type.String(), { description: 'the active version it was compared with' }),
  candidatePassAtK: Nullable(PassRates, { description: 'pass@1..attempts of the new version on the gate tasks' }),
  incumbentPassAtK: Nullable(PassRates, { description: 'the same for the active version, on the same tasks' }),
  difference: Nullable(Interval, {
    description: 'the metric, new - active, paired over tasks, with its 95% percentile bootstrap interval over tasks',
  }),
  sessionErrors: Nullable(Type.Object({ candidate: Type.Integer(), incumbent: Type.Integer() })),
  promoted: Type.Boolean({ description: 'whether the gate activated the new version' }),
  reason: Nullable(Type.String()),
  startedAt: Nullable(Type.String({ format: 'date-time' })),
  finishedAt: Nullable(Type.String({ format: 'date-time' })),
});

/** A gate's report as the job and model resources show it. */
export type GateReportView = Static<typeof GateReport>;
