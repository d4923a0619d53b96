#!/usr/bin/env bash
# bench/gpu-check.sh: check the optional WebGPU backend (LAMER_TFJS_BACKEND=webgpu) on a GPU machine.
#
# NEEDS A GPU MACHINE (a GPU with a Vulkan driver; on a CPU-only machine Mesa's lavapipe gives no
# adapter and the backend falls back to wasm). It HAS NOT BEEN RUN: the WebGPU figures of this
# project are "not measured" until someone runs this script on such a machine.
#
# What it does, from the repository root:
# 1. installs, without saving to package.json, the `webgpu` npm package (Dawn for Node; its
#    linux-x64 binary ships inside the npm package, no download at install time) and
#    @tensorflow/tfjs-backend-webgpu at the same version as @tensorflow/tfjs;
# 2. prints the WebGPU adapter info (or says there is none and stops);
# 3. checks the model's kernels on webgpu against wasm on small shapes (bench/backend-kernels.ts;
#    `--backend cpu` runs the same check here, on a CPU-only machine);
# 4. runs `bench/model.ts --quick` on webgpu and on wasm, writing
#    bench/results/gpu-check-webgpu.json and bench/results/gpu-check-wasm.json, and prints
#    matMul GFLOP/s, forward tokens/s and training tokens/s side by side.
# The first line of each bench run says which backend really loaded: if it says wasm for the
# webgpu run, the WebGPU backend did not initialise (its log line says why).
# Known risk, unchecked: bench/model.ts and the engine read results with dataSync(); tfjs-backend-webgpu
# may not support synchronous reads under Node, in which case the webgpu run fails at the first read
# (the adapter info and the error are then the result of this check).
# Usage: bash bench/gpu-check.sh   (env WEBGPU_VERSION overrides the webgpu package version)
set -euo pipefail
cd "$(dirname "$0")/.."

TFJS_VERSION=$(node -p "require('@tensorflow/tfjs/package.json').version")
WEBGPU_VERSION=${WEBGPU_VERSION:-0.6.2}
echo "== installing webgpu@${WEBGPU_VERSION} and @tensorflow/tfjs-backend-webgpu@${TFJS_VERSION} (--no-save)"
npm install --no-save "webgpu@${WEBGPU_VERSION}" "@tensorflow/tfjs-backend-webgpu@${TFJS_VERSION}"

echo "== WebGPU adapter"
node --input-type=module -e "
import { create } from 'webgpu';
const gpu = create([]);
const adapter = await gpu.requestAdapter();
if (!adapter) { console.log('no WebGPU adapter: nothing to measure (not measured)'); process.exit(2); }
const info = adapter.info ?? (adapter.requestAdapterInfo ? await adapter.requestAdapterInfo() : {});
console.log(JSON.stringify({ vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description }));
console.log('features:', [...adapter.features].join(' '));
"

echo "== kernels on webgpu vs wasm (bench/backend-kernels.ts: matMul forms, softmax, GELU, moments, GPT logits and gradients)"
npx tsx bench/backend-kernels.ts --backend webgpu || echo "kernel check exited $? (1: a kernel out of tolerance; 2: webgpu did not load)"

mkdir -p bench/results
for b in webgpu wasm; do
  echo "== bench/model.ts --quick --backend $b"
  LAMER_TFJS_BACKEND=$b npx tsx bench/model.ts --quick --backend "$b" --out "bench/results/gpu-check-$b.json"
done

echo "== webgpu vs wasm"
node -e "
const w = require('./bench/results/gpu-check-webgpu.json'), c = require('./bench/results/gpu-check-wasm.json');
const row = (k, a, b) => console.log(k.padEnd(34), String(a.toFixed(1)).padStart(10), String(b.toFixed(1)).padStart(10), (a / b).toFixed(2) + 'x');
console.log('backend loaded'.padEnd(34), w.backend.padStart(10), c.backend.padStart(10));
row('matMul 1024^3 GFLOP/s', w.reference.matmulGflopsOneCore, c.reference.matmulGflopsOneCore);
for (const i in w.forward) row('forward full-seq tok/s B=' + w.forward[i].batch, w.forward[i].fullSeqTokensPerSec, c.forward[i].fullSeqTokensPerSec);
for (const i in w.forward) row('decode tok/s B=' + w.forward[i].batch, w.forward[i].decodeTokensPerSec, c.forward[i].decodeTokensPerSec);
row('training tok/s [8,128]', w.training.tokensPerSec, c.training.tokensPerSec);
row('training GFLOP/s', w.training.gflops, c.training.gflops);
row('engine act steps/s c=32', w.serving.stepsPerSecondByWorkers['1'], c.serving.stepsPerSecondByWorkers['1']);
"
