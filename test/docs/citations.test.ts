/**
 * Every citation in the code and docs points into this repository:
 * - no file cites the design notes that live outside it (the method, design and performance notes
 *   of the project's shared folder, by path or by name alone: OUTSIDE below); the method is
 *   docs/method.md;
 * - every `docs/<page>.md#anchor` link (and, inside docs/, `<page>.md#anchor` and `#anchor`) names a
 *   heading of that page, slugged as GitHub slugs headings;
 * - every quoted section reference, `docs/<page>.md "Title"` or `README "Title"`, names a heading
 *   of that page (a leading section number such as `7. ` may be left out), or for the README also
 *   a bold paragraph label (`**Native tfjs.**`).
 * - every relative Markdown link (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`) names a
 *   file of the repository, and its anchor a heading of that file when it is Markdown;
 * Files: the tracked text files under src/, test/, bench/, experiments/, scripts/, docs/, models/,
 * clients/ and README.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const ROOTS = ['src', 'test', 'bench', 'experiments', 'scripts', 'docs', 'models', 'clients', 'README.md'];
const TEXT = /\.(ts|js|mjs|cjs|md|py|sh|json|html|css|txt)$/;

/** Tracked files under ROOTS (git ls-files), or every file there when git is unavailable. */
function files(): string[] {
  let list: string[];
  try {
    list = execFileSync('git', ['ls-files', '-z', '--', ...ROOTS], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  } catch {
    list = ROOTS.flatMap((r) => walk(join(ROOT, r))).map((p) => relative(ROOT, p));
  }
  return list.filter((f) => TEXT.test(f) && existsSync(join(ROOT, f)));
}

function walk(p: string): string[] {
  if (!existsSync(p)) return [];
  if (!statSync(p).isDirectory()) return [p];
  return readdirSync(p).filter((n) => n !== 'node_modules' && !n.startsWith('.')).flatMap((n) => walk(join(p, n)));
}

const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');

/** The headings of a Markdown file (outside code fences), as written. */
function headings(md: string): string[] {
  const out: string[] = [];
  let fence = false;
  for (const line of md.split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    else if (!fence && /^#{1,6}\s/.test(line)) out.push(line.replace(/^#+\s*/, '').trim());
  }
  return out;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, ... */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const h of headings(md)) {
    const base = h.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Whether `title` names a heading: a prefix of one, with or without its section number. */
const namesHeading = (md: string, title: string) =>
  headings(md).map((h) => h.replace(/`/g, '')).some((h) => h.startsWith(title) || h.replace(/^\d+\.\s*/, '').startsWith(title));

/** Every checked file but this one, whose patterns and examples would match themselves. */
const ALL = files().filter((f) => f !== 'test/docs/citations.test.ts');
const docPage = (name: string) => (existsSync(join(ROOT, 'docs', name)) ? read(join('docs', name)) : null);

/** Citations of the notes kept outside the repository. */
const OUTSIDE = /(?<![\w/.-])shared\/[A-Z][\w-]*\.md|\b(?:LAMER|DESIGN|PERF-NOTES|STACK-NOTES)\.md\b|\bDESIGN §|\bLAMER §/g;

/** Files allowed to hold such citations, with how many (none: every citation points into the repository). */
const STILL_CITING: Record<string, number> = {};

describe('citations point into the repository', () => {
  it('finds the files it checks', () => {
    expect(ALL).toContain('docs/method.md');
    expect(ALL).toContain('README.md');
    expect(ALL).toContain('src/training/maths/returns.ts');
  });

  it('no file cites the design notes kept outside the repository', () => {
    const found: string[] = [];
    for (const f of ALL) {
      const n = read(f).match(OUTSIDE)?.length ?? 0;
      if (n > (STILL_CITING[f] ?? 0)) found.push(`${f}: ${n}`);
    }
    expect(found).toEqual([]);
  });

  it('every docs/<page>.md#anchor link names a heading of that page', () => {
    const broken: string[] = [];
    for (const f of ALL) {
      const text = read(f);
      // a page directly in docs/ links its siblings by name; pages deeper in docs/ are checked by
      // the relative-link test below
      const inDocs = f.startsWith('docs/') && !f.slice('docs/'.length).includes('/');
      const links = [...text.matchAll(/(?:docs\/)([\w-]+\.md)#([\w-]+)/g)].map((m) => [m[1]!, m[2]!] as const);
      if (inDocs) {
        for (const m of text.matchAll(/\]\(([\w-]+\.md)#([\w-]+)\)/g)) links.push([m[1]!, m[2]!]);
        for (const m of text.matchAll(/\]\(#([\w-]+)\)/g)) links.push([f.slice('docs/'.length), m[1]!]);
      }
      for (const [page, anchor] of links) {
        const md = docPage(page);
        if (md === null) broken.push(`${f}: docs/${page} does not exist`);
        else if (!anchors(md).has(anchor)) broken.push(`${f}: docs/${page}#${anchor}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every quoted section reference names a heading of its page', () => {
    const readme = read('README.md');
    const broken: string[] = [];
    for (const f of ALL) {
      const text = read(f);
      for (const m of text.matchAll(/(?:docs\/|(?<=\]\())([\w-]+\.md)\)? \(?"([^"\n]+)"/g)) {
        const md = docPage(m[1]!);
        if (md !== null && !namesHeading(md, m[2]!)) broken.push(`${f}: docs/${m[1]} "${m[2]}"`);
      }
      for (const m of text.matchAll(/\bREADME(?:\.md)?`?\)? \(?"([^"\n]+)"/g)) {
        const title = m[1]!;
        const bold = readme.split('\n').some((l) => l.startsWith(`**${title}`));
        if (!namesHeading(readme, title) && !bold) broken.push(`${f}: README "${title}"`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every relative Markdown link names a file of the repository, and its #anchor a heading there', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const f of ALL.filter((x) => x.endsWith('.md'))) {
      // links inside fenced code blocks are examples, not links
      const text = read(f).replace(/^```[\s\S]*?^```/gm, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z][\w+.-]*:/i.test(target)) continue; // https:, mailto:
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const resolved = file ? join(dirname(f), file) : f;
        checked++;
        if (!existsSync(join(ROOT, resolved))) broken.push(`${f}: ${target} (no such file)`);
        else if (anchor && resolved.endsWith('.md') && !anchors(read(resolved)).has(anchor)) {
          broken.push(`${f}: ${target} (no such heading)`);
        }
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(broken).toEqual([]);
  });

  it('docs/method.md lists where the code departs from the paper and its sources', () => {
    const method = read('docs/method.md');
    expect(anchors(method)).toContain('departures-from-the-paper');
    expect(anchors(method)).toContain('sources');
  });
});
