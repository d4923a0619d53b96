/**
 * The layer report (scripts/arch-report.ts) as assertions over every `.ts`, `.js` and `.mjs` file
 * of src/: imports follow the layer order of docs/architecture.md, units import each other
 * without cycles, SQL stays in src/db and HTTP statuses in the HTTP layer. Function and line
 * length are held to ceilings, today's figures: they may fall, not grow.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FUNCTION_LIMIT, LINE_LIMIT, archReport, layerBreak } from '../scripts/arch-report.js';
import { tmpDir } from './helpers/index.js';

/**
 * Imports against the layer order that are meant, each type-only (docs/architecture.md "Which
 * folder may import which"). None today: the remote-version settings that `config.ts` validates
 * are declared below it, in `shared/remote-version.ts`.
 */
const ALLOWED_UPWARD: Array<{ from: string; to: string }> = [];

/**
 * The order inside src/training: `run/` (the job runner) uses `data/` and `maths/`, never the
 * other way round; the types all three share (`model-api.ts`) sit beside them, at the bottom.
 */
const INNER_FORBIDDEN = [
  { from: 'training/maths', to: 'training/run' },
  { from: 'training/data', to: 'training/run' },
];

/** Functions over FUNCTION_LIMIT (80) lines: the ceiling; lower it when the count falls. */
const FUNCTIONS_OVER_LIMIT_CEILING = 1;
/** Lines over LINE_LIMIT (140) characters: the ceiling; lower it when the count falls. */
const LONG_LINES_CEILING = 602;

const report = archReport();

describe('the layer report of src/', () => {
  it('reads the plain JavaScript modules too (the dashboard and the worker bootstraps)', () => {
    expect(report.largestFiles.map((f) => f.file)).toContain('ui/views.js');
    expect(report.filesWithLongLines.map((f) => f.file)).toContain('ui/views.js');
  });

  it('no import runs against the layer order, except the listed type-only ones', () => {
    const unexpected = report.upwardImports.filter((u) => !ALLOWED_UPWARD.some((a) => a.from === u.from && a.to === u.to));
    expect(unexpected.map((u) => `${u.from}:${u.line} -> ${u.to}: ${u.why}`)).toEqual([]);
    for (const u of report.upwardImports) expect(u.typeOnly, `${u.from}:${u.line} -> ${u.to} must stay type-only`).toBe(true);
  });

  it('inside training/, maths/ and data/ import nothing from run/', () => {
    const broken = report.innerImports.filter((i) => INNER_FORBIDDEN.some((r) => r.from === i.fromFolder && r.to === i.toFolder));
    expect(broken.map((i) => `${i.from}:${i.line} -> ${i.to}`)).toEqual([]);
    // the rule reads real edges: run/ does import maths/
    expect(report.innerImports.some((i) => i.fromFolder === 'training/run' && i.toFolder === 'training/maths')).toBe(true);
  });

  it('no cycle between units', () => {
    expect(report.unitCycles.map((c) => c.join(' -> '))).toEqual([]);
  });

  it('the routes reach the model and the engines only through the services', () => {
    const edges = Object.keys(report.importEdges).filter((e) => /^routes -> (model|policy|db)$/.test(e));
    expect(edges).toEqual([]);
  });

  it('no SQL outside src/db and no HTTP status outside the HTTP layer', () => {
    expect(report.sqlOutsideDb).toEqual([]);
    expect(report.statusOutsideHttp).toEqual([]);
  });

  it(`functions over ${FUNCTION_LIMIT} lines and lines over ${LINE_LIMIT} characters do not grow`, () => {
    const functions = report.functionsOver80.length;
    const lines = report.linesOver140;
    console.log(
      `src/: ${functions} functions over ${FUNCTION_LIMIT} lines (ceiling ${FUNCTIONS_OVER_LIMIT_CEILING}), ` +
        `${lines} lines over ${LINE_LIMIT} characters (ceiling ${LONG_LINES_CEILING}, longest ${report.longestLine})`,
    );
    if (functions < FUNCTIONS_OVER_LIMIT_CEILING) console.log(`lower FUNCTIONS_OVER_LIMIT_CEILING to ${functions}`);
    if (lines < LONG_LINES_CEILING) console.log(`lower LONG_LINES_CEILING to ${lines}`);
    const over = report.functionsOver80.map((f) => `${f.file} ${f.name}: ${f.lines} lines`);
    expect(functions, `functions over ${FUNCTION_LIMIT} lines:\n${over.join('\n')}`).toBeLessThanOrEqual(FUNCTIONS_OVER_LIMIT_CEILING);
    const files = report.filesWithLongLines.slice(0, 10).map((f) => `${f.file}: ${f.lines}`);
    expect(lines, `lines over ${LINE_LIMIT} characters, most in:\n${files.join('\n')}`).toBeLessThanOrEqual(LONG_LINES_CEILING);
  });
});

