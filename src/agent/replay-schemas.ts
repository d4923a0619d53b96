/**
 * TypeBox schemas of replays (docs/replay.md): the request bodies of `POST
 * /v1/sessions/{id}/replay` and `POST /v1/replays`, the stored report, its listing. The replay
 * service's answer types derive from them (`Static<>`), and the replay routes declare them.
 * Logprobs are natural logs (nats).
 */
import { Type, type Static } from 'typebox';
import { Nullable, StringEnum } from '../schema-helpers.js';
import { REPLAY_DECODINGS, REPLAY_PROMPT_SOURCES, SESSION_MODES, SESSION_STATUSES } from '../domain.js';

/** Characters of an observation a report keeps (the whole one stays in the session's trajectory). */
export const REPLAY_OBSERVATION_CHARS = 500;

/** Most sessions one batch replay reads. */
export const MAX_REPLAY_SESSIONS = 100;

/** The steps of a report listed as the ones where the two versions differ most. */
export const MOST_DIFFERENT = 10;

/** The options of every replay, bounded by the server's LAMER_MAX_REPLAY_STEPS (`maxReplaySteps`). */
function optionFields(maxReplaySteps: number) {
  return {
    modelVersion: Type.String({
      minLength: 1,
      maxLength: 256,
      description: 'the version to replay the recorded calls on (the other version)',
    }),
    decoding: Type.Optional(
      StringEnum(REPLAY_DECODINGS, {
        description:
          "how the other version's own action is decoded: greedy (default; temperature 0) or sampled " +
          "(the recorded call's sampling, its seed included)",
      }),
    ),
    logprobs: Type.Optional(
      Type.Boolean({
        description:
          'score the recorded actions under the other version (default true); remote versions need false ' +
          '(their actions only: their servers are not asked for prompt logprobs)',
      }),
    ),
    maxSteps: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: maxReplaySteps,
        description:
          `most recorded model calls to replay (default and largest: LAMER_MAX_REPLAY_STEPS, ${maxReplaySteps} here); ` +
          'a selection holding more is 400, nothing run',
      }),
    ),
  };
}

export const ReplayFilter = Type.Object(
  {
    env: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    modelVersion: Type.Optional(
      Type.String({ minLength: 1, maxLength: 256, description: 'sessions recorded with (pinned to) this version' }),
    ),
    taskId: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    mode: Type.Optional(StringEnum(SESSION_MODES)),
    status: Type.Optional(StringEnum(SESSION_STATUSES)),
    since: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'RFC 3339 date-time: sessions created at or after it' })),
    until: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'RFC 3339 date-time: sessions created before it' })),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_REPLAY_SESSIONS, description: 'most sessions, newest first (default 20)' }),
    ),
  },
  { additionalProperties: false },
);

/** The body schemas whose bounds are the server's limits. */
export function makeReplaySchemas(maxReplaySteps: number) {
  const SessionReplayBody = Type.Object(optionFields(maxReplaySteps), { additionalProperties: false });
  const BatchReplayBody = Type.Object(
    { ...optionFields(maxReplaySteps), filter: Type.Optional(ReplayFilter) },
    { additionalProperties: false },
  );
  return { SessionReplayBody, BatchReplayBody };
}

export const ReplayStep = Type.Object({
  sessionId: Type.String(),
  attempt: Type.Integer(),
  step: Type.Integer(),
  kind: StringEnum(['step', 'turn'] as const, {
    description: "step: a step's action; turn: a call of the session's OpenAI-compatible endpoint",
  }),
  observation: Type.String({ description: `the observation acted on, its first ${REPLAY_OBSERVATION_CHARS} characters` }),
  recorded: Type.Object({
    modelVersion: Type.String(),
    action: Type.String(),
    tokens: Nullable(Type.Integer(), { description: "the recorded answer's tokens (null when the server did not return them)" }),
    logprob: Nullable(Type.Number(), { description: 'sum of the recorded logprobs, nats (null when none were recorded)' }),
    logprobs: Nullable(Type.Array(Type.Number()), { description: 'the recorded logprob of each token, as sampled' }),
  }),
  replayed: Nullable(
    Type.Object({
      action: Type.String({ description: "the other version's own action for the same prompt" }),
      agrees: Type.Boolean({ description: 'equal to the recorded action' }),
      promptFrom: StringEnum(REPLAY_PROMPT_SOURCES, { description: 'where the prompt came from (docs/replay.md "Prompts")' }),
      droppedSteps: Type.Integer({ description: "earlier steps dropped to fit the prompt to the other version's context" }),
      logprob: Nullable(Type.Number(), {
        description:
          'log-probability the other version gives the recorded answer, nats: the sum over its tokens; null when not scored ' +
          "(logprobs false, a remote version) or when a token lies outside the other version's support",
      }),
      logprobs: Nullable(Type.Array(Nullable(Type.Number())), {
        description: "per token of the recorded answer in the other version's tokenizer; null for a token outside its sampling support",
      }),
    }),
    { description: 'null when the call was not replayed (see skipped)' },
  ),
  logprobDiff: Nullable(Type.Number(), { description: 'replayed.logprob - recorded.logprob, nats; null unless both are known' }),
  skipped: Nullable(Type.String(), {
    description: 'why the call was not replayed (for example a turn with tools on a builtin version); null when it was',
  }),
});

