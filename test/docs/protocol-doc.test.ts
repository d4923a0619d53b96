/**
 * docs/protocol.md (and docs/deploy.md's configuration table) stay true to the code on the figures they state:
 * the builtin engine's candidate limit for `models/base` (half its context, in tokens of its
 * tokenizer + EOS), the generation caps of src/model/sampling.ts, the session's `env` label
 * (free text of the create schema's length; the shipped base's env tags), and the fields required
 * to open a session (the create schema's `required`, named beside README's curl example).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/model/sampling.js';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (...p: string[]) => readFileSync(join(ROOT, ...p), 'utf8');
// the docs wrap lines: compare with every run of whitespace as one space
const flat = (s: string) => s.replace(/\s+/g, ' ');
const protocol = flat(read('docs', 'protocol.md'));
const readme = flat(read('README.md'));
const deploy = flat(read('docs', 'deploy.md'));
const base = JSON.parse(read('models', 'base', 'model.json')).userDefinedMetadata.lamer as {
  config: { block_size: number }; promptFormat: { envTags: string[] };
};

describe('docs/protocol.md', () => {
  it('states the candidate limit of models/base as docs/deploy.md does: half the context, in tokens + EOS', () => {
    const half = Math.floor(base.config.block_size / 2);
    expect(protocol).toContain(`each action (its tokens in the version's tokenizer + EOS) must also fit half the model's context, ${half} tokens for \`models/base\``);
    expect(deploy).toContain(`each candidate (its tokens in the version's tokenizer + EOS) to fit half the model's context (${half} tokens for \`models/base\``);
    expect(protocol).not.toMatch(/\d+ bytes for `models\/base`/);
  });

  it("states the builtin engine's generation caps", () => {
    expect(protocol).toContain(`the builtin engine samples at most ${DEFAULT_LIMITS.maxActionTokens} tokens for it (and at most ${DEFAULT_LIMITS.maxReflectionTokens} for a reflection)`);
  });

  it("describes env as a free label of the create schema's length, and the shipped base's env tags", () => {
    const schema = JSON.parse(read('openapi', 'openapi.json')).paths['/v1/sessions'].post.requestBody.content['application/json'].schema;
    const env = schema.properties.env as { type: string; minLength: number; maxLength: number; pattern?: string; enum?: unknown };
    expect(env.type).toBe('string');
    expect(env.pattern).toBeUndefined();
    expect(env.enum).toBeUndefined();
    expect(protocol).toContain(`\`env\` is a free-text label (any string of ${env.minLength}-${env.maxLength} characters is accepted;`);
    expect(protocol).toContain(`(the shipped base: ${base.promptFormat.envTags.map((t) => `\`${t}\``).join(', ')})`);
  });
});

describe('README.md', () => {
  it("names exactly the create schema's required fields next to the curl example", () => {
    const schema = JSON.parse(read('openapi', 'openapi.json')).paths['/v1/sessions'].post.requestBody.content['application/json'].schema;
    // when this changes, README's "Opening a session needs two fields" sentence must change with it
    expect([...(schema.required as string[])].sort()).toEqual(['instructions', 'taskId']);
    const section = readme.slice(readme.indexOf('## A whole session with curl'), readme.indexOf('## Endpoints'));
    expect(section).toContain('Opening a session needs two fields: `taskId` (');
    expect(section).toContain(' and `instructions` (');
    expect(section).toContain("`body/instructions must have required property 'instructions'`");
    expect(protocol).toContain('Only `taskId` and `instructions` are required.');
  });
});
