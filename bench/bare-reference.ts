/**
 * The bare reference of `npm run bench:http`: the least an HTTP step route can do, run as its own
 * process so that the bench measures it beside the lamer server in one run. A Fastify 5 server
 * with the same two routes the bench drives:
 * - `POST /v1/sessions`: the body validated by Fastify's ajv against a small schema, one
 *   better-sqlite3 INSERT, 201 with `{ id }`;
 * - `POST /v1/sessions/:id/steps`: the body validated against the step fields (attempt, step,
 *   observation, reward, done, success, availableActions), one INSERT of the step, 200 with a
 *   small answer naming an action;
 * - `GET /readyz`: 200 once listening.
 * SQLite as the lamer server opens it: WAL journal, `synchronous = NORMAL`, each INSERT its own
 * (auto-committed) transaction, committed before the answer.
 *
 * Run: `tsx bench/bare-reference.ts` with BARE_PORT (required) and BARE_DB (the SQLite file to
 * create). Logs nothing; exits on SIGTERM.
 */
import Database from 'better-sqlite3';
import Fastify from 'fastify';

const port = Number(process.env.BARE_PORT);
const file = process.env.BARE_DB;
if (!Number.isInteger(port) || port <= 0 || !file) {
  console.error('bare-reference: BARE_PORT and BARE_DB must be set');
  process.exit(2);
}

const sqlite = new Database(file);
sqlite.pragma('journal_mode = WAL');
sqlite.pragma('synchronous = NORMAL');
sqlite.exec(`CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, task_id TEXT NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS steps (session_id TEXT NOT NULL, attempt INTEGER NOT NULL, step INTEGER NOT NULL, observation TEXT NOT NULL,
    reward REAL NOT NULL, done INTEGER NOT NULL, action TEXT, created_at INTEGER NOT NULL, PRIMARY KEY (session_id, attempt, step))`);
const insertSession = sqlite.prepare('INSERT INTO sessions (id, task_id, body, created_at) VALUES (?, ?, ?, ?)');
const insertStep = sqlite.prepare(
  'INSERT INTO steps (session_id, attempt, step, observation, reward, done, action, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
);

const app = Fastify({ logger: false });
let n = 0;

app.post(
  '/v1/sessions',
  {
    schema: {
      body: {
        type: 'object',
        required: ['taskId', 'instructions'],
        properties: {
          taskId: { type: 'string', minLength: 1, maxLength: 256 },
          instructions: { type: 'string', maxLength: 65536 },
          maxAttempts: { type: 'integer', minimum: 1, maximum: 32 },
          maxSteps: { type: 'integer', minimum: 1, maximum: 1000 },
          env: { type: 'string', maxLength: 64 },
        },
        additionalProperties: false,
      },
    },
  },
  async (req, reply) => {
    const body = req.body as { taskId: string };
    const id = `ses_${process.pid}_${n++}`;
    insertSession.run(id, body.taskId, JSON.stringify(body), Date.now());
    reply.code(201);
    return { id };
  },
);

app.post(
  '/v1/sessions/:id/steps',
  {
    schema: {
      params: { type: 'object', properties: { id: { type: 'string', maxLength: 64 } }, required: ['id'] },
      body: {
        type: 'object',
        required: ['attempt', 'step', 'observation'],
        properties: {
          attempt: { type: 'integer', minimum: 0 },
          step: { type: 'integer', minimum: 0 },
          observation: { type: 'string', maxLength: 65536 },
          reward: { type: 'number' },
          done: { type: 'boolean' },
          success: { type: 'boolean' },
          availableActions: { type: 'array', items: { type: 'string', maxLength: 256 }, maxItems: 256 },
        },
        additionalProperties: false,
      },
    },
  },
  async (req) => {
    const { id } = req.params as { id: string };
    const b = req.body as { attempt: number; step: number; observation: string; reward?: number; done?: boolean; availableActions?: string[] };
    const action = b.done ? null : (b.availableActions?.[0] ?? 'noop');
    insertStep.run(id, b.attempt, b.step, b.observation, b.reward ?? 0, b.done ? 1 : 0, action, Date.now());
    return { sessionId: id, attempt: b.attempt, step: b.step, action };
  },
);

app.get('/readyz', async () => ({ ready: true }));

process.once('SIGTERM', () => {
  void app.close().then(() => {
    sqlite.close();
    process.exit(0);
  });
});

await app.listen({ port, host: '127.0.0.1' });
