# syntax=docker/dockerfile:1.7
#
# lamer-server container images (see docs/deploy.md).
#
#   CPU (default target):  docker build -t lamer-server .
#   GPU (CUDA):            docker build --target gpu -t lamer-server:gpu .
#   run:                   docker run -p 8080:8080 -v lamer-data:/data --stop-timeout 60 \
#                            -e LAMER_API_KEYS='change-me-0123:team-a:admin' lamer-server
#
# The server is PID 1 (exec-form ENTRYPOINT, no shell) and handles SIGTERM and SIGINT itself from
# the first instant: graceful shutdown, exit 0 (docs/deploy.md "Signals"). `--init` is optional:
# the server starts no child processes to reap. One container per data volume: a second server
# on the same /data refuses to start (owner lock).
#
# Node 24 is an LTS line that better-sqlite3 12.x supports (its engines: 20.x-26.x). Native
# modules are compiled (or their prebuilt binaries fetched) for that Node's ABI inside the build
# stages; the image never reuses a host's node_modules. tsx is a runtime dependency: the server
# runs from its TypeScript sources without a separate build step.

ARG NODE_VERSION=24
ARG DEBIAN_RELEASE=bookworm
# tfjs-node-gpu 4.22 links libtensorflow 2.9.1, built for CUDA 11.2+ and cuDNN 8.
ARG CUDA_IMAGE=nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04
ARG TFJS_VERSION=4.22.0

# ---------------------------------------------------------------------------------------------
# deps: production node_modules, native modules built for this image's Node
# ---------------------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS deps
# 1 = keep @tensorflow/tfjs-node (native CPU backend). It is an optional dependency of the
# project: `npm ci` installs it when its libtensorflow download works, and the server falls back
# to the wasm backend without it. 0 = drop it (smaller image, wasm backend).
ARG WITH_TFJS_NODE=1
WORKDIR /app
# libopenblas-dev: the optional OpenBLAS matmul of the wasm backend (native/blas, built by the
# postinstall script; without it the wasm matmul runs)
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates libopenblas-dev \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
COPY native/blas ./native/blas
# the CUDA package is for the gpu target only: its libtensorflow cannot load without CUDA
RUN npm ci --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/@tensorflow/tfjs-node-gpu \
 && if [ "$WITH_TFJS_NODE" != "1" ]; then rm -rf node_modules/@tensorflow/tfjs-node; fi \
 && if [ -d node_modules/@tensorflow/tfjs-node ]; then echo "tfjs-node installed: native CPU backend"; \
    else echo "WARNING: no @tensorflow/tfjs-node: the server will use the wasm backend"; fi \
 && npm cache clean --force

# ---------------------------------------------------------------------------------------------
# app: the application files only (the context is filtered by .dockerignore)
# ---------------------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS app
WORKDIR /app
COPY . .
RUN rm -rf node_modules test bench experiments clients docs scripts .ci

# ---------------------------------------------------------------------------------------------
# gpu: CUDA base, Node copied from the official image, @tensorflow/tfjs-node-gpu
# ---------------------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS node-dist

FROM ${CUDA_IMAGE} AS gpu-deps
ARG TFJS_VERSION
COPY --from=node-dist /usr/local/bin/node /usr/local/bin/node
COPY --from=node-dist /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
# Node's headers: node-gyp builds native modules against them without downloading them
COPY --from=node-dist /usr/local/include/node /usr/local/include/node
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# the postinstall script lives here; without libopenblas-dev it builds nothing (the GPU image runs
# the native tensorflow backend, not wasm)
COPY native/blas ./native/blas
# @tensorflow/tfjs-node-gpu is an optional dependency: `npm ci` skips it when its install
# fails, so check that it is there (the GPU image is pointless without it), at the version of
# @tensorflow/tfjs, and drop the CPU-only native package the server would otherwise also try.
RUN npm ci --omit=dev --no-audit --no-fund \
 && node -e "const v=JSON.parse(require('fs').readFileSync('node_modules/@tensorflow/tfjs-node-gpu/package.json','utf8')).version; if (v !== process.env.TFJS_VERSION) { console.error('tfjs-node-gpu ' + v + ' != ' + process.env.TFJS_VERSION); process.exit(1); }" \
 && rm -rf node_modules/@tensorflow/tfjs-node \
 && npm cache clean --force

FROM ${CUDA_IMAGE} AS gpu
LABEL org.opencontainers.image.title="lamer-server (CUDA)" \
      org.opencontainers.image.description="LaMer agent server on TensorFlow.js with @tensorflow/tfjs-node-gpu"
ENV NODE_ENV=production \
    LAMER_HOST=0.0.0.0 \
    LAMER_PORT=8080 \
    LAMER_DATA_DIR=/data \
    LAMER_TFJS_BACKEND=tensorflow \
    LAMER_LOG_LEVEL=info \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
COPY --from=node-dist /usr/local/bin/node /usr/local/bin/node
WORKDIR /app
# application files stay owned by root (read-only for the server); only /data is writable
COPY --from=app /app /app
COPY --from=gpu-deps /app/node_modules /app/node_modules
RUN groupadd --gid 1000 lamer \
 && useradd --uid 1000 --gid lamer --no-create-home --shell /usr/sbin/nologin lamer \
 && mkdir -p /data/checkpoints \
 && chown -R lamer:lamer /data
USER lamer
RUN node --import tsx src/cli/index.ts --help
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.LAMER_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "--import", "tsx", "src/cli/index.ts"]
CMD ["serve"]

# ---------------------------------------------------------------------------------------------
# runtime (the default target: last stage): slim Node, non-root, data on a volume,
# configured by LAMER_* environment variables
# ---------------------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS runtime
LABEL org.opencontainers.image.title="lamer-server" \
      org.opencontainers.image.description="LaMer agent server for text environments on TensorFlow.js"
ENV NODE_ENV=production \
    LAMER_HOST=0.0.0.0 \
    LAMER_PORT=8080 \
    LAMER_DATA_DIR=/data \
    LAMER_TFJS_BACKEND=auto \
    LAMER_LOG_LEVEL=info
WORKDIR /app
# application files stay owned by root (read-only for the server); only /data is writable.
# /data (with checkpoints/) exists in the image owned by the server's user, so that a named volume
# mounted there (docker/compose.yaml shares one between replicas) starts out writable
COPY --from=app /app /app
COPY --from=deps /app/node_modules /app/node_modules
COPY --from=deps /app/native/blas/build /app/native/blas/build
# OpenBLAS's run-time library for the matmul addon built in the deps stage
RUN apt-get update \
 && apt-get install -y --no-install-recommends libopenblas0-pthread \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data/checkpoints \
 && chown -R node:node /data
# the image's built-in non-root user (uid 1000)
USER node
# smoke check at build time: the CLI loads from its TypeScript sources
RUN node --import tsx src/cli/index.ts --help
VOLUME ["/data"]
EXPOSE 8080
# /healthz answers while the process is up (no curl in slim images: Node's own fetch)
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.LAMER_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "--import", "tsx", "src/cli/index.ts"]
CMD ["serve"]
