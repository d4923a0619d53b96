/**
 * `lamer replay --version V [--since WHEN] [--session ID] [filters] [--server URL] [--api-key KEY]`:
 * replays recorded sessions of a running server against another model version (`POST /v1/replays`,
 * or `POST /v1/sessions/{id}/replay` with --session; docs/replay.md) and prints the agreement
 * (share of replayed calls where the version's action, greedy unless `--decoding sampled`, equals
 * the recorded one), the mean logprob difference (the version's logprob of the recorded answer minus
 * the recorded logprob, nats) and the calls where the two differ most. The report stays on the
 * server (`GET /v1/replays/{id}`); `--json` prints it whole.
 *
 * Exit code: 0 when the replay ran; 1 when the server cannot be reached or refuses the replay (its
 * problem detail is printed); 2 for bad options (as every lamer command).
 */
import { REPLAY_DECODINGS, SESSION_MODES, SESSION_STATUSES } from '../domain.js';
import { describeHttpFailure, HttpError } from '../eval/http.js';
import { choiceOpt, intOpt, parseCommand, usageError, UsageError } from './args.js';
import { parseSince } from './export.js';

const HELP = `usage: lamer replay --version V [options]

Replay a server's recorded sessions against another model version: for every recorded step and
turn, the version's own action for the same prompt and the logprob it gives the recorded action
(docs/replay.md). Prints the agreement, the mean logprob difference and the calls where they differ
most; the report stays on the server (GET /v1/replays/{id}).

  --version V         the version to replay on (required)
  --server URL        server base URL (default $LAMER_SERVER, else http://127.0.0.1:8080)
  --api-key KEY       sent as "Authorization: Bearer KEY" (default: $LAMER_API_KEY)
  --session ID        replay this one session (the filters below do not apply)
  --since WHEN        sessions created at or after WHEN: ISO 8601 date/time or ms since the epoch
  --until WHEN        sessions created before WHEN
  --env NAME          sessions with this env label
  --model-version V   sessions recorded with version V
  --task-id T         sessions of task T
  --mode MODE         train | eval
  --status S          active | completed | abandoned | expired
  --limit N           most sessions, newest first (default 20, at most 100)
  --max-steps N       most recorded calls (default and largest: the server's LAMER_MAX_REPLAY_STEPS)
  --decoding D        greedy (default: temperature 0, the most likely token at each position) |
                      sampled (the recorded call's sampling and seed)
  --no-logprobs       actions only, no logprobs (needed for a remote version)
  --top N             calls listed where the versions differ most (default 10, at most 10)
  --json              print the whole report as JSON instead`;

