// The dashboard's reading of the server's Prometheus metrics (/metrics): the text parser, the
// step-serving figures and histogram quantiles. Pure functions (no DOM), unit-tested in
// test/ui/metrics.test.ts; types in metrics.d.ts.

/**
 * Parses Prometheus text exposition (format 0.0.4) into samples [{ name, labels, value }]; comment
 * and HELP/TYPE lines are skipped; label values are unescaped (\\, \", \n).
 */
export function parseProm(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

/** The step-serving figures of one scrape: total steps recorded and the step route's latency histogram. */
export function stepFigures(samples) {
  let steps = 0;
  const buckets = new Map(); // le -> cumulative count
  for (const s of samples) {
    if (s.name === 'lamer_steps_total' && s.labels.kind === 'action') steps += s.value;
    if (s.name === 'http_request_duration_seconds_bucket' && (s.labels.route === '/v1/sessions/:id/steps' || s.labels.route === '/v1/steps:batch')) {
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      buckets.set(le, (buckets.get(le) ?? 0) + s.value);
    }
  }
  return { steps, buckets: [...buckets.entries()].sort((a, b) => a[0] - b[0]) };
}

/**
 * The q-quantile of a cumulative histogram [[le, count]...] by linear interpolation inside the
 * bucket, as Prometheus' histogram_quantile does; null when it holds no observation. A quantile in
 * the +Inf bucket is the highest finite bound.
 */
export function histogramQuantile(q, buckets) {
  if (!buckets.length) return null;
  const total = buckets[buckets.length - 1][1];
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      if (count === prevCount) return le;
      return prevLe + (le - prevLe) * ((rank - prevCount) / (count - prevCount));
    }
    prevLe = le; prevCount = count;
  }
  return prevLe;
}

/** Bucket-wise difference of two cumulative histograms of the same bounds (the window between two scrapes). */
export function histogramDelta(now, before) {
  const b = new Map(before);
  return now.map(([le, c]) => [le, c - (b.get(le) ?? 0)]);
}