/** Writes `files` (path under src/ -> text) into a fresh folder and returns the folder. */
function srcTree(files: Record<string, string>): string {
  const root = tmpDir('lamer-arch-');
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), text);
  }
  return root;
}

describe('the layer report on a made-up src/', () => {
  const long = `// ${'x'.repeat(LINE_LIMIT)}\n`;
  const longFunction = `export function big() {\n${'  void 0;\n'.repeat(FUNCTION_LIMIT)}}\n`;
  const r = archReport(
    srcTree({
      'domain.ts': 'export const A = 1;\n',
      'model/m.js': "import { P } from '../policy/p.js';\nexport const M = P;\n",
      'policy/p.ts': "import { M } from '../model/m.js';\nexport const P = 1;\nexport type T = typeof M;\n",
      'policy/boot.mjs': "await import('../agent/a.js');\n" + longFunction,
      'agent/a.ts': "import type { M } from '../model/m.js';\nexport const q = 'SELECT * FROM steps';\n" + long,
      'ui/v.js': "import { A } from '../domain.js';\nexport const V = A;\n" + long + long,
      'training/maths/x.ts': "import type { T } from '../run/r.js';\nimport { U } from '../u.js';\nexport const X = 1;\n",
      'training/run/r.ts': "import { X } from '../maths/x.js';\nexport type T = typeof X;\n",
      'training/u.ts': 'export const U = 1;\n',
    }),
  );

  it('counts .js and .mjs files, their imports (dynamic ones too), functions and long lines', () => {
    expect(r.files).toBe(9);
    expect(r.importEdges).toEqual({ 'agent -> model': 1, 'model -> policy': 1, 'policy -> agent': 1, 'policy -> model': 1, 'ui -> domain': 1 });
    expect(r.upwardImports.map((u) => `${u.from} -> ${u.to}`).sort()).toEqual([
      'model/m.js -> policy/p.js',
      'policy/boot.mjs -> agent/a.js',
      'ui/v.js -> domain.js',
    ]);
    expect(r.functionsOver80.map((f) => `${f.file} ${f.name} ${f.lines}`)).toEqual([`policy/boot.mjs big ${FUNCTION_LIMIT + 2}`]);
    expect(r.linesOver140).toBe(3);
    expect(r.sqlOutsideDb).toEqual(['agent/a.ts']);
  });

  it('lists the imports between the folders of one unit, with the unit\'s own files as a folder', () => {
    expect(r.innerImports.map((i) => `${i.from}:${i.line} ${i.fromFolder} -> ${i.toFolder}`)).toEqual([
      'training/maths/x.ts:1 training/maths -> training/run',
      'training/maths/x.ts:2 training/maths -> training',
      'training/run/r.ts:1 training/run -> training/maths',
    ]);
  });

  it('finds the cycles between units, each once', () => {
    expect(r.unitCycles.map((c) => c.join(' -> ')).sort()).toEqual(['agent -> model -> policy -> agent', 'model -> policy -> model']);
  });
});

describe('the layer rules themselves', () => {
  it('a unit may import lower units and the bottom, never higher ones', () => {
    expect(layerBreak('routes', 'agent')).toBeNull();
    expect(layerBreak('routes', 'serving')).toBeNull();
    expect(layerBreak('plugins', 'serving')).toBeNull();
    expect(layerBreak('serving', 'agent')).toBeNull();
    expect(layerBreak('serving', 'training')).toMatch(/imports higher/);
    expect(layerBreak('agent', 'serving')).toMatch(/imports higher/);
    expect(layerBreak('agent', 'domain')).toBeNull();
    expect(layerBreak('cli', 'envs')).toBeNull();
    expect(layerBreak('recipes', 'envs')).toBeNull();
    expect(layerBreak('recipes', 'training')).toBeNull();
    expect(layerBreak('cli', 'recipes')).toBeNull();
    expect(layerBreak('recipes', 'cli')).toMatch(/imports higher/);
    expect(layerBreak('training', 'recipes')).toMatch(/imports higher/);
    expect(layerBreak('eval', 'envs')).toBeNull();
    expect(layerBreak('model', 'policy')).toMatch(/imports higher/);
    expect(layerBreak('policy', 'db')).toMatch(/imports higher/);
    expect(layerBreak('training', 'eval')).toMatch(/API client/);
    expect(layerBreak('envs', 'training')).toMatch(/API client/);
    expect(layerBreak('routes', 'ui')).toMatch(/dashboard/);
    expect(layerBreak('ui', 'domain')).toMatch(/dashboard/);
    expect(layerBreak('routes', 'newunit')).toMatch(/unranked/);
  });
});
