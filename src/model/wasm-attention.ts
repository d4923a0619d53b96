/**
 * The inner loops of the packed attention (src/model/packed-attention.ts) as WebAssembly SIMD, run
 * on the tfjs wasm backend's own memory (the module imports it), so they read the qkv matrix and
 * the KV buffers where they lie and write the output tensor in place.
 *
 * The module is assembled here from its instructions (no toolchain, no binary file): three exported
 * functions over byte addresses, each for one (row, head) of a packed forward, called in order:
 * - `scores(q, qStride, n, kc, kcStride, c, kn, knStride, hdBytes, scale, s)`: for query j < n
 *   (at q + j qStride), the scaled dot products with the c cached keys (kc + t kcStride) and with
 *   new keys 0..j (kn + t knStride), written as float32 row j of s (rows of c + n floats rounded
 *   up to a multiple of 4);
 * - `softmax(s, n, c)`: each row j of s becomes the softmax of its first c + j + 1 scores (its
 *   slots up to the next multiple of 4 become 0), exp in f32x4 as Cephes `expf` computes it;
 * - `values(s, n, c, vc, vcStride, vn, vnStride, hdBytes, out, outStride)`: out row j = the sum of
 *   s[j][t] times value t over the same keys.
 * Dot products and sums run four floats at a time (f32x4) and four keys per pass; the head size
 * must be a multiple of 4.
 *
 * `wasmAttention(memory)` instantiates the module for a memory (once per memory), or returns null
 * when this runtime cannot (no SIMD, a shared memory): the caller then uses the JavaScript loops.
 */

/** The three kernels, bound to one memory (addresses, strides and hdBytes in bytes; n, c counts; see above). */
export interface WasmAttention {
  /** Scaled dot products of n queries with their c cached and j + 1 new keys, into rows of s. */
  scores(
    q: number, qStride: number, n: number, kc: number, kcStride: number, c: number, kn: number, knStride: number,
    hdBytes: number, scale: number, s: number,
  ): void;
  /** Out row j = the weighted sum of the values, weights row j of s (softmax already applied). */
  values(
    s: number, n: number, c: number, vc: number, vcStride: number, vn: number, vnStride: number,
    hdBytes: number, out: number, outStride: number,
  ): void;
  /** Row j of s (n rows over c cached positions) becomes the softmax of its first c + j + 1 scores. */
  softmax(s: number, n: number, c: number): void;
}

const I32 = 0x7f;
const F32 = 0x7d;
const V128 = 0x7b;

