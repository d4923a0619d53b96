/**
 * docs/deploy.md stays true to the code: every LAMER_* variable in its configuration table is
 * read by the server's sources, every variable src/config.ts reads has a row, and the table states
 * the default src/config.ts gives.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

const ROOT = join(import.meta.dirname, '..', '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

const doc = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
const rows = [...doc.matchAll(/^\| `(LAMER_[A-Z0-9_]+)` \| ([^|]*) \|/gm)].map((m) => ({ name: m[1]!, def: m[2]!.trim() }));

describe('docs/deploy.md configuration table', () => {
  it('lists only variables the server reads', () => {
    expect(rows.length).toBeGreaterThanOrEqual(20);
    const src = sources(join(ROOT, 'src')).map((f) => readFileSync(f, 'utf8')).join('\n');
    const unread = rows.filter((r) => !new RegExp(`\\b${r.name}\\b`).test(src)).map((r) => r.name);
    expect(unread).toEqual([]);
    const names = rows.map((r) => r.name);
    expect(names.filter((n, i) => names.indexOf(n) !== i), 'duplicate rows').toEqual([]);
  });

  it('has a row for every variable src/config.ts reads', () => {
    const config = readFileSync(join(ROOT, 'src', 'config.ts'), 'utf8');
    // Reads are env.LAMER_X and the names passed to int()/oneOf() as 'LAMER_X'.
    const read = new Set([...config.matchAll(/(?:env\.|')(LAMER_[A-Z0-9_]*[A-Z0-9])\b/g)].map((m) => m[1]!));
    expect(read.size).toBeGreaterThanOrEqual(50);
    expect([...read].filter((n) => !rows.some((r) => r.name === n))).toEqual([]);
  });

  it('states the defaults that loadConfig applies', () => {
    const c = loadConfig({});
    const numeric: Record<string, number> = {
      LAMER_PORT: c.port,
      LAMER_BATCH_WINDOW_MS: c.batchWindowMs,
      LAMER_MAX_BATCH_SIZE: c.maxBatchSize,
      LAMER_BODY_LIMIT_BYTES: c.limits.bodyBytes,
      LAMER_BATCH_BODY_LIMIT_BYTES: c.limits.batchBodyBytes,
      LAMER_MAX_OBSERVATION_CHARS: c.limits.observationChars,
      LAMER_MAX_INSTRUCTIONS_CHARS: c.limits.instructionsChars,
      LAMER_MAX_AVAILABLE_ACTIONS: c.limits.availableActions,
      LAMER_MAX_ACTION_CHARS: c.limits.actionChars,
      LAMER_MAX_BATCH_ITEMS: c.limits.batchItems,
      LAMER_MAX_JSON_DEPTH: c.limits.jsonDepth,
      LAMER_MAX_INFO_BYTES: c.limits.infoBytes,
      LAMER_MAX_METADATA_BYTES: c.limits.metadataBytes,
      LAMER_TRAJECTORY_PAGE_BYTES: c.limits.trajectoryPageBytes,
      LAMER_MAX_REPLAY_STEPS: c.limits.maxReplaySteps,
      LAMER_HEADERS_TIMEOUT_MS: c.http.headersTimeoutMs,
      LAMER_REQUEST_TIMEOUT_MS: c.http.requestTimeoutMs,
      LAMER_KEEP_ALIVE_TIMEOUT_MS: c.http.keepAliveTimeoutMs,
      LAMER_BODY_DRAIN_BYTES: c.http.drainBodyBytes!,
      LAMER_BODY_DRAIN_MS: c.http.drainBodyMs!,
      LAMER_MAX_ATTEMPTS: c.limits.maxAttempts,
      LAMER_MAX_STEPS_CAP: c.limits.maxStepsCap,
      LAMER_DEFAULT_MAX_STEPS: c.limits.defaultMaxSteps,
      LAMER_MAX_REFLECTION_CHARS: c.limits.reflectionChars,
      LAMER_SESSION_IDLE_TTL_SECONDS: c.sessionIdleTtlSeconds,
      LAMER_RATE_LIMIT_MAX: c.protection.rateLimitMax,
      LAMER_RATE_LIMIT_WINDOW_SECONDS: c.protection.rateLimitWindowSeconds,
      LAMER_MAX_OPEN_SESSIONS_PER_TENANT: c.protection.maxOpenSessionsPerTenant,
      LAMER_MAX_QUEUED_STEPS: c.protection.maxQueuedSteps,
      LAMER_OVERLOAD_RETRY_AFTER_SECONDS: c.protection.overloadRetryAfterSeconds,
      LAMER_MAX_CANDIDATE_TOKENS: c.limits.candidateTokens,
      LAMER_MAX_PROMPT_TOKENS: c.limits.promptTokens,
      LAMER_TRAIN_MAX_QUEUED_JOBS: c.training.maxQueuedJobs!,
      LAMER_TRAIN_QUEUE_RETRY_AFTER_SECONDS: c.training.queueRetryAfterSeconds!,
    };
    const remote = loadConfig({ LAMER_ENGINE: 'openai', LAMER_OPENAI_BASE_URL: 'http://gpu-host:8000/v1', LAMER_OPENAI_MODEL: 'm' }).openai!;
    Object.assign(numeric, {
      LAMER_OPENAI_CONCURRENCY: remote.concurrency,
      LAMER_OPENAI_TIMEOUT_MS: remote.timeoutMs,
      LAMER_OPENAI_MAX_RETRIES: remote.maxRetries,
      LAMER_OPENAI_MAX_ACTION_TOKENS: remote.maxActionTokens,
      LAMER_OPENAI_MAX_REFLECTION_TOKENS: remote.maxReflectionTokens,
      LAMER_OPENAI_MAX_RESPONSE_BYTES: remote.maxResponseBytes,
      LAMER_OPENAI_CALL_TIMEOUT_MS: remote.callTimeoutMs,
    });
    const gate = loadConfig({ LAMER_TRAIN_GATE_TASKS: '1' }).training.gate!;
    expect(c.training.gate).toBeNull();
    Object.assign(numeric, {
      LAMER_TRAIN_GATE_TASKS: 0,
      LAMER_TRAIN_GATE_ATTEMPTS: gate.attempts,
      LAMER_TRAIN_GATE_SEED_START: gate.seedStart,
      LAMER_TRAIN_GATE_MARGIN: gate.margin,
      LAMER_TRAIN_GATE_CONCURRENCY: gate.concurrency,
    });
    expect(c.health).toBeNull();
    numeric.LAMER_HEALTH_STALL_SECONDS = loadConfig({ LAMER_HEALTH_PORT: '9091' }).health!.stallSeconds;
    for (const [name, value] of Object.entries(numeric)) {
      const row = rows.find((r) => r.name === name);
      expect(row, name).toBeDefined();
      expect(row!.def, name).toBe(`\`${value}\``);
    }
    const text: Record<string, string> = { LAMER_HOST: c.host, LAMER_ENGINE: c.engine, LAMER_TFJS_BACKEND: c.tfjsBackend, LAMER_LOG_LEVEL: c.logLevel, LAMER_OPENAI_KIND: remote.kind, LAMER_TRAIN_GATE_DECISION: gate.decision };
    for (const [name, value] of Object.entries(text)) expect(rows.find((r) => r.name === name)!.def.startsWith(`\`${value}\``), name).toBe(true);
  });
});