const OPTIONS = {
  version: { type: 'string' },
  server: { type: 'string' },
  'api-key': { type: 'string' },
  session: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  env: { type: 'string' },
  'model-version': { type: 'string' },
  'task-id': { type: 'string' },
  mode: { type: 'string' },
  status: { type: 'string' },
  limit: { type: 'string' },
  'max-steps': { type: 'string' },
  decoding: { type: 'string' },
  'no-logprobs': { type: 'boolean' },
  top: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** What a replay report holds that this command prints (src/agent/replay-schemas.ts Replay). */
interface Report {
  id: string;
  modelVersion: string;
  decoding: string;
  sessions: Array<{ id: string; modelVersion: string; calls: number }>;
  summary: {
    calls: number;
    replayed: number;
    skipped: number;
    agreeing: number;
    agreement: number | null;
    scored: number;
    meanLogprobDiff: number | null;
    meanRecordedLogprob: number | null;
    meanReplayedLogprob: number | null;
    outsideSupport: number;
    mostDifferent: number[];
  };
  steps: Array<{
    sessionId: string;
    attempt: number;
    step: number;
    kind: string;
    skipped: string | null;
    logprobDiff: number | null;
    recorded: { action: string; logprob: number | null };
    replayed: { action: string; agrees: boolean; logprob: number | null } | null;
  }>;
}

/** An ISO 8601 date/time or ms since the epoch, as the RFC 3339 text the server reads. @throws UsageError. */
function isoOpt(name: string, v: string): string {
  const d = new Date(parseSince(v, name));
  if (Number.isNaN(d.getTime())) throw new UsageError(`--${name} is out of range, got '${v}'`);
  return d.toISOString();
}

/** The request (path and body) of the command line. @throws UsageError naming the bad option. */
export function replayRequest(values: Record<string, string | boolean | undefined>): { path: string; body: Record<string, unknown> } {
  const str = (k: string) => values[k] as string | undefined;
  const version = str('version');
  if (version === undefined || version === '') throw new UsageError('--version is required (the model version to replay on)');
  const body: Record<string, unknown> = {
    modelVersion: version,
    decoding: choiceOpt('decoding', str('decoding'), REPLAY_DECODINGS, 'greedy'),
  };
  if (values['no-logprobs']) body.logprobs = false;
  if (str('max-steps') !== undefined) body.maxSteps = intOpt('max-steps', str('max-steps'), undefined, 1);
  const filterKeys = ['since', 'until', 'env', 'model-version', 'task-id', 'mode', 'status', 'limit'];
  const session = str('session');
  if (session !== undefined) {
    const clash = filterKeys.find((k) => values[k] !== undefined);
    if (clash) throw new UsageError(`--${clash} filters sessions; it does not go with --session (one session)`);
    return { path: `/v1/sessions/${encodeURIComponent(session)}/replay`, body };
  }
  const filter: Record<string, unknown> = {};
  if (str('since') !== undefined) filter.since = isoOpt('since', str('since')!);
  if (str('until') !== undefined) filter.until = isoOpt('until', str('until')!);
  if (str('env') !== undefined) filter.env = str('env');
  if (str('model-version') !== undefined) filter.modelVersion = str('model-version');
  if (str('task-id') !== undefined) filter.taskId = str('task-id');
  if (str('mode') !== undefined) filter.mode = choiceOpt('mode', str('mode'), SESSION_MODES, 'train');
  if (str('status') !== undefined) filter.status = choiceOpt('status', str('status'), SESSION_STATUSES, 'completed');
  if (str('limit') !== undefined) filter.limit = intOpt('limit', str('limit'), undefined, 1, 100);
  return { path: '/v1/replays', body: { ...body, filter } };
}

const nats = (x: number | null) => (x === null ? '-' : `${x >= 0 ? '+' : ''}${x.toFixed(3)}`);
const quoted = (s: string) => JSON.stringify(s.length > 40 ? `${s.slice(0, 39)}…` : s);

/** The printed summary of a report: agreement, logprob difference, the `top` calls that differ most. */
export function formatReplay(r: Report, top = 10): string {
  const m = r.summary;
  const v = r.modelVersion;
  const recordedWith = [...new Set(r.sessions.map((s) => s.modelVersion))].join(', ');
  const how = r.decoding === 'greedy' ? 'greedy (temperature 0)' : "sampled (the recorded call's sampling and seed)";
  const lines = [
    `replay ${r.id}: ${m.calls} recorded calls of ${r.sessions.length} session${r.sessions.length === 1 ? '' : 's'} ` +
      `(recorded with ${recordedWith}) on ${v}, decoding ${how}`,
    `agreement:        ${m.agreement === null ? '-' : `${(100 * m.agreement).toFixed(1)}%`} ` +
      `(${m.agreeing} of ${m.replayed} replayed calls: ${v}'s action equals the recorded one)`,
    m.scored > 0
      ? `logprob diff:     mean ${nats(m.meanLogprobDiff)} nats (${v} minus recorded, over ${m.scored} scored calls; ` +
        `recorded mean ${nats(m.meanRecordedLogprob)}, ${v} mean ${nats(m.meanReplayedLogprob)})`
      : 'logprob diff:     - (no call was scored)',
  ];
  if (m.skipped > 0) lines.push(`skipped:          ${m.skipped} (first: ${r.steps.find((s) => s.skipped)?.skipped})`);
  if (m.outsideSupport > 0)
    lines.push(`outside support:  ${m.outsideSupport} calls whose recorded answer ${r.modelVersion} would never sample`);
  const shown = m.mostDifferent.slice(0, top);
  if (shown.length > 0) {
    lines.push('differ most:');
    for (const i of shown) {
      const s = r.steps[i]!;
      const mine = s.replayed!;
      lines.push(
        `  ${s.sessionId} attempt ${s.attempt} step ${s.step} (${s.kind}): recorded ${quoted(s.recorded.action)} ` +
          `${nats(s.recorded.logprob)}, under ${v} ${nats(mine.logprob)} (diff ${nats(s.logprobDiff)}); ` +
          `${v} would do ${mine.agrees ? 'the same' : quoted(mine.action)}`,
      );
    }
  }
  lines.push(`report: GET /v1/replays/${r.id}`);
  return lines.join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand('replay', argv, OPTIONS, HELP);
  if ('code' in parsed) return parsed.code;
  const values = parsed.values as Record<string, string | boolean | undefined>;
  let req: { path: string; body: Record<string, unknown> };
  let server: string;
  let top: number;
  try {
    req = replayRequest(values);
    server = ((values.server as string | undefined) ?? process.env.LAMER_SERVER ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
    if (!/^https?:\/\/\S+$/.test(server)) throw new UsageError(`--server must be an http(s) URL, got '${server}'`);
    top = intOpt('top', values.top as string | undefined, 10, 0, 10);
  } catch (e) {
    return usageError('replay', e);
  }
  const key = (values['api-key'] as string | undefined) ?? process.env.LAMER_API_KEY;
  let report: Report;
  try {
    const res = await fetch(server + req.path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(req.body),
    });
    const text = await res.text();
    if (!res.ok) throw new HttpError(`HTTP ${res.status}`, res.status, text);
    report = JSON.parse(text) as Report;
  } catch (e) {
    console.error(`lamer replay: ${server}${req.path}: ${describeHttpFailure(e)}`);
    return 1;
  }
  console.log(values.json ? JSON.stringify(report, null, 2) : formatReplay(report, top));
  return 0;
}
