/**
 * Unmodified agents play through a session's OpenAI-compatible endpoint (`/v1/sessions/{id}/openai/v1`),
 * against real servers on ephemeral ports over SQLite files, with no mock:
 * - an agent written with the official `openai` SDK and one written with the OpenAI Agents SDK
 *   (`@openai/agents`, docs/agent-endpoint.md says why this framework) each play MineSweeper (the
 *   test's own game loop over src/envs) for 3 attempts on a tiny builtin GPT: the observation is the
 *   user message, the reply is parsed as the action, each attempt ends with the end call;
 * - every turn's recorded token ids decode to its recorded prompt and output, and the attempt-2
 *   prompt carries the reflection written after attempt 1 (and after attempt 0);
 * - a training job on the builtin version trains on the turns (returns credited as for steps, a
 *   turn whose output the agent discarded included); the stats and `lamer export` show the sessions;
 * - a second server whose version is remote (the first server's `/openai/v1`) records the remote's
 *   token ids, which the remote gives again for the same messages and sampling, and its training job
 *   writes the turns into the batch for an external trainer.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { Agent, OpenAIChatCompletionsModel, Runner, user, type AgentInputItem } from '@openai/agents';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as exportRun } from '../../../src/cli/export.js';
import { loadConfig } from '../../../src/config.js';
import { MineSweeperEnv, cellAction, parseCellAction } from '../../../src/envs/minesweeper.js';
import { decode } from '../../../src/model/tokenizer.js';
import { sessionReturns } from '../../../src/training/maths/returns.js';
import { DEFAULT_MODEL_IO } from '../../../src/training/run/worker.js';
import { quietConsole, startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../../helpers/index.js';

const BOARD = { rows: 4, cols: 4, mines: 3 };
const ENV = 'minesweeper-4x4-3';
const RULES = 'MineSweeper 4x4, 3 mines. ? hidden, . no mine around, 1-8 mines around. Answer one hidden cell as (row, col).';
/** Moves an agent makes in one attempt before it gives up (its own budget). */
const MOVES = 3;
const ATTEMPTS = 3;

/** The test's game: one MineSweeper board, played move by move with the agent's action texts. */
class Game {
  private readonly env = new MineSweeperEnv(BOARD);
  observation: string;
  return = 0;
  done = false;
  success = false;
  constructor(readonly seed: number) {
    this.observation = this.env.reset(seed).observation;
  }
  /** The agent's own rule when a reply names no cell: the first hidden cell, row by row. */
  fallback(): string {
    return this.env.legalActions()[0]!;
  }
  /** Plays `action`; @returns the next observation. */
  play(action: string): string {
    const r = this.env.step(action);
    this.return += r.reward;
    this.done = r.done;
    this.success = r.success;
    this.observation = r.observation;
    return r.observation;
  }
}

/** The action an agent plays for a reply: the cell it names, else its fallback. */
function actionOf(reply: string, game: Game): string {
  const c = parseCellAction(reply);
  return c && c.row >= 1 && c.row <= BOARD.rows && c.col >= 1 && c.col <= BOARD.cols ? cellAction(c.row - 1, c.col - 1) : game.fallback();
}

/**
 * An agent written with the official `openai` SDK as its users write one: it keeps the chat, asks
 * for a cell and plays the cell the reply names; a reply naming none is dropped (never shown to the
 * model again) and the model is asked once more, then the agent plays its fallback.
 */
async function openaiSdkAgent(client: OpenAI, game: Game): Promise<void> {
  const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: RULES }, { role: 'user', content: game.observation }];
  for (let move = 0; move < MOVES && !game.done; move++) {
    let reply = '';
    for (let ask = 0; ask < 2 && !parseCellAction(reply); ask++) {
      const r = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 8, temperature: 0.9 });
      reply = r.choices[0]?.message.content ?? '';
    }
    const action = actionOf(reply, game);
    messages.push({ role: 'assistant', content: action }, { role: 'user', content: game.play(action) });
  }
}

/**
 * An agent written with the OpenAI Agents SDK: one `Runner.run` per move (streamed), the run's
 * history plus the next observation as the next input, the final output parsed as the action.
 */
