/** TypeBox schemas of `GET /v1/stats` (pass@k, success and return by attempt; docs/method.md#metrics). */
import { Type } from 'typebox';
import { Nullable, StringEnum } from '../common.js';
import { SESSION_MODES, STATS_MEMORY } from '../../../domain.js';

/** The `memory` filter of the stats routes, and the group field it matches. */
export const StatsMemoryField = StringEnum(STATS_MEMORY, {
  description:
    "'none': single-attempt sessions (maxAttempts 1), read as independent retries; otherwise multi-attempt sessions with that memory mode",
});

export const StatsQuery = Type.Object(
  {
    taskId: Type.Optional(Type.String({ maxLength: 1024 })),
    env: Type.Optional(Type.String({ maxLength: 256 })),
    mode: Type.Optional(StringEnum(SESSION_MODES)),
    modelVersion: Type.Optional(Type.String({ maxLength: 256 })),
    memory: Type.Optional(StatsMemoryField),
    retries: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: 3,
        description: "chain length of memory 'none' groups: a task's single-attempt sessions, in creation order, are read as runs of up to this many independent retries that stop at the first success",
      }),
    ),
  },
  { additionalProperties: false },
);

const summary = {
  sessions: Type.Integer({ description: 'completed sessions counted' }),
  passAtK: Type.Record(Type.String(), Type.Number(), { description: '"k" -> fraction of sessions solved within attempts 0..k-1' }),
  successByAttempt: Type.Array(Nullable(Type.Number()), { description: '[attempt] fraction of played attempts that succeeded; null when no session played it' }),
  meanReturnByAttempt: Type.Array(Nullable(Type.Number()), { description: '[attempt] mean undiscounted return of played attempts; null when no session played it' }),
  attemptsPlayed: Type.Array(Type.Integer(), { description: '[attempt] how many sessions played it' }),
};

export const Stats = Type.Object({
  ...summary,
  groups: Type.Array(
    Type.Object({
      modelVersion: Type.String(),
      env: Nullable(Type.String()),
      mode: StringEnum(SESSION_MODES),
      memory: StatsMemoryField,
      ...summary,
      sessions: Type.Integer({ description: 'completed sessions counted' }),
      runs: Type.Integer({
        description: "what the group's rates are over: its sessions, or for memory 'none' its chains of independent retries (each read as one `retries`-attempt session)",
      }),
    }),
  ),
});
