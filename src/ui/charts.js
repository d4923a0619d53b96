// uPlot line charts as a Preact component. uPlot draws on canvas (fast with long series, ~50 KB),
// so the numbers each chart shows are also given as a table next to it (readable, testable).
import { html } from 'htm/preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

/** An axis tick: 3 significant digits; exponent form for very small or large magnitudes (KL, lr). */
export const tick = (v) => (v === null || v === undefined ? '' : v !== 0 && (Math.abs(v) < 0.01 || Math.abs(v) >= 1e5) ? v.toExponential(1) : String(Number(v.toPrecision(3))));

/** Colour of series i (a colour-blind friendly palette, Okabe-Ito). */
export const colour = (i) => ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000', '#F0E442'][i % 8];

/**
 * A line chart. `x`: the x values (numbers); `series`: [{ label, values }] with one value (or null)
 * per x; `xLabel`/`yLabel`: axis titles; `xTicks`: labels to show instead of x values (categorical
 * axes, e.g. version names); `yRange`: [min, max] to fix the y axis (e.g. [0, 1] for rates).
 */
export function LineChart({ x, series, xLabel = '', yLabel = '', xTicks = null, yRange = null, height = 220, testid }) {
  const el = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const node = el.current;
    if (!node) return undefined;
    const width = Math.max(260, node.clientWidth || 400);
    const opts = {
      width,
      height,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false }, y: yRange ? { range: yRange } : { auto: true } },
      axes: [
        {
          label: xLabel,
          ...(xTicks ? { splits: () => x, values: (_u, vals) => vals.map((v) => xTicks[x.indexOf(v)] ?? '') } : { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }),
        },
        { label: yLabel, values: (_u, vals) => vals.map(tick), size: 60 },
      ],
      series: [{ label: xLabel || 'x' }, ...series.map((s, i) => ({ label: s.label, stroke: colour(i), width: 2, points: { show: x.length < 40, size: 5 }, spanGaps: true }))],
    };
    const data = [x, ...series.map((s) => s.values)];
    plot.current?.destroy();
    plot.current = new uPlot(opts, data, node);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(260, node.clientWidth), height }));
    ro.observe(node);
    return () => { ro.disconnect(); plot.current?.destroy(); plot.current = null; };
  }, [JSON.stringify([x, series, xLabel, yLabel, xTicks, yRange, height])]);
  return html`<div class="chart" ref=${el} data-testid=${testid}></div>`;
}
