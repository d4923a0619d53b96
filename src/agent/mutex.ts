/**
 * Per-key serialisation: `run(key, fn)` runs `fn` after every earlier `fn` of the same key has
 * settled, so two requests for one session never interleave. Keys with nothing queued hold no
 * memory. `drain()` resolves when nothing is running.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<unknown>>();
  private running = 0;
  private idle: Array<() => void> = [];

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    this.running++;
    const next = prev.then(fn, fn);
    const tail = next.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
      this.running--;
      if (this.running === 0) {
        const w = this.idle;
        this.idle = [];
        for (const f of w) f();
      }
    });
    return next;
  }

  /** Resolves once no task is queued or running. */
  drain(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }
}
