/**
 * docs/RESULTS.md and its history (docs/results/history/): the marked sections that the experiment
 * scripts rewrite sit in the files those scripts write to by default, each once; the current page
 * and the history link to each other, and the history's index lists every file it holds.
 * - experiments/eval-base.ts (`npm run eval:base -- --results docs/RESULTS.md`): `base-policy`;
 * - experiments/lamer-vs-gigpo.sh (RESULTS, default docs/RESULTS.md) through
 *   experiments/lamer-vs-gigpo-report.ts: `lamer-vs-gigpo-paper`; the report's one-game layout
 *   (the MineSweeper 4x4 run): `lamer-vs-gigpo-redone`, in the history file its header names.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hasSection, sectionMarkers } from '../../src/eval/compare.js';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');
const HISTORY = 'docs/results/history';
const REDONE_FILE = `${HISTORY}/2026-12-01-lamer-vs-gigpo-4x4.md`;

/** Every Markdown file under docs/, as a path from the repository root. */
function docsMarkdown(dir = 'docs'): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory()) return docsMarkdown(p);
    return e.name.endsWith('.md') ? [p] : [];
  });
}

describe('docs/RESULTS.md and the sections the experiment scripts write', () => {
  it('the lamer-vs-gigpo script writes to docs/RESULTS.md by default, which holds its section', () => {
    const script = read('experiments/lamer-vs-gigpo.sh');
    const m = /^RESULTS=\$\{RESULTS-([^}]+)\}$/m.exec(script);
    expect(m?.[1]).toBe('docs/RESULTS.md');
    expect(hasSection(read(m![1]!), 'lamer-vs-gigpo-paper')).toBe(true);
  });

  it('eval:base and the report name the files that hold their sections', () => {
    expect(read('experiments/eval-base.ts')).toContain('e.g. docs/RESULTS.md');
    expect(hasSection(read('docs/RESULTS.md'), 'base-policy')).toBe(true);
    const report = read('experiments/lamer-vs-gigpo-report.ts');
    expect(report).toContain('lamer-vs-gigpo-paper, which docs/RESULTS.md holds');
    expect(report).toContain(`lamer-vs-gigpo-redone for the one-game\n * layout, which ${REDONE_FILE} holds`);
    expect(hasSection(read(REDONE_FILE), 'lamer-vs-gigpo-redone')).toBe(true);
  });

  it('each marked section appears once, in one file under docs/', () => {
    const where = new Map<string, string[]>();
    for (const f of docsMarkdown()) {
      for (const m of read(f).matchAll(/<!-- ([\w-]+):begin -->/g)) where.set(m[1]!, [...(where.get(m[1]!) ?? []), f]);
    }
    expect(Object.fromEntries(where)).toEqual({
      'base-policy': ['docs/RESULTS.md'],
      'lamer-vs-gigpo-paper': ['docs/RESULTS.md'],
      'lamer-vs-gigpo-redone': [REDONE_FILE],
    });
    for (const [name, [file]] of where) {
      const doc = read(file!);
      const { begin, end } = sectionMarkers(name);
      expect(doc.split(begin).length, `${file}: ${begin}`).toBe(2);
      expect(doc.split(end).length, `${file}: ${end}`).toBe(2);
    }
  });

  it('RESULTS.md links to the history, whose index lists every file, and each file links back', () => {
    expect(read('docs/RESULTS.md')).toContain('](results/history/README.md)');
    const index = read(`${HISTORY}/README.md`);
    const files = readdirSync(join(ROOT, HISTORY)).filter((f) => f.endsWith('.md') && f !== 'README.md');
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      expect(index, f).toContain(`](${f})`);
      const text = read(`${HISTORY}/${f}`);
      expect(text, f).toContain('](README.md)');
      expect(text, f).toContain('](../../RESULTS.md)');
    }
  });
});
