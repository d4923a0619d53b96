/**
 * Architecture figures for src/ (`.ts`, `.js` and `.mjs` files alike): the largest files (lines),
 * the largest folders (files and lines directly in each folder), the longest functions and every
 * function over 80 lines (lines, via the TypeScript parser), lines over 140 characters, import
 * edges between top-level units of src/ (static imports and re-exports, `import('...')` calls and
 * `import('...')` types with a literal path), imports that run upward against the layer order
 * below, cycles between units, imports between the folders inside one unit (`training/maths ->
 * training/run`, for the order inside a unit), SQL text outside src/db/, and HTTP status literals
 * outside the HTTP layer. Prints JSON (`--json`) or a short text report; `archReport()` returns the same
 * figures to test/architecture.test.ts, which turns them into assertions.
 *
 * Layer order (a unit may import units of a lower rank; docs/architecture.md):
 *   cli 8 > recipes 7.5 > server, app 7 > routes 6 > plugins 5 > training 4 > serving 3.5 (beside
 *   training: neither imports the other) > agent 3 > db 2.5 (beside the engine side: agent and
 *   above use it) > policy 2 > model 1 > domain, config, shared, ensure-dir, owner-lock,
 *   schema-helpers 0 (the bottom).
 * envs/ and eval/ are clients of the HTTP API: they may import the bottom and each other only,
 * and only the command lines (cli, and the trainers in recipes) may import them. ui/ is the dashboard, served to the browser and never run by the
 * server: it imports nothing of src/ outside ui/, and nothing imports it. Any other import between
 * units is reported in `upwardImports` (with its line and whether it is type-only).
 * Usage: npx tsx scripts/arch-report.ts [--json]
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const defaultRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'src');

/** Source files the report reads: TypeScript and the plain JavaScript modules (the dashboard's
 *  browser modules under ui/, the worker bootstraps). */
const SOURCE = /\.(ts|js|mjs)$/;

/** A line longer than this many characters counts in `linesOver140`. */
export const LINE_LIMIT = 140;
/** A function longer than this many lines counts in `functionsOver80`. */
export const FUNCTION_LIMIT = 80;

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : SOURCE.test(p) ? [p] : [];
  });
}

/** Layer rank of a unit (higher may import lower); null for the API clients envs/ and eval/.
 *  A unit missing here is reported as `unranked`. */
const RANK: Record<string, number> = {
  cli: 8, recipes: 7.5, server: 7, app: 7, routes: 6, plugins: 5, training: 4, serving: 3.5, agent: 3, db: 2.5, policy: 2, model: 1,
  domain: 0, config: 0, shared: 0, 'ensure-dir': 0, 'owner-lock': 0, 'schema-helpers': 0,
};
const CLIENTS = new Set(['envs', 'eval']);
/** The units that may import the API clients: the command lines and the trainers (recipes/), which
 *  join the environments' demonstrations and training. */
const CLIENT_USERS = new Set(['cli', 'recipes']);

/** The dashboard: served to the browser, not run by the server. */
const SERVED = 'ui';

/** Why an import from unit `a` to unit `b` breaks the layer order, or null when it does not. */
export function layerBreak(a: string, b: string): string | null {
  if (a === b) return null;
  if (a === SERVED) return `the dashboard ${a} imports server code ${b}`;
  if (b === SERVED) return `${a} imports the dashboard ${b}`;
  if (CLIENTS.has(a)) return CLIENTS.has(b) || RANK[b] === 0 ? null : `API client ${a} imports ${b}`;
  if (CLIENTS.has(b)) return CLIENT_USERS.has(a) ? null : `${a} imports API client ${b}`;
  const ra = RANK[a];
  const rb = RANK[b];
  if (ra === undefined || rb === undefined) return `unranked unit ${ra === undefined ? a : b}`;
  return rb > ra ? `${a} (${ra}) imports higher ${b} (${rb})` : null;
}

/** The import a node makes, when it makes one with a literal path: `import`/`export ... from`,
 *  `import('...')` calls and `import('...')` types (the last type-only). */
function importOf(node: ts.Node): { spec: string; typeOnly: boolean } | null {
  if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
    if (!node.moduleSpecifier || !ts.isStringLiteral(node.moduleSpecifier)) return null;
    const typeOnly = ts.isImportDeclaration(node) ? !!node.importClause?.isTypeOnly : node.isTypeOnly;
    return { spec: node.moduleSpecifier.text, typeOnly };
  }
  if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
    const arg = node.arguments[0];
    return arg && ts.isStringLiteralLike(arg) ? { spec: arg.text, typeOnly: false } : null;
  }
  if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
    return { spec: node.argument.literal.text, typeOnly: true };
  }
  return null;
}