async function agentsSdkAgent(client: OpenAI, game: Game): Promise<void> {
  const agent = new Agent({
    name: 'minesweeper',
    instructions: RULES,
    model: new OpenAIChatCompletionsModel(client, 'gpt-4o-mini'),
    modelSettings: { maxTokens: 8, temperature: 0.9 },
  });
  const runner = new Runner({ tracingDisabled: true });
  let input: AgentInputItem[] = [user(game.observation)];
  for (let move = 0; move < MOVES && !game.done; move++) {
    const result = await runner.run(agent, input, { stream: true });
    for await (const _event of result) {
      // the agent reads the events as they come; the action is the final output
    }
    await result.completed;
    const action = actionOf(result.finalOutput ?? '', game);
    input = [...result.history, user(game.play(action))];
  }
}

type AgentLoop = (client: OpenAI, game: Game) => Promise<void>;

/**
 * A board on which the agents' fallback (first hidden cell) neither wins within MOVES moves nor
 * hits a mine on the first one, so every attempt is several moves and fails.
 */
function losingSeed(): number {
  for (let seed = 1; seed < 500; seed++) {
    const g = new Game(seed);
    let moves = 0;
    while (moves < MOVES && !g.done) {
      g.play(g.fallback());
      moves++;
    }
    if (!g.success && moves >= 2) return seed;
  }
  throw new Error('no board found');
}

type Row = Record<string, any>;
const rows = async (s: TestServer, id: string) => (await s.call('GET', `/v1/sessions/${id}/trajectory?limit=500`)).body.steps as Row[];

/** Opens a session on `s` and lets `loop` play ATTEMPTS attempts of board `seed`, ending each. @returns the session id. */
async function playSession(s: TestServer, loop: AgentLoop, seed: number, body: Record<string, unknown> = {}): Promise<string> {
  const created = await s.call('POST', '/v1/sessions', {
    taskId: `${ENV}:seed=${seed}`, env: ENV, instructions: RULES, maxAttempts: ATTEMPTS, maxSteps: 2 * MOVES, ...body,
  });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const client = new OpenAI({ baseURL: `${s.url}/v1/sessions/${id}/openai/v1`, apiKey: 'unused-without-keys', maxRetries: 0 });
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const game = new Game(seed);
    await loop(client, game);
    expect(game.success).toBe(false);
    const result = { reward: game.return, success: game.success, observation: game.observation };
    const end = await s.call('POST', `/v1/sessions/${id}/attempts/${attempt}/end`, result);
    expect(end.status).toBe(200);
    expect(end.body.attemptResult).toMatchObject({ attempt, success: false, return: game.return });
    if (attempt < ATTEMPTS - 1) {
      expect(end.body.reflection.attempt).toBe(attempt);
      expect(end.body.session).toEqual({ status: 'active', next: { attempt: attempt + 1, step: 0 } });
    } else {
      expect(end.body.session).toEqual({ status: 'completed', next: null });
    }
  }
  return id;
}

/**
 * Checks what a session played by an agent recorded: turns then one end row per attempt, and on
 * attempts 1 and 2 every turn's prompt carries the reflections written before it.
 * @returns the turn rows.
 */
async function checkSession(s: TestServer, id: string, turnsPerMove: [number, number]): Promise<Array<Record<string, any>>> {
  const all = await rows(s, id);
  const turns = all.filter((r) => r.turn);
  const memory = await s.call('GET', `/v1/sessions/${id}/memory`);
  const reflections = memory.body.reflections as Array<{ attempt: number; text: string }>;
  expect(reflections.map((r) => r.attempt)).toEqual([0, 1]);
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const mine = all.filter((r) => r.attempt === attempt && r.kind === 'action');
    const played = mine.filter((r) => r.turn);
    // several turns (moves; retries), then the end call's row
    expect(played.length).toBeGreaterThanOrEqual(2 * turnsPerMove[0]);
    expect(played.length).toBeLessThanOrEqual(MOVES * turnsPerMove[1]);
    expect(mine.map((r) => r.step)).toEqual(mine.map((_, i) => i));
    expect(mine.at(-1)).toMatchObject({ turn: null, output: null, done: true, success: false });
    for (const t of played) {
      if (attempt === 0) {
        expect(t.turn.memory).toBeNull();
        continue;
      }
      // the memory the model saw: the reflections written after each earlier attempt
      const text = reflections.filter((r) => r.attempt < attempt).map((r) => `Attempt ${r.attempt}: ${r.text}`).join('\n');
      expect(t.turn.memory.text).toBe(`Reflections on earlier attempts:\n${text}`);
      expect(t.prompt).toContain(t.turn.memory.text);
      expect(t.promptTruncatedChars).toBe(0);
    }
  }
  return turns;
}