function u32(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function s32(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

const vec = (items: number[][]): number[] => [...u32(items.length), ...items.flat()];
const str = (s: string): number[] => vec([...Buffer.from(s, 'utf8')].map((b) => [b]));
const section = (id: number, body: number[]): number[] => [id, ...u32(body.length), ...body];

/** Instruction helpers (byte sequences). */
const get = (i: number) => [0x20, ...u32(i)];
const set = (i: number) => [0x21, ...u32(i)];
const i32c = (n: number) => [0x41, ...s32(n)];
const add = [0x6a];
const mul = [0x6c];
const simd = (op: number, ...imm: number[]) => [0xfd, ...u32(op), ...imm];
const memarg = [0x00, 0x00]; // align hint 1, offset 0 (unaligned access is allowed)
const v128load = simd(0, ...memarg);
const v128store = simd(11, ...memarg);
const f32load = [0x2a, ...memarg];
const f32store = [0x38, ...memarg];
const f32x4splat = simd(19);
const f32x4add = simd(228);
const f32x4mul = simd(230);
const lane = (l: number) => simd(31, l);
const v128zero = simd(12, ...new Array<number>(16).fill(0));
const call = (f: number) => [0x10, ...u32(f)];

/** `while (cond) body` as block/loop: cond and body are instruction sequences. */
const whileLoop = (cond: number[], body: number[]): number[] => [
  0x02, 0x40, 0x03, 0x40, ...cond, 0x45, 0x0d, 0x01, ...body, 0x0c, 0x00, 0x0b, 0x0b,
];
/** i32 `a < b` (signed) of two locals / sequences. */
const lt = (a: number[], b: number[]) => [...a, ...b, 0x48];
/** local += value. */
const inc = (l: number, v: number[]) => [...get(l), ...v, ...add, ...set(l)];
/** Sum of the four lanes of a v128 local. */
const hsum = (v: number) => [...get(v), ...lane(0), ...get(v), ...lane(1), 0x92, ...get(v), ...lane(2), ...get(v), ...lane(3), 0x92, 0x92];

/**
 * A kernel body over t in [0, count): 5 i32 and 5 v128 locals after the params, `four` while
 * t + 4 <= count (it advances t by 4), then `one` for the rest (it advances t by 1), and `end`.
 */
const fourThenOne = (t: number, count: number, four: number[], one: number[]): number[] => [
  ...vec([[5, I32], [5, V128]]),
  ...i32c(0), ...set(t),
  ...whileLoop(lt([...get(t), ...i32c(4), ...add], [...get(count), ...i32c(1), ...add]), four),
  ...whileLoop(lt(get(t), get(count)), one),
  0x0b,
];

/**
 * dots(q, k, ks, count, hdBytes, scale, out): out[t] = scale * (q . key t), key t at k + t ks.
 * Locals after the params: t 7, d 8, k1 9, k2 10, k3 11, a0-a3 12-15 (v128), qv 16 (v128).
 */
function dotsBody(): number[] {
  const [q, k, ks, count, hd, scale, out, t, d, k1, k2, k3, a0, a1, a2, a3, qv] = Array.from({ length: 17 }, (_, i) => i);
  const fma = (acc: number, base: number) => [
    ...get(acc), ...get(qv), ...get(base), ...get(d), ...add, ...v128load, ...f32x4mul, ...f32x4add, ...set(acc),
  ];
  const store = (acc: number, at: number) => [...get(out), ...i32c(at), ...add, ...hsum(acc), ...get(scale), 0x94, ...f32store];
  const four = [
    ...get(k), ...get(ks), ...add, ...set(k1), ...get(k1), ...get(ks), ...add, ...set(k2), ...get(k2), ...get(ks), ...add, ...set(k3),
    ...v128zero, ...set(a0), ...v128zero, ...set(a1), ...v128zero, ...set(a2), ...v128zero, ...set(a3), ...i32c(0), ...set(d),
    ...whileLoop(lt(get(d), get(hd)), [
      ...get(q), ...get(d), ...add, ...v128load, ...set(qv),
      ...fma(a0, k), ...fma(a1, k1), ...fma(a2, k2), ...fma(a3, k3), ...inc(d, i32c(16)),
    ]),
    ...store(a0, 0), ...store(a1, 4), ...store(a2, 8), ...store(a3, 12),
    ...inc(out, i32c(16)), ...get(k3), ...get(ks), ...add, ...set(k), ...inc(t, i32c(4)),
  ];
  const one = [
    ...v128zero, ...set(a0), ...i32c(0), ...set(d),
    ...whileLoop(lt(get(d), get(hd)), [...get(q), ...get(d), ...add, ...v128load, ...set(qv), ...fma(a0, k), ...inc(d, i32c(16))]),
    ...store(a0, 0), ...inc(out, i32c(4)), ...inc(k, get(ks)), ...inc(t, i32c(1)),
  ];
  return fourThenOne(t, count, four, one);
}

/**
 * axpy(p, v, vs, count, hdBytes, o): o[0..hd) += sum over t < count of p[t] * value t (at v + t vs).
 * Locals after the params: t 6, d 7, v1 8, v2 9, v3 10, p0-p3 11-14 (v128), acc 15 (v128).
 */
function axpyBody(): number[] {
  const [p, v, vs, count, hd, o, t, d, v1, v2, v3, p0, p1, p2, p3, acc] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
  const term = (w: number, base: number) => [
    ...get(acc), ...get(w), ...get(base), ...get(d), ...add, ...v128load, ...f32x4mul, ...f32x4add, ...set(acc),
  ];
  const splat = (w: number, at: number) => [...get(p), ...i32c(at), ...add, ...f32load, ...f32x4splat, ...set(w)];
  const load = [...get(o), ...get(d), ...add, ...v128load, ...set(acc)];
  const store = [...get(o), ...get(d), ...add, ...get(acc), ...v128store];
  const four = [
    ...get(v), ...get(vs), ...add, ...set(v1), ...get(v1), ...get(vs), ...add, ...set(v2), ...get(v2), ...get(vs), ...add, ...set(v3),
    ...splat(p0, 0), ...splat(p1, 4), ...splat(p2, 8), ...splat(p3, 12), ...i32c(0), ...set(d),
    ...whileLoop(lt(get(d), get(hd)), [
      ...load, ...term(p0, v), ...term(p1, v1), ...term(p2, v2), ...term(p3, v3), ...store, ...inc(d, i32c(16)),
    ]),
    ...inc(p, i32c(16)), ...get(v3), ...get(vs), ...add, ...set(v), ...inc(t, i32c(4)),
  ];
  const one = [
    ...splat(p0, 0), ...i32c(0), ...set(d),
    ...whileLoop(lt(get(d), get(hd)), [...load, ...term(p0, v), ...store, ...inc(d, i32c(16))]),
    ...inc(p, i32c(4)), ...inc(v, get(vs)), ...inc(t, i32c(1)),
  ];
  return fourThenOne(t, count, four, one);
}

/** Bytes of one row of s: c + n floats rounded up to a multiple of 4 (the softmax runs on whole f32x4). */
const rowBytes = (c: number, n: number) => [...get(c), ...get(n), ...add, ...i32c(3), ...add, ...i32c(-4), 0x71, ...i32c(4), ...mul];

/**
 * softmax(s, n, c): row j of s (c + j + 1 scores, rows of `rowBytes`) becomes its softmax; the
 * row's slots up to the next multiple of 4 are set to -1e30 first, so every pass runs on whole f32x4
 * and they come out 0 (the values pass never reads them). exp as in Cephes `expf`: x = k ln2 + r,
 * |r| <= ln2 / 2, a degree-7 polynomial in r, times 2^k built from its exponent bits; x is
 * clamped to >= -87 (exp(-87) < 2e-38). Locals: j 3, row 4, len 5, p 6, end 7, q 8, mx 9 (f32),
 * x 10, k 11, r 12, e 13, acc 14 (v128).
 */
function softmaxBody(): number[] {
  const [s, n, c, j, row, len, p, end, q, mx, x, k, r, e, acc] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
  const f32c = (v: number) => [0x43, ...new Uint8Array(new Float32Array([v]).buffer)];
  const splatc = (v: number) => [...f32c(v), ...f32x4splat];
  const fsub = simd(229);
  const fmax = simd(233);
  const nearest = simd(106);
  const truncSat = simd(248);
  const iadd = simd(174);
  const ishl = simd(171);
  const cephes = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
  // e = exp(x), x <= 0 (local x)
  const expX = [
    ...get(x), ...splatc(-87), ...fmax, ...set(x),
    ...get(x), ...splatc(Math.LOG2E), ...f32x4mul, ...nearest, ...set(k),
    ...get(x), ...get(k), ...splatc(0.693359375), ...f32x4mul, ...fsub,
    ...get(k), ...splatc(-2.1219444e-4), ...f32x4mul, ...fsub, ...set(r),
    ...splatc(cephes[0]),
    ...cephes.slice(1).flatMap((cf) => [...get(r), ...f32x4mul, ...splatc(cf), ...f32x4add]),
    ...get(r), ...f32x4mul, ...get(r), ...f32x4mul, ...get(r), ...f32x4add, ...splatc(1), ...f32x4add,
    ...get(k), ...truncSat, ...i32c(127), ...simd(17), ...iadd, ...i32c(23), ...ishl, ...f32x4mul, ...set(e),
  ];
  const each = (body: number[]) => [...get(p), ...set(q), ...whileLoop(lt(get(q), get(end)), [...body, ...inc(q, i32c(16))])];
  const lanesMax = [...get(acc), ...lane(0), ...get(acc), ...lane(1), 0x97, ...get(acc), ...lane(2), 0x97, ...get(acc), ...lane(3), 0x97];
  return [
    ...vec([[6, I32], [1, F32], [5, V128]]),
    ...rowBytes(c, n), ...set(row), ...i32c(0), ...set(j),
    ...whileLoop(lt(get(j), get(n)), [
      ...get(s), ...get(j), ...get(row), ...mul, ...add, ...set(p),
      ...get(c), ...get(j), ...add, ...i32c(1), ...add, ...set(len),
      ...get(p), ...get(len), ...i32c(3), ...add, ...i32c(-4), 0x71, ...i32c(4), ...mul, ...add, ...set(end),
      ...get(p), ...get(len), ...i32c(4), ...mul, ...add, ...set(q),
      ...whileLoop(lt(get(q), get(end)), [...get(q), ...f32c(-1e30), ...f32store, ...inc(q, i32c(4))]),
      ...splatc(-1e30), ...set(acc),
      ...each([...get(acc), ...get(q), ...v128load, ...fmax, ...set(acc)]),
      ...lanesMax, ...set(mx),
      ...v128zero, ...set(acc),
      ...each([
        ...get(q), ...v128load, ...get(mx), ...f32x4splat, ...fsub, ...set(x), ...expX,
        ...get(q), ...get(e), ...v128store, ...get(acc), ...get(e), ...f32x4add, ...set(acc),
      ]),
      ...f32c(1), ...hsum(acc), 0x95, ...f32x4splat, ...set(acc),
      ...each([...get(q), ...get(q), ...v128load, ...get(acc), ...f32x4mul, ...v128store]),
      ...inc(j, i32c(1)),
    ]),
    0x0b,
  ];
}

/** scores(q, qs, n, kc, kcs, c, kn, kns, hd, scale, s); local j 11, row 12 (bytes of one s row). */
function scoresBody(): number[] {
  const [q, qs, n, kc, kcs, c, kn, kns, hd, scale, s, j, row] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  const qj = [...get(q), ...get(j), ...get(qs), ...mul, ...add];
  const sj = [...get(s), ...get(j), ...get(row), ...mul, ...add];
  return [
    ...vec([[2, I32]]),
    ...rowBytes(c, n), ...set(row), ...i32c(0), ...set(j),
    ...whileLoop(lt(get(j), get(n)), [
      ...qj, ...get(kc), ...get(kcs), ...get(c), ...get(hd), ...get(scale), ...sj, ...call(0),
      ...qj, ...get(kn), ...get(kns), ...get(j), ...i32c(1), ...add, ...get(hd), ...get(scale),
      ...sj, ...get(c), ...i32c(4), ...mul, ...add, ...call(0),
      ...inc(j, i32c(1)),
    ]),
    0x0b,
  ];
}

/** values(s, n, c, vc, vcs, vn, vns, hd, out, outs); locals j 10, row 11, d 12. */
function valuesBody(): number[] {
  const [s, n, c, vc, vcs, vn, vns, hd, out, outs, j, row, d] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  const sj = [...get(s), ...get(j), ...get(row), ...mul, ...add];
  return [
    ...vec([[3, I32]]),
    ...rowBytes(c, n), ...set(row), ...i32c(0), ...set(j),
    ...whileLoop(lt(get(j), get(n)), [
      ...i32c(0), ...set(d),
      ...whileLoop(lt(get(d), get(hd)), [...get(out), ...get(d), ...add, ...v128zero, ...v128store, ...inc(d, i32c(16))]),
      ...sj, ...get(vc), ...get(vcs), ...get(c), ...get(hd), ...get(out), ...call(1),
      ...sj, ...get(c), ...i32c(4), ...mul, ...add,
      ...get(vn), ...get(vns), ...get(j), ...i32c(1), ...add, ...get(hd), ...get(out), ...call(1),
      ...inc(out, get(outs)), ...inc(j, i32c(1)),
    ]),
    0x0b,
  ];
}

/** The module's bytes: functions dots 0, axpy 1, scores 2, values 3, softmax 4 (the last three exported). */
function moduleBytes(): Uint8Array<ArrayBuffer> {
  const fn = (params: number[]) => [0x60, ...vec(params.map((p) => [p])), ...vec([])];
  const types = [
    fn([I32, I32, I32, I32, I32, F32, I32]), // dots
    fn([I32, I32, I32, I32, I32, I32]), // axpy
    fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, F32, I32]), // scores
    fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32]), // values
    fn([I32, I32, I32]), // softmax
  ];
  const bodies = [dotsBody(), axpyBody(), scoresBody(), valuesBody(), softmaxBody()];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vec(types)),
    ...section(2, vec([[...str('env'), ...str('memory'), 0x02, 0x00, ...u32(1)]])),
    ...section(3, vec([[0], [1], [2], [3], [4]])),
    ...section(7, vec([[...str('scores'), 0x00, 2], [...str('values'), 0x00, 3], [...str('softmax'), 0x00, 4]])),
    ...section(10, vec(bodies.map((b) => [...u32(b.length), ...b]))),
  ]);
}

const instances = new WeakMap<WebAssembly.Memory, WasmAttention | null>();

/** The kernels bound to `memory`, or null when they cannot run here (see the module comment). */
export function wasmAttention(memory: WebAssembly.Memory): WasmAttention | null {
  if (instances.has(memory)) return instances.get(memory)!;
  let k: WasmAttention | null = null;
  try {
    if (!(typeof SharedArrayBuffer !== 'undefined' && memory.buffer instanceof SharedArrayBuffer)) {
      const instance = new WebAssembly.Instance(new WebAssembly.Module(moduleBytes()), { env: { memory } });
      k = instance.exports as unknown as WasmAttention;
    }
  } catch {
    k = null; // no WebAssembly SIMD in this runtime
  }
  instances.set(memory, k);
  return k;
}
