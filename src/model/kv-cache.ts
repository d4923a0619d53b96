/**
 * Per-sequence KV caches of the serving path (src/model/gpt-cached.ts `forwardCached`).
 *
 * A `RowCache` holds the keys/values of one sequence's first `length` positions for every layer,
 * in one of two forms:
 * - owned: per layer `[H, length, hd]` tensors;
 * - view: rows `[start, start + length)` of row `row` of a batch forward's keys/values
 *   (`SharedKV`, per layer `[B, H, L, hd]`), shared by the batch's rows and reference-counted.
 * Views make lock-step batched decoding cheap: when the next forward has exactly the rows of one
 * `SharedKV` in the same order (the batcher keeps that order), its keys/values are the past as
 * they are, with no per-row slicing, padding and re-stacking (the copies that dominated a
 * batched decode step). Otherwise a view is materialised once (one slice per layer) and memoised.
 * `compact()` turns a view into an owned cache, so an idle session does not pin a whole batch.
 *
 * The packed path (src/model/gpt-cached.ts on the wasm and cpu backends) keeps a third form:
 * - heap: the first `length` positions of a `HeapKV`, one tensor `[n_layer, 2, capacity, C]` per
 *   sequence (keys then values of each layer, position-major, heads side by side as the qkv
 *   projection lays them out). A forward reads it where it lies and appends the new positions in
 *   place when no other cache over the buffer holds positions beyond the append point; else it
 *   copies the prefix to a new buffer (twice the capacity when it is full). Truncating shares the
 *   buffer.
 */
import * as tf from '@tensorflow/tfjs';

/** One layer's cached keys and values for a single sequence: `k`, `v` are `[H, t, hd]`. */
export interface LayerKV {
  k: tf.Tensor3D;
  v: tf.Tensor3D;
}

/** Keys/values of a batched forward, per layer `[B, H, L, hd]`, shared by its rows' views. */
export class SharedKV {
  private refs = 0;
  constructor(
    readonly k: tf.Tensor4D[],
    readonly v: tf.Tensor4D[],
  ) {}
  get batch(): number {
    return this.k[0].shape[0];
  }
  get length(): number {
    return this.k[0].shape[2];
  }
  retain(): void {
    this.refs++;
  }
  release(): void {
    if (--this.refs === 0) {
      for (const t of this.k) t.dispose();
      for (const t of this.v) t.dispose();
    }
  }
}

/**
 * Keys and values of one sequence for every layer, `[n_layer, 2, capacity, C]` in one tensor that
 * the packed forward reads and writes in place (its only writer; tfjs never sees it change). It is
 * kept (outlives tf.tidy) and disposed when the last cache over it is. Every cache over it is
 * counted with its length: positions below the longest one's length must not change.
 */
export class HeapKV {
  readonly tensor: tf.Tensor4D;
  private readonly lengths = new Map<number, number>();
  private owners = 0;

  /**
   * A new buffer of `capacity` positions: zeros, or `init` (taken over) when given.
   * @throws Error when a size is not >= 1, n_head does not divide C, or `init` has another shape.
   */
  constructor(nLayer: number, readonly nHead: number, nEmbd: number, readonly capacity: number, init?: tf.Tensor4D) {
    if (!(nLayer >= 1 && nHead >= 1 && capacity >= 1 && nEmbd >= 1 && nEmbd % nHead === 0)) {
      throw new Error(`HeapKV sizes must be >= 1 with n_head dividing C, got ${nLayer}, ${nHead}, ${nEmbd}, ${capacity}`);
    }
    // Fill, not zeros: on wasm it fills the heap in place, where zeros builds a JS array and copies it
    this.tensor = tf.keep(init ?? tf.fill([nLayer, 2, capacity, nEmbd], 0, 'float32'));
    const shape = [nLayer, 2, capacity, nEmbd];
    if (this.tensor.shape.join() !== shape.join()) {
      throw new Error(`HeapKV initial tensor has shape [${this.tensor.shape}], not [${shape}]`);
    }
  }

  /** Counts a cache of `length` positions over this buffer. */
  retain(length: number): void {
    this.lengths.set(length, (this.lengths.get(length) ?? 0) + 1);
    this.owners++;
  }

  /** Uncounts a cache of `length` positions; the last one disposes the tensor. */
  release(length: number): void {
    const n = (this.lengths.get(length) ?? 0) - 1;
    if (n > 0) this.lengths.set(length, n);
    else this.lengths.delete(length);
    if (--this.owners === 0) this.tensor.dispose();
  }