/** Every cycle in the unit graph (edges `a -> b`), each once, as the units along it. */
function cycles(edges: Map<string, number>): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges.keys()) {
    const [a, b] = e.split(' -> ') as [string, string];
    next.set(a, [...(next.get(a) ?? []), b]);
  }
  const found: string[][] = [];
  // a cycle is reported from its smallest unit, so each shows up once
  const walkFrom = (start: string, at: string, trail: string[]): void => {
    for (const b of next.get(at) ?? []) {
      if (b === start) found.push([...trail, start]);
      else if (b > start && !trail.includes(b)) walkFrom(start, b, [...trail, b]);
    }
  };
  for (const start of [...next.keys()].sort()) walkFrom(start, start, [start]);
  return found;
}

export type ArchReport = ReturnType<typeof archReport>;

/** The figures for the source tree under `root` (src/ of this repository by default). */
export function archReport(root = defaultRoot) {
  const files = walk(root).sort();
  const sizes: { file: string; lines: number }[] = [];
  const functions: { name: string; file: string; lines: number }[] = [];
  const edges = new Map<string, number>();
  const upward: { from: string; line: number; to: string; typeOnly: boolean; why: string }[] = [];
  const inner: { from: string; line: number; to: string; fromFolder: string; toFolder: string }[] = [];
  const folders = new Map<string, { files: number; lines: number }>();
  const sqlFiles: string[] = [];
  const statusFiles: string[] = [];
  const longLines = new Map<string, number>();
  let longestLine = 0;
  /** Unit of a src file: its top-level folder (`agent`, `routes`, ...), or for a file directly
   *  under src/ its name without the extension (`server`, `app`, `domain`, `config`, ...). */
  const unitOf = (file: string) => {
    const rel = path.relative(root, file).split(path.sep);
    return rel.length > 1 ? rel[0]! : rel[0]!.replace(SOURCE, '');
  };
  /** Folder of a src file inside its unit: `training/maths` for src/training/maths/ppo.ts, the
   *  unit itself (`training`) for a file directly in it. */
  const folderOf = (file: string) => {
    const rel = path.relative(root, file).split(path.sep);
    return rel.length > 2 ? `${rel[0]}/${rel[1]}` : unitOf(file);
  };

  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    const rel = path.relative(root, file);
    const textLines = text.split('\n');
    const lines = textLines.length;
    // characters (code points), not UTF-16 units
    const widths = textLines.map((l) => [...l].length);
    const long = widths.filter((w) => w > LINE_LIMIT).length;
    if (long) longLines.set(rel, long);
    longestLine = Math.max(longestLine, ...widths);
    sizes.push({ file: rel, lines });
    const dir = path.dirname(rel);
    const f = folders.get(dir) ?? { files: 0, lines: 0 };
    folders.set(dir, { files: f.files + 1, lines: f.lines + lines });
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const lineOf = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line;
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const n = lineOf(node.body.getEnd()) - lineOf(node.getStart()) + 1;
        let name = (node as ts.FunctionDeclaration).name?.getText() ?? '';
        if (!name && ts.isVariableDeclaration(node.parent)) name = node.parent.name.getText();
        if (!name && ts.isPropertyAssignment(node.parent)) name = node.parent.name.getText();
        if (!name && ts.isCallExpression(node.parent)) name = `(callback of ${node.parent.expression.getText().slice(0, 40)})`;
        functions.push({ name: name || '(anonymous)', file: rel, lines: n });
      }
      const imported = importOf(node);
      if (imported && imported.spec.startsWith('.')) {
        const target = path.resolve(path.dirname(file), imported.spec);
        if (target.startsWith(root + path.sep)) {
          const a = unitOf(file);
          const b = unitOf(target);
          if (a !== b) edges.set(`${a} -> ${b}`, (edges.get(`${a} -> ${b}`) ?? 0) + 1);
          const why = layerBreak(a, b);
          const to = path.relative(root, target);
          if (why) upward.push({ from: rel, line: lineOf(node.getStart()) + 1, to, typeOnly: imported.typeOnly, why });
          const [fromFolder, toFolder] = [folderOf(file), folderOf(target)];
          if (a === b && fromFolder !== toFolder) inner.push({ from: rel, line: lineOf(node.getStart()) + 1, to, fromFolder, toFolder });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
    const inDb = rel.startsWith('db' + path.sep);
    if (!inDb && /\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|PRAGMA)\b|\bsql`/.test(text)) sqlFiles.push(rel);
    const httpLayer = rel.startsWith('routes' + path.sep) || rel.startsWith(path.join('plugins', 'app')) || rel === 'app.ts';
    if (!httpLayer && /\bnew ApiProblem\(|\bstatusCode\s*[:=]\s*[1-5]\d\d\b/.test(text)) statusFiles.push(rel);
  }

  sizes.sort((a, b) => b.lines - a.lines);
  const folderList = [...folders.entries()].map(([folder, v]) => ({ folder, ...v })).sort((a, b) => b.lines - a.lines);
  const unitLines = new Map<string, { files: number; lines: number }>();
  for (const s of sizes) {
    const u = unitOf(path.join(root, s.file));
    const v = unitLines.get(u) ?? { files: 0, lines: 0 };
    unitLines.set(u, { files: v.files + 1, lines: v.lines + s.lines });
  }
  functions.sort((a, b) => b.lines - a.lines);
  return {
    files: files.length,
    largestFiles: sizes.slice(0, 12),
    filesOver400: sizes.filter((s) => s.lines > 400).length,
    largestFolders: folderList.slice(0, 8),
    largestUnits: [...unitLines.entries()].map(([unit, v]) => ({ unit, ...v })).sort((a, b) => b.lines - a.lines).slice(0, 8),
    longestFunctions: functions.slice(0, 12),
    functionsOver80: functions.filter((f) => f.lines > FUNCTION_LIMIT),
    importEdges: Object.fromEntries([...edges.entries()].sort()),
    importEdgeCount: [...edges.values()].reduce((a, b) => a + b, 0),
    linesOver140: [...longLines.values()].reduce((a, b) => a + b, 0),
    longestLine,
    filesWithLongLines: [...longLines.entries()].map(([file, lines]) => ({ file, lines })).sort((a, b) => b.lines - a.lines),
    upwardImports: upward,
    /** Imports between two folders of one unit (or a unit's own files and one of its folders). */
    innerImports: inner,
    unitCycles: cycles(edges),
    sqlOutsideDb: sqlFiles,
    statusOutsideHttp: statusFiles,
  };
}

// Printed only when run as a script, not when a test imports archReport.
const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
const report = isMain ? archReport() : null;
if (!report) {
  // imported: nothing to print
} else if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
else {
  console.log(`files: ${report.files}; over 400 lines: ${report.filesOver400}; functions over 80 lines: ${report.functionsOver80.length}`);
  console.log('largest files:\n' + report.largestFiles.map((s) => `  ${s.lines}\t${s.file}`).join('\n'));
  console.log('largest folders (files directly in them):\n' + report.largestFolders.map((f) => `  ${f.lines}\t${f.files} files\t${f.folder}`).join('\n'));
  console.log('largest units (recursive):\n' + report.largestUnits.map((f) => `  ${f.lines}\t${f.files} files\t${f.unit}`).join('\n'));
  console.log('functions over 80 lines:\n' + report.functionsOver80.map((f) => `  ${f.lines}\t${f.file}\t${f.name}`).join('\n'));
  const longLineFiles = report.filesWithLongLines.slice(0, 8).map((f) => `  ${f.lines}\t${f.file}`).join('\n');
  console.log(`lines over ${LINE_LIMIT} characters: ${report.linesOver140} (longest ${report.longestLine}), most in:\n${longLineFiles}`);
  console.log(`imports against the layer order (${report.upwardImports.length}):\n` + report.upwardImports.map((u) => `  ${u.from}:${u.line} -> ${u.to}${u.typeOnly ? ' (type only)' : ''}: ${u.why}`).join('\n'));
  console.log('longest functions:\n' + report.longestFunctions.map((f) => `  ${f.lines}\t${f.file}\t${f.name}`).join('\n'));
  console.log('import edges between folders:\n' + Object.entries(report.importEdges).map(([k, v]) => `  ${k}: ${v}`).join('\n'));
  console.log(`cycles between units: ${report.unitCycles.map((c) => c.join(' -> ')).join('; ') || 'none'}`);
  console.log('SQL outside src/db: ' + report.sqlOutsideDb.join(', '));
  console.log('HTTP statuses outside the HTTP layer: ' + report.statusOutsideHttp.join(', '));
}