let dir: string;
let a: TestServer;
let seed: number;

beforeAll(async () => {
  dir = tmpDir('lamer-agents-');
  // a context long enough for two reflections of up to 256 tokens, the rules and the chat
  await writeTinyGptCheckpoint(join(dir, 'base-model'), 11, 2048);
  const cfg = loadConfig({});
  a = await startTestServer({
    engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'), dataDir: join(dir, 'a'),
    training: { ...cfg.training, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'wasm' } } },
  });
  seed = losingSeed();
}, 120_000);
afterAll(async () => {
  await a?.close();
});

describe('unmodified agents on a builtin version', () => {
  const played: string[] = [];

  it('an openai SDK agent plays MineSweeper for 3 attempts; token ids decode to the records, attempt 2 sees the reflections', async () => {
    const id = await playSession(a, openaiSdkAgent, seed, { sampling: { seed: 21 } });
    played.push(id);
    const turns = await checkSession(a, id, [1, 2]);
    for (const t of turns) {
      expect(decode(t.outputTokenIds)).toBe(t.output);
      expect(decode(t.promptTokenIds)).toBe(t.prompt);
      expect(t.logprobs).toHaveLength(t.outputTokenIds.length);
      expect(t.turn).toMatchObject({ api: 'chat', stream: false, sampling: { temperature: 0.9, maxTokens: 8 } });
      expect(t.turn.request.model).toBe('gpt-4o-mini');
      expect(t.modelVersion).toBe('base');
    }
    // a reply that named no cell was dropped by the agent and asked again: both turns are recorded
    const sameAsBefore = (t: Row, i: number) => i > 0 && turns[i - 1]!.attempt === t.attempt
      && JSON.stringify(turns[i - 1]!.turn.request.messages) === JSON.stringify(t.turn.request.messages);
    const retried = turns.filter(sameAsBefore);
    expect(retried.length).toBeGreaterThan(0);
    for (const t of retried) expect(t.observation).toBe(turns[turns.indexOf(t) - 1]!.observation);
    // the memory is a system message after the agent's own system message
    const late = turns.find((t) => t.attempt === 2)!;
    expect(late.turn.memory.placement).toBe('system');
    expect(late.prompt.startsWith(`${RULES}\n${late.turn.memory.text}\n`)).toBe(true);
  }, 240_000);

  it('an OpenAI Agents SDK agent (streamed runs) plays MineSweeper for 3 attempts, memory before its first user message', async () => {
    const id = await playSession(a, agentsSdkAgent, seed, { sampling: { seed: 22 }, memoryPlacement: 'user_prefix' });
    played.push(id);
    const turns = await checkSession(a, id, [1, 1]);
    for (const t of turns) {
      expect(decode(t.outputTokenIds)).toBe(t.output);
      expect(decode(t.promptTokenIds)).toBe(t.prompt);
      expect(t.logprobs).toHaveLength(t.outputTokenIds.length);
      expect(t.turn).toMatchObject({ api: 'chat', stream: true, sampling: { temperature: 0.9, maxTokens: 8 } });
      // the framework sends the instructions as a system message, then the history
      expect(t.turn.request.messages[0]).toEqual({ role: 'system', content: RULES });
    }
    // a later turn of an attempt sends the model's previous reply back in the history: its observation is the new board only
    const second = turns.find((t) => t.attempt === 0 && t.step === 1)!;
    expect(second.turn.request.messages.filter((m: { role: string }) => m.role === 'assistant')).toHaveLength(1);
    expect(second.observation).toMatch(/^ {2}1234\n1 /);
    const late = turns.find((t) => t.attempt === 2)!;
    expect(late.turn.memory.placement).toBe('user_prefix');
    expect(late.prompt.startsWith(`${RULES}\n${late.turn.memory.text}\n\n`)).toBe(true);
  }, 240_000);

  it('a training job on the builtin version trains on the turns, each credited with its return as a step is', async () => {
    expect(played).toHaveLength(2);
    const hyper = { epochs: 1, minibatchSize: 8, gammaStep: 0.9, gammaTraj: 0.5, returnMode: 'paper' };
    const job = await a.call('POST', '/v1/training/jobs', { algorithm: 'lamer', version: 'agents-v1', data: { env: ENV }, 
      hyperparameters: hyper });
    expect(job.status).toBe(201);
    let j = job.body;
    for (let i = 0; i < 2400 && (j.status === 'queued' || j.status === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      j = (await a.call('GET', `/v1/training/jobs/${job.body.id}`)).body;
    }
    expect(j.error).toBeNull();
    expect(j).toMatchObject({ status: 'succeeded', resultVersion: 'agents-v1' });
    let turnCount = 0;
    for (const id of played) {
      const all = await rows(a, id);
      const turns = all.filter((r) => r.turn);
      turnCount += turns.length + 2; // and the two reflections
      // the reward of a turn is the one posted with the row after it: 0 for a turn, the attempt's reward for the last
      const rewards = Array.from({ length: ATTEMPTS }, (_, n) => {
        const rs = all.filter((r) => r.attempt === n && r.kind === 'action');
        return rs.slice(1).map((r) => r.reward as number);
      });
      const want = sessionReturns(rewards, { gammaStep: 0.9, gammaTraj: 0.5, mode: 'paper' }).crossEpisode;
      for (const t of turns) {
        expect(t.return).toBeCloseTo(want[t.attempt]![t.step]!, 9);
        expect(Number.isFinite(t.advantage)).toBe(true);
      }
      for (const r of all.filter((x) => x.kind === 'reflection')) expect(Number.isFinite(r.advantage)).toBe(true);
    }
    expect(j.dataStats).toMatchObject({ sessions: 2, tasks: 1, turns: turnCount, droppedTurns: 0 });
    expect((await a.call('GET', '/v1/models/agents-v1')).body).toMatchObject({ parent: 'base', status: 'candidate' });
  }, 300_000);

  it('GET /v1/stats and `lamer export` show these sessions as any other (export lines schema-valid, with each turn record)', async () => {
    const stats = await a.call('GET', `/v1/stats?env=${ENV}`);
    expect(stats.status).toBe(200);
    expect(stats.body.groups).toEqual([
      expect.objectContaining({ modelVersion: 'base', env: ENV, mode: 'train', memory: 'reflection_only', sessions: 2, passAtK: { '1': 0, '2': 0, '3': 0 } }),
    ]);
    const out = join(dir, 'export.jsonl');
    const quiet = quietConsole();
    const code = await exportRun(['--data-dir', a.dataDir, '--out', out, '--mode', 'train']).finally(() => quiet.restore());
    expect(code).toBe(0);
    expect(quiet.errors().join('\n')).toContain(' of 2 sessions to ');
    const lines = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
    const schema = JSON.parse(readFileSync(join(import.meta.dirname, '../../../docs/export.schema.json'), 'utf8'));
    const ajv = new Ajv({ allErrors: true, strict: true });
    ajv.addFormat('date-time', (x: string) => !Number.isNaN(Date.parse(x)));
    const validate = ajv.compile(schema);
    for (const id of played) {
      const mine = lines.filter((l) => l.sessionId === id);
      const all = await rows(a, id);
      expect(mine.map((l) => `${l.attempt}/${l.step}/${l.kind}`)).toEqual(all.map((r) => `${r.attempt}/${r.step}/${r.kind}`));
      for (const [i, l] of mine.entries()) {
        expect(validate(l)).toBe(true);
        expect(l.turn ?? null).toEqual(all[i]!.turn);
        expect([l.output, l.outputTokenIds, l.return, l.advantage]).toEqual([all[i]!.output, all[i]!.outputTokenIds, all[i]!.return, all[i]!.advantage]);
      }
    }
  });
});

describe('an unmodified agent on a remote version (a second server behind the endpoint)', () => {
  let b: TestServer;
  beforeAll(async () => {
    b = await startTestServer({
      engine: 'openai',
      dataDir: join(dir, 'b'),
      openai: {
        baseUrl: `${a.url}/openai/v1`, model: 'base', kind: 'lamer', concurrency: 2, timeoutMs: 60_000, maxRetries: 0,
        maxActionTokens: 16, maxReflectionTokens: 64,
      },
    });
  });
  afterAll(async () => {
    await b?.close();
  });

  it("records the remote's token ids (given again for the same messages and sampling); the training batch holds the turns", async () => {
    const id = await playSession(b, openaiSdkAgent, seed, { sampling: { seed: 23 } });
    const turns = (await rows(b, id)).filter((r) => r.turn);
    // the engine record (what was sent to the remote, what it returned) is in the database, not the trajectory
    const conn = new Database(join(dir, 'b', 'lamer.db'), { readonly: true });
    const stored = conn.prepare('SELECT attempt, step, engine_record FROM steps WHERE session_id = ? AND turn IS NOT NULL').all(id);
    conn.close();
    const records = new Map(
      (stored as Array<{ attempt: number; step: number; engine_record: string }>).map((r) => [`${r.attempt}/${r.step}`, JSON.parse(r.engine_record)]),
    );
    expect(turns.length).toBeGreaterThanOrEqual(2 * ATTEMPTS);
    for (const t of turns) {
      const rec = records.get(`${t.attempt}/${t.step}`)!;
      const available = { promptTokenIds: true, outputTokenIds: true, logprobs: true };
      expect(rec).toMatchObject({ engine: 'openai', model: 'base', available });
      // the messages the remote got: the agent's, with the memory as a system message from attempt 1 on
      expect(rec.messages.length).toBe(t.turn.request.messages.length + (t.attempt > 0 ? 1 : 0));
      if (t.attempt > 0) expect(rec.messages[1]).toEqual({ role: 'system', content: t.turn.memory.text });
      const again = await a.call('POST', '/openai/v1/chat/completions', {
        model: 'base', messages: rec.messages, temperature: rec.sampling.temperature, top_p: rec.sampling.topP, top_k: rec.sampling.topK,
        seed: rec.sampling.seed, max_tokens: rec.sampling.maxTokens, logprobs: true, return_token_ids: true,
      });
      expect(again.status).toBe(200);
      expect(t.outputTokenIds).toEqual(again.body.choices[0].token_ids);
      expect(t.promptTokenIds).toEqual(again.body.prompt_token_ids);
      expect(t.output).toBe(again.body.choices[0].message.content);
      expect(decode(t.outputTokenIds)).toBe(t.output);
      const lps = again.body.choices[0].logprobs.content.map((x: { logprob: number }) => x.logprob) as number[];
      expect(t.logprobs).toHaveLength(lps.length);
      t.logprobs.forEach((x: number, i: number) => expect(x).toBeCloseTo(lps[i]!, 5));
    }

    const job = await b.call('POST', '/v1/training/jobs', { algorithm: 'lamer' });
    expect(job.status).toBe(201);
    let j = job.body;
    for (let i = 0; i < 600 && (j.status === 'queued' || j.status === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      j = (await b.call('GET', `/v1/training/jobs/${job.body.id}`)).body;
    }
    expect(j.status).toBe('succeeded');
    const lines = readFileSync(join(dir, 'b', 'datasets', job.body.id, 'batch.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const after = await rows(b, id);
    for (const t of turns) {
      const line = lines.find((l) => l.sessionId === id && l.attempt === t.attempt && l.step === t.step && l.kind === 'action');
      expect(line).toBeDefined();
      const row = after.find((r) => r.attempt === t.attempt && r.step === t.step && r.kind === 'action')!;
      expect(line).toMatchObject({ outputTokenIds: t.outputTokenIds, promptTokenIds: t.promptTokenIds, oldLogprobs: t.logprobs });
      expect(line.output).toBe(t.output);
      expect(line.messages).toEqual(records.get(`${t.attempt}/${t.step}`)!.messages);
      expect(line.sampling).toMatchObject({ temperature: 0.9, maxTokens: 8 });
      expect(line.advantage).toBeCloseTo(row.advantage, 12);
      expect(line.return).toBeCloseTo(row.return, 12);
    }
  }, 300_000);
});
