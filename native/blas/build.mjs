/**
 * Builds the optional OpenBLAS matmul addon (native/blas/blas.c -> build/Release/lamer_blas.node)
 * with node-gyp, against Node's own headers. Run by `npm install` (postinstall) and by
 * `npm run build:blas`. It never fails the install: when the C compiler, the CBLAS header or
 * libopenblas is missing (Debian: `apt-get install libopenblas-dev`), it prints one line and exits 0,
 * and the server uses the wasm matmul (src/model/blas.ts). `LAMER_BLAS_BUILD=off` skips it.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const say = (msg) => console.log(`lamer: OpenBLAS matmul addon: ${msg}`);

/** node-gyp as npm ships it: npm passes its path to lifecycle scripts; else next to npm's own files. */
function nodeGyp() {
  const candidates = [process.env.npm_config_node_gyp];
  if (process.env.npm_execpath) candidates.push(path.join(path.dirname(process.env.npm_execpath), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  candidates.push(path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  return candidates.find((c) => c && fs.existsSync(c)) ?? null;
}

/** Whether `cc` compiles and links a CBLAS call against -lopenblas (the reason when not). */
function probe() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-blas-probe-'));
  try {
    const src = path.join(dir, 'probe.c');
    fs.writeFileSync(src, '#include <cblas.h>\nint main(void) { float a = 1, b = 1, c = 0; cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1); return c == 1.0f ? 0 : 1; }\n');
    const r = spawnSync('cc', [src, '-o', path.join(dir, 'probe'), '-lopenblas'], { encoding: 'utf8' });
    if (r.error) return `no C compiler (${r.error.message})`;
    if (r.status !== 0) return `cc cannot build against OpenBLAS (${(r.stderr || '').trim().split('\n')[0]}); on Debian: apt-get install libopenblas-dev`;
    return null;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function main() {
  if (process.env.LAMER_BLAS_BUILD === 'off') return say('skipped (LAMER_BLAS_BUILD=off); the wasm matmul will be used');
  const missing = probe();
  if (missing) return say(`not built: ${missing}. The wasm matmul will be used.`);
  const gyp = nodeGyp();
  if (!gyp) return say('not built: node-gyp not found next to npm. The wasm matmul will be used.');
  const args = [gyp, 'rebuild'];
  // Node's headers ship with Node itself (include/node beside the binary): no download.
  const nodedir = path.join(path.dirname(process.execPath), '..');
  if (!process.env.npm_config_nodedir && fs.existsSync(path.join(nodedir, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${nodedir}`);
  const r = spawnSync(process.execPath, args, { cwd: here, encoding: 'utf8' });
  if (r.status !== 0) {
    const tail = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-3).join(' | ');
    return say(`not built: node-gyp failed (${tail}). The wasm matmul will be used.`);
  }
  say('built (native/blas/build/Release/lamer_blas.node)');
}

main();
