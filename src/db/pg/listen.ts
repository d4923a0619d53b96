/**
 * PostgreSQL notifications (LISTEN/NOTIFY) between the replicas of one database. Channels are
 * fixed names of this file; a notification's payload is not read (the listener reads the table it
 * announces a change of). A listener holds one connection of its own, outside the pool.
 */
import pg from 'pg';

/** Channels: `models`: a model version was activated (src/db/pg/models-jobs.ts activate notifies it in its transaction). */
export const CHANNELS = { models: 'lamer_models' } as const;

export interface ListenOptions {
  /** Wait before opening a lost connection again, ms (default 1000). */
  retryMs?: number;
  /** Longest wait for the connection, ms (default 5000). */
  connectTimeoutMs?: number;
  /** Told of a lost or refused connection (the listener keeps trying). */
  onError?: (err: Error) => void;
}

/**
 * LISTEN on `channel` over a connection of its own: `onNotify` is called for each notification,
 * and once each time a lost connection is made again (notifications sent meanwhile were missed).
 * The connection is opened again `retryMs` after it is lost or refused, until the returned
 * function is called, which closes it.
 */
export function listenPg(url: string, channel: string, onNotify: () => void, opts: ListenOptions = {}): () => Promise<void> {
  const retryMs = opts.retryMs ?? 1000;
  let client: pg.Client | null = null;
  let stopped = false;
  let lost = false;
  let timer: NodeJS.Timeout | null = null;
  const retry = (c: pg.Client, err?: Error) => {
    if (stopped || client !== c) return;
    if (err) opts.onError?.(err);
    client = null;
    lost = true;
    c.end().catch(() => {});
    timer = setTimeout(() => void connect(), retryMs);
    timer.unref();
  };
  const connect = async () => {
    if (stopped) return;
    const timeout = opts.connectTimeoutMs ?? 5000;
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeout, application_name: 'lamer-server listen' });
    client = c;
    c.on('notification', (m) => {
      if (m.channel === channel) onNotify();
    });
    c.on('error', (err) => retry(c, err));
    c.on('end', () => retry(c));
    try {
      await c.connect();
      await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      if (lost && client === c) onNotify();
    } catch (err) {
      retry(c, err as Error);
    }
  };
  void connect();
  return async () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    const c = client;
    client = null;
    await c?.end().catch(() => {});
  };
}