  /** Whether positions from `at` on may be written: no cache over the buffer holds any of them. */
  writableFrom(at: number): boolean {
    for (const len of this.lengths.keys()) if (len > at) return false;
    return true;
  }
}

export class RowCache {
  private owned: LayerKV[] | null;
  private shared: SharedKV | null;
  private heap: HeapKV | null = null;
  private disposed = false;

  private constructor(
    owned: LayerKV[] | null,
    shared: SharedKV | null,
    /** Row of the shared batch (views only). */
    readonly row: number,
    /** First valid position in the shared batch (views only). */
    readonly start: number,
    /** Number of cached positions. */
    readonly length: number,
  ) {
    this.owned = owned;
    this.shared = shared;
    shared?.retain();
  }

  /** Takes ownership of per-layer `[H, length, hd]` tensors. */
  static owned(layers: LayerKV[]): RowCache {
    return new RowCache(layers, null, 0, 0, layers[0].k.shape[1]);
  }

  /** A view of `shared` (retained until `dispose`). */
  static view(shared: SharedKV, row: number, start: number, length: number): RowCache {
    return new RowCache(null, shared, row, start, length);
  }

  /** The first `length` positions of `buf` (counted there until `dispose`). */
  static onHeap(buf: HeapKV, length: number): RowCache {
    const c = new RowCache(null, null, 0, 0, length);
    c.heap = buf;
    buf.retain(length);
    return c;
  }

  /** The heap buffer of a cache of the packed path, or null (the padded path's forms). */
  get heapKV(): HeapKV | null {
    if (this.disposed) throw new Error('RowCache used after dispose');
    return this.heap;
  }

  /** The shared batch this cache is a view of, or null (owned or materialised). */
  get sharedKV(): SharedKV | null {
    return this.shared;
  }

  /** Per-layer `[H, length, hd]` tensors (materialised from a view once, then kept). */
  layers(): LayerKV[] {
    if (this.disposed) throw new Error('RowCache used after dispose');
    if (!this.owned && this.heap) this.owned = heapLayers(this.heap, this.length);
    if (!this.owned) {
      const s = this.shared!;
      // tf.keep: this may run inside a caller's tf.tidy, but the memoised tensors outlive it
      const take = (t: tf.Tensor4D) =>
        tf.keep(
          tf.tidy(() => {
            const [, H, , hd] = t.shape;
            return tf.reshape(tf.slice(t, [this.row, 0, this.start, 0], [1, H, this.length, hd]), [H, this.length, hd]) as tf.Tensor3D;
          }),
        );
      this.owned = s.k.map((k, l) => ({ k: take(k), v: take(s.v[l]) }));
    }
    return this.owned;
  }

  /** Materialises a view and drops the reference to its batch. */
  compact(): void {
    if (!this.shared) return;
    this.layers();
    this.shared.release();
    this.shared = null;
  }

  /** A new cache of the first `len` positions (a view stays a view: no copy); null for len <= 0. */
  truncate(len: number): RowCache | null {
    if (len <= 0) return null;
    if (len > this.length) throw new Error(`cannot truncate a cache of ${this.length} positions to ${len}`);
    if (this.heap) return RowCache.onHeap(this.heap, len);
    if (this.shared) return RowCache.view(this.shared, this.row, this.start, len);
    const layers = this.layers().map((l) => ({
      k: tf.keep(tf.slice(l.k, [0, 0, 0], [l.k.shape[0], len, l.k.shape[2]])),
      v: tf.keep(tf.slice(l.v, [0, 0, 0], [l.v.shape[0], len, l.v.shape[2]])),
    }));
    return RowCache.owned(layers);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.owned) for (const l of this.owned) {
      l.k.dispose();
      l.v.dispose();
    }
    this.owned = null;
    this.shared?.release();
    this.shared = null;
    this.heap?.release(this.length);
    this.heap = null;
  }
}

/** Per-layer `[H, length, hd]` copies of a heap buffer's first `length` positions (kept tensors). */
function heapLayers(buf: HeapKV, length: number): LayerKV[] {
  const [nLayer, , , C] = buf.tensor.shape;
  const H = buf.nHead;
  const take = (l: number, kv: number) =>
    tf.keep(
      tf.tidy(() => {
        const rows = tf.reshape(tf.slice(buf.tensor, [l, kv, 0, 0], [1, 1, length, C]), [length, H, C / H]);
        return tf.transpose(rows, [1, 0, 2]) as tf.Tensor3D;
      }),
    );
  return Array.from({ length: nLayer }, (_, l) => ({ k: take(l, 0), v: take(l, 1) }));
}
