/**
 * Static checks of the Dockerfile (no Docker engine runs here, and hadolint is not packaged in
 * this machine's Debian): the file is parsed into stages and instructions and its structure is
 * asserted: multi-stage, pinned base tags, a Node LTS that better-sqlite3 supports, non-root
 * users, HEALTHCHECK on /healthz, the data volume, configuration by LAMER_* variables that
 * src/config.ts reads, no secrets, a CUDA target with @tensorflow/tfjs-node-gpu, .dockerignore.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  name: string | null;
  from: string;
  body: Instruction[];
}

/** Splits a Dockerfile into global ARGs and stages (line continuations joined, comments dropped). */
function parseDockerfile(text: string): { args: Map<string, string>; stages: Stage[] } {
  const lines: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    if (/^\s*#/.test(raw)) continue;
    const line = raw.replace(/\s+$/, '');
    if (line.endsWith('\\')) {
      cur += line.slice(0, -1) + ' ';
      continue;
    }
    cur += line;
    if (cur.trim()) lines.push(cur.trim());
    cur = '';
  }
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const l of lines) {
    const m = /^(\w+)\s+(.*)$/s.exec(l);
    if (!m) throw new Error(`unparsable line: ${l}`);
    const op = m[1]!.toUpperCase();
    const rest = m[2]!;
    if (op === 'FROM') {
      const f = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      if (!f) throw new Error(`bad FROM: ${l}`);
      stages.push({ from: f[1]!, name: f[2] ?? null, body: [] });
    } else if (stages.length === 0) {
      if (op !== 'ARG') throw new Error(`${op} before the first FROM`);
      const [k, v] = rest.split('=', 2);
      args.set(k!.trim(), (v ?? '').trim());
    } else {
      stages[stages.length - 1]!.body.push({ op, args: rest });
    }
  }
  return { args, stages };
}

function expand(s: string, args: Map<string, string>): string {
  return s.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string | undefined, b: string | undefined) => args.get((a ?? b)!) ?? '');
}

