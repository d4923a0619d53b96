/** TypeBox schemas of `GET /v1/stats` (docs/method.md#metrics). */
import { Type } from 'typebox';
import { Nullable, StringEnum } from '../common.js';
import { SESSION_MODES } from '../../../domain.js';

export const StatsQuery = Type.Object(
  {
    taskId: Type.Optional(Type.String({ maxLength: 1024 })),
    env: Type.Optional(Type.String({ maxLength: 256 })),
    mode: Type.Optional(StringEnum(SESSION_MODES)),
    modelVersion: Type.Optional(Type.String({ maxLength: 256 })),
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
      ...summary,
    }),
  ),
});
