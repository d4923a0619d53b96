/**
 * Architecture figures for src/: the largest files (lines), the longest functions (lines, via the
 * TypeScript parser), import edges between top-level folders of src/, SQL text outside src/db/,
 * and HTTP status literals outside the HTTP layer. Prints JSON (`--json`) or a short text report.
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

/** Folder of a src file: `agent`, `routes`, ..., or `.` for files directly under src/. */
const folderOf = (file: string) => {
  const rel = path.relative(root, file).split(path.sep);
  return rel.length > 1 ? rel[0]! : '.';
};

const files = walk(root).sort();
const sizes: { file: string; lines: number }[] = [];
const functions: { name: string; file: string; lines: number }[] = [];
const edges = new Map<string, number>();
const sqlFiles: string[] = [];
const statusFiles: string[] = [];

for (const file of files) {
  const text = fs.readFileSync(file, 'utf8');
  const rel = path.relative(root, file);
  sizes.push({ file: rel, lines: text.split('\n').length });
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
          const a = folderOf(file);
          const b = folderOf(target.replace(/\.js$/, '.ts'));
          if (a !== b) edges.set(`${a} -> ${b}`, (edges.get(`${a} -> ${b}`) ?? 0) + 1);
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
functions.sort((a, b) => b.lines - a.lines);
const report = {
  files: files.length,
  largestFiles: sizes.slice(0, 12),
  filesOver400: sizes.filter((s) => s.lines > 400).length,
  longestFunctions: functions.slice(0, 12),
  functionsOver80: functions.filter((f) => f.lines > 80).length,
  importEdges: Object.fromEntries([...edges.entries()].sort()),
  sqlOutsideDb: sqlFiles,
  statusOutsideHttp: statusFiles,
};
if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
else {
  console.log(`files: ${report.files}; over 400 lines: ${report.filesOver400}; functions over 80 lines: ${report.functionsOver80}`);
  console.log('largest files:\n' + report.largestFiles.map((s) => `  ${s.lines}\t${s.file}`).join('\n'));
  console.log('longest functions:\n' + report.longestFunctions.map((f) => `  ${f.lines}\t${f.file}\t${f.name}`).join('\n'));
  console.log('import edges between folders:\n' + Object.entries(report.importEdges).map(([k, v]) => `  ${k}: ${v}`).join('\n'));
  console.log('SQL outside src/db: ' + report.sqlOutsideDb.join(', '));
  console.log('HTTP statuses outside the HTTP layer: ' + report.statusOutsideHttp.join(', '));
}