export const ReplaySummary = Type.Object({
  calls: Type.Integer({ description: 'recorded model calls read' }),
  replayed: Type.Integer(),
  skipped: Type.Integer(),
  agreeing: Type.Integer({ description: 'replayed calls whose action equals the recorded one' }),
  agreement: Nullable(Type.Number({ description: "agreeing / replayed (under this report's decoding); null when nothing was replayed" })),
  scored: Type.Integer({ description: 'calls with both logprobs known' }),
  meanLogprobDiff: Nullable(Type.Number({ description: 'mean of logprobDiff over the scored calls, nats' })),
  meanRecordedLogprob: Nullable(Type.Number()),
  meanReplayedLogprob: Nullable(Type.Number()),
  outsideSupport: Type.Integer({
    description: 'calls whose recorded answer has a token the other version would never sample there (its logprob is null)',
  }),
  mostDifferent: Type.Array(Type.Integer(), {
    description:
      `indices into steps of the (at most ${MOST_DIFFERENT}) replayed calls where the versions differ most: ` +
      'largest |logprobDiff| first, then disagreeing actions without one; calls with the same action and ' +
      '|logprobDiff| < 1e-4 are not listed',
  }),
});

export const ReplaySession = Type.Object({
  id: Type.String(),
  taskId: Type.String(),
  env: Nullable(Type.String()),
  modelVersion: Type.String({ description: 'the version the session was recorded with' }),
  calls: Type.Integer(),
});

const reportFields = {
  id: Type.String(),
  modelVersion: Type.String({ description: 'the version replayed' }),
  decoding: StringEnum(REPLAY_DECODINGS),
  logprobs: Type.Boolean(),
  request: Type.Object(
    { sessionId: Type.Optional(Type.String()), filter: Type.Optional(ReplayFilter), maxSteps: Type.Integer() },
    { description: 'what was replayed: one session, or the filter of a batch replay' },
  ),
  summary: ReplaySummary,
  sessions: Type.Array(ReplaySession),
  createdAt: Type.String({ format: 'date-time' }),
};

export const Replay = Type.Object({ ...reportFields, steps: Type.Array(ReplayStep) });
export const ReplayListItem = Type.Object(reportFields);

export const ReplayList = Type.Object({
  items: Type.Array(ReplayListItem),
  nextCursor: Nullable(Type.String(), { description: 'pass as `cursor` for the next page; null at the end' }),
});

export const ReplayParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export const ReplayListQuery = Type.Object(
  {
    modelVersion: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'reports of replays on this version' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 20 })),
    cursor: Type.Optional(
      Type.String({ maxLength: 64, pattern: '^rpl_[0-9a-z]{9}[0-9a-f]{12}$', description: 'nextCursor of the previous page' }),
    ),
  },
  { additionalProperties: false },
);

export type ReplayView = Static<typeof Replay>;
export type ReplayStepView = Static<typeof ReplayStep>;
export type ReplaySummaryView = Static<typeof ReplaySummary>;
export type ReplayListItemView = Static<typeof ReplayListItem>;
export type ReplayFilterBody = Static<typeof ReplayFilter>;
export type ReplayOptionsBody = Static<ReturnType<typeof makeReplaySchemas>['SessionReplayBody']>;