const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const { args, stages } = parseDockerfile(dockerfile);
const byName = new Map(stages.filter((s) => s.name).map((s) => [s.name!, s]));
const stage = (n: string): Stage => {
  const s = byName.get(n);
  if (!s) throw new Error(`no stage ${n}`);
  return s;
};
const ops = (s: Stage, op: string) => s.body.filter((i) => i.op === op);
/** ENV instructions of a stage as a map (`ENV A=1 B=2` form). */
function envOf(s: Stage): Map<string, string> {
  const env = new Map<string, string>();
  for (const i of ops(s, 'ENV')) for (const m of i.args.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env.set(m[1]!, m[2]!.replace(/^"|"$/g, ''));
  return env;
}
const SERVING = ['runtime', 'gpu'];

describe('Dockerfile structure', () => {
  it('is multi-stage with the runtime as the default (last) target', () => {
    expect(stages.map((s) => s.name)).toEqual(['deps', 'app', 'node-dist', 'gpu-deps', 'gpu', 'runtime']);
    expect(stages[stages.length - 1]!.name).toBe('runtime');
    // every COPY --from names an earlier stage
    stages.forEach((s, i) => {
      for (const c of ops(s, 'COPY')) {
        const from = /--from=(\S+)/.exec(c.args)?.[1];
        if (from) expect(stages.slice(0, i).map((x) => x.name)).toContain(from);
      }
    });
  });

  it('pins base images to explicit tags on a Node LTS that better-sqlite3 supports', () => {
    const images = stages.filter((s) => !byName.has(s.from)).map((s) => expand(s.from, args));
    expect([...new Set(images)]).toEqual(['node:24-bookworm-slim', 'nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04']);
    for (const img of images) expect(img).toMatch(/^[\w./-]+:[\w.-]*\d[\w.-]*$/); // a tag with a version, never latest
    const major = Number(args.get('NODE_VERSION'));
    expect(major % 2).toBe(0); // even majors are the LTS lines
    const engines = (JSON.parse(readFileSync(join(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    expect(engines.split('||').map((s) => s.trim())).toContain(`${major}.x`);
    expect(expand(stage('runtime').from, args)).toMatch(/-slim$/);
  });

  it('installs production dependencies only, inside the image', () => {
    expect(ops(stage('deps'), 'RUN').some((r) => r.args.includes('npm ci --omit=dev'))).toBe(true);
    expect(ops(stage('gpu-deps'), 'RUN').some((r) => r.args.includes('npm ci --omit=dev'))).toBe(true);
    for (const s of stages) {
      for (const r of ops(s, 'RUN')) {
        if (r.args.includes('apt-get install')) {
          expect(r.args).toContain('--no-install-recommends');
          expect(r.args).toContain('rm -rf /var/lib/apt/lists/*');
        }
      }
    }
    // the serving stages take node_modules from the deps stages, never from the build context
    expect(ops(stage('runtime'), 'COPY').map((c) => c.args)).toContain('--from=deps /app/node_modules /app/node_modules');
    expect(ops(stage('gpu'), 'COPY').map((c) => c.args)).toContain('--from=gpu-deps /app/node_modules /app/node_modules');
  });

  it.each(SERVING)('%s: non-root user, HEALTHCHECK on /healthz, data volume, port, entrypoint', (name) => {
    const s = stage(name);
    const users = ops(s, 'USER').map((u) => u.args.trim());
    expect(users.length).toBeGreaterThan(0);
    const user = users[users.length - 1]!;
    expect(['root', '0', '0:0']).not.toContain(user);
    const lastUser = s.body.lastIndexOf(ops(s, 'USER').pop()!);
    expect(lastUser).toBeLessThan(s.body.findIndex((i) => i.op === 'ENTRYPOINT'));
    const hc = ops(s, 'HEALTHCHECK');
    expect(hc).toHaveLength(1);
    expect(hc[0]!.args).toContain('/healthz');
    expect(hc[0]!.args).toMatch(/CMD \["node", "-e", "fetch\(/);
    expect(hc[0]!.args).not.toMatch(/curl|wget/);
    const env = envOf(s);
    expect(ops(s, 'VOLUME').map((v) => v.args)).toEqual(['["/data"]']);
    expect(env.get('LAMER_DATA_DIR')).toBe('/data');
    expect(env.get('LAMER_HOST')).toBe('0.0.0.0');
    expect(ops(s, 'EXPOSE').map((e) => e.args)).toEqual([env.get('LAMER_PORT')]);
    expect(ops(s, 'ENTRYPOINT').map((e) => e.args)).toEqual(['["node", "--import", "tsx", "src/cli/index.ts"]']);
    expect(ops(s, 'CMD').map((e) => e.args)).toEqual(['["serve"]']);
  });

  it('configures only LAMER_* variables that src/config.ts reads, and bakes in no secrets', () => {
    const config = readFileSync(join(ROOT, 'src/config.ts'), 'utf8');
    for (const s of stages) {
      for (const [k, v] of envOf(s)) {
        if (k.startsWith('LAMER_')) expect(config, `src/config.ts reads ${k}`).toMatch(new RegExp(`\\b${k}\\b`));
        expect(`${k}=${v}`).not.toMatch(/API_KEY|SECRET|PASSWORD|TOKEN/i);
      }
      for (const a of ops(s, 'ARG')) expect(a.args).not.toMatch(/API_KEY|SECRET|PASSWORD|TOKEN/i);
    }
    const instructions = stages.flatMap((s) => s.body.map((i) => `${i.op} ${i.args}`)).join('\n');
    expect(instructions).not.toMatch(/LAMER_API_KEYS/); // keys come from the deployment, never the image
  });

  it('has a GPU target on a CUDA base with @tensorflow/tfjs-node-gpu and the native backend forced', () => {
    expect(expand(stage('gpu').from, args)).toMatch(/^nvidia\/cuda:11\.\d+\.\d+-cudnn8-runtime-/);
    // the native packages are optional dependencies of the project, locked at the tfjs version
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; optional?: boolean }> };
    const tfjs = (JSON.parse(readFileSync(join(ROOT, 'node_modules/@tensorflow/tfjs/package.json'), 'utf8')) as { version: string }).version;
    expect(args.get('TFJS_VERSION')).toBe(tfjs); // native bindings match the tfjs the server imports
    for (const pkg of ['@tensorflow/tfjs-node', '@tensorflow/tfjs-node-gpu']) {
      expect(lock.packages[`node_modules/${pkg}`], pkg).toMatchObject({ version: tfjs, optional: true });
    }
    // the GPU build fails unless npm ci really installed tfjs-node-gpu at that version ...
    const gpuRun = ops(stage('gpu-deps'), 'RUN').map((r) => r.args).join('\n');
    expect(gpuRun).toContain('npm ci --omit=dev');
    expect(gpuRun).toMatch(/node_modules\/@tensorflow\/tfjs-node-gpu\/package\.json.*process\.env\.TFJS_VERSION.*process\.exit\(1\)/);
    // ... and the CPU image does not carry the CUDA package
    expect(ops(stage('deps'), 'RUN').map((r) => r.args).join('\n')).toContain('rm -rf node_modules/@tensorflow/tfjs-node-gpu');
    expect(envOf(stage('gpu')).get('LAMER_TFJS_BACKEND')).toBe('tensorflow');
  });
});

describe('.dockerignore', () => {
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  it('keeps host node_modules, git, data and env files out, and the app in', () => {
    for (const p of ['node_modules', '.git', 'data', '.env', '**/*.db']) expect(ignore).toContain(p);
    for (const p of ['src', 'bin', 'migrations', 'models', 'docker', 'package.json', 'package-lock.json']) expect(ignore).not.toContain(p);
  });
});
