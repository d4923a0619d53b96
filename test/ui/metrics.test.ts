/**
 * The dashboard's reading of /metrics (src/ui/metrics.js, a browser module without DOM use): the
 * Prometheus text parser on prom-client's own output, the step figures, and histogram quantiles
 * interpolated as Prometheus' histogram_quantile does.
 */
import { describe, expect, it } from 'vitest';
import { Counter, Registry } from 'prom-client';
import { histogramDelta, histogramQuantile, parseProm, stepFigures } from '../../src/ui/metrics.js';
import { createMetrics } from '../../src/plugins/app/metrics.js';

describe('dashboard metrics', () => {
  it('parses prom-client text: names, labels (escapes included) and values', async () => {
    const r = new Registry();
    const c = new Counter({ name: 'x_total', help: 'h', labelNames: ['a'], registers: [r] });
    c.inc({ a: 'quote " back \\ nl \n end' }, 3);
    const samples = parseProm(await r.metrics());
    expect(samples).toEqual([{ name: 'x_total', labels: { a: 'quote " back \\ nl \n end' }, value: 3 }]);
  });

  it("reads the server's step figures and the step routes' latency quantiles", async () => {
    const m = createMetrics();
    m.stepsTotal.inc({ kind: 'action', model_version: 'a' }, 5);
    m.stepsTotal.inc({ kind: 'action', model_version: 'b' }, 2);
    m.stepsTotal.inc({ kind: 'reflection', model_version: 'a' }, 4);
    const h = m.httpDuration;
    for (let i = 0; i < 10; i++) h.observe({ method: 'POST', route: '/v1/sessions/:id/steps', status_code: '200' }, 0.002);
    for (let i = 0; i < 6; i++) h.observe({ method: 'POST', route: '/v1/steps:batch', status_code: '200' }, 0.02);
    for (let i = 0; i < 4; i++) h.observe({ method: 'POST', route: '/v1/sessions/:id/steps', status_code: '409' }, 0.02);
    h.observe({ method: 'GET', route: '/v1/stats', status_code: '200' }, 3); // not a step route
    const f = stepFigures(parseProm(await m.registry.metrics()));
    expect(f.steps).toBe(7);
    expect(f.buckets.find(([le]) => le === 0.0025)).toEqual([0.0025, 10]);
    expect(f.buckets[f.buckets.length - 1]).toEqual([Infinity, 20]);
    // p50: rank 10 falls at the top of (0.001, 0.0025]; p99: rank 19.8 in (0.01, 0.025], 9.8 of its 10
    expect(histogramQuantile(0.5, f.buckets)).toBeCloseTo(0.0025, 12);
    expect(histogramQuantile(0.99, f.buckets)).toBeCloseTo(0.01 + 0.015 * 0.98, 12);
  });

  it('quantiles of a window between two scrapes; none without observations; +Inf gives the highest bound', () => {
    const before: Array<[number, number]> = [[0.01, 5], [0.1, 5], [Infinity, 5]];
    const now: Array<[number, number]> = [[0.01, 5], [0.1, 9], [Infinity, 10]];
    const w = histogramDelta(now, before);
    expect(w).toEqual([[0.01, 0], [0.1, 4], [Infinity, 5]]);
    expect(histogramQuantile(0.5, w)).toBeCloseTo(0.01 + 0.09 * (2.5 / 4), 12);
    expect(histogramQuantile(0.99, w)).toBe(0.1);
    expect(histogramQuantile(0.5, histogramDelta(before, before))).toBeNull();
    expect(histogramQuantile(0.5, [])).toBeNull();
  });
});
