/**
 * Architecture figures for src/: the largest files (lines), the largest folders (files and lines
 * directly in each folder), the longest functions and every function over 80 lines (lines, via the
 * TypeScript parser), import edges between top-level units of src/, imports that run upward
 * against the layer order below, SQL text outside src/db/, and HTTP status literals outside the
 * HTTP layer. Prints JSON (`--json`) or a short text report.
 *
 * Layer order (a unit may import units of a lower rank; docs/architecture.md):
 *   cli 8 > server, app 7 > routes 6 > plugins 5 > training 4 > agent 3 > db 2.5 (beside the
 *   engine side: agent and above use it) > policy 2 > model 1 > domain, config, shared,
 *   ensure-dir, owner-lock, schema-helpers 0 (the bottom).
 * envs/ and eval/ are clients of the HTTP API: they may import the bottom and each other only,
 * and only cli may import them. Any other import between units is reported in `upwardImports`
 * (with its line and whether it is type-only).
 * Usage: npx tsx scripts/arch-report.ts [--json]
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'src');

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Unit of a src file: its top-level folder (`agent`, `routes`, ...), or for a file directly
 *  under src/ its name without `.ts` (`server`, `app`, `domain`, `config`, ...). */
const unitOf = (file: string) => {
  const rel = path.relative(root, file).split(path.sep);
  return rel.length > 1 ? rel[0]! : rel[0]!.replace(/\.ts$/, '');
};

/** Layer rank of a unit (higher may import lower); null for the API clients envs/ and eval/.
 *  A unit missing here is reported as `unranked`. */
const RANK: Record<string, number> = {
  cli: 8, server: 7, app: 7, routes: 6, plugins: 5, training: 4, agent: 3, db: 2.5, policy: 2, model: 1,
  domain: 0, config: 0, shared: 0, 'ensure-dir': 0, 'owner-lock': 0, 'schema-helpers': 0,
};
const CLIENTS = new Set(['envs', 'eval']);

/** Why an import from unit `a` to unit `b` breaks the layer order, or null when it does not. */
function layerBreak(a: string, b: string): string | null {
  if (a === b) return null;
  if (CLIENTS.has(a)) return CLIENTS.has(b) || RANK[b] === 0 ? null : `API client ${a} imports ${b}`;
  if (CLIENTS.has(b)) return a === 'cli' ? null : `${a} imports API client ${b}`;
  const ra = RANK[a];
  const rb = RANK[b];
  if (ra === undefined || rb === undefined) return `unranked unit ${ra === undefined ? a : b}`;
  return rb > ra ? `${a} (${ra}) imports higher ${b} (${rb})` : null;
}

const files = walk(root).sort();
const sizes: { file: string; lines: number }[] = [];
const functions: { name: string; file: string; lines: number }[] = [];
const edges = new Map<string, number>();
const upward: { from: string; line: number; to: string; typeOnly: boolean; why: string }[] = [];
const folders = new Map<string, { files: number; lines: number }>();
const sqlFiles: string[] = [];
const statusFiles: string[] = [];

for (const file of files) {
  const text = fs.readFileSync(file, 'utf8');
  const rel = path.relative(root, file);
  const lines = text.split('\n').length;
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
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      const spec = node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) ? node.moduleSpecifier.text : '';
      if (spec.startsWith('.')) {
        const target = path.resolve(path.dirname(file), spec);
        if (target.startsWith(root)) {
          const a = unitOf(file);
          const b = unitOf(target.replace(/\.(m?)js$/, '.$1ts'));
          if (a !== b) edges.set(`${a} -> ${b}`, (edges.get(`${a} -> ${b}`) ?? 0) + 1);
          const why = layerBreak(a, b);
          const typeOnly = ts.isImportDeclaration(node) ? !!node.importClause?.isTypeOnly : node.isTypeOnly;
          if (why) upward.push({ from: rel, line: lineOf(node.getStart()) + 1, to: path.relative(root, target), typeOnly, why });
        }
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
const report = {
  files: files.length,
  largestFiles: sizes.slice(0, 12),
  filesOver400: sizes.filter((s) => s.lines > 400).length,
  largestFolders: folderList.slice(0, 8),
  largestUnits: [...unitLines.entries()].map(([unit, v]) => ({ unit, ...v })).sort((a, b) => b.lines - a.lines).slice(0, 8),
  longestFunctions: functions.slice(0, 12),
  functionsOver80: functions.filter((f) => f.lines > 80),
  importEdges: Object.fromEntries([...edges.entries()].sort()),
  importEdgeCount: [...edges.values()].reduce((a, b) => a + b, 0),
  upwardImports: upward,
  sqlOutsideDb: sqlFiles,
  statusOutsideHttp: statusFiles,
};
if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
else {
  console.log(`files: ${report.files}; over 400 lines: ${report.filesOver400}; functions over 80 lines: ${report.functionsOver80.length}`);
  console.log('largest files:\n' + report.largestFiles.map((s) => `  ${s.lines}\t${s.file}`).join('\n'));
  console.log('largest folders (files directly in them):\n' + report.largestFolders.map((f) => `  ${f.lines}\t${f.files} files\t${f.folder}`).join('\n'));
  console.log('largest units (recursive):\n' + report.largestUnits.map((f) => `  ${f.lines}\t${f.files} files\t${f.unit}`).join('\n'));
  console.log('functions over 80 lines:\n' + report.functionsOver80.map((f) => `  ${f.lines}\t${f.file}\t${f.name}`).join('\n'));
  console.log(`imports against the layer order (${report.upwardImports.length}):\n` + report.upwardImports.map((u) => `  ${u.from}:${u.line} -> ${u.to}${u.typeOnly ? ' (type only)' : ''}: ${u.why}`).join('\n'));
  console.log('longest functions:\n' + report.longestFunctions.map((f) => `  ${f.lines}\t${f.file}\t${f.name}`).join('\n'));
  console.log('import edges between folders:\n' + Object.entries(report.importEdges).map(([k, v]) => `  ${k}: ${v}`).join('\n'));
  console.log('SQL outside src/db: ' + report.sqlOutsideDb.join(', '));
  console.log('HTTP statuses outside the HTTP layer: ' + report.statusOutsideHttp.join(', '));
}
