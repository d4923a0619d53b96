/**
 * SVG line charts of learning curves (no dependencies): panels with axes, ticks, one polyline per
 * series and a legend, laid out left to right in one document; `learningCurveSvg` draws the
 * experiment driver's curve points (./experiment.ts) as pass@k, mean return and training loss.
 */
import type { CurvePoint } from './experiment.js';

export interface Series {
  label: string;
  color: string;
  /** [x, y] pairs; y null is a gap. */
  points: Array<[number, number | null]>;
  dashed?: boolean;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));

/**
 * One line-chart panel as an SVG <g> at (x0, y0) of size w x h: axes, 5 y ticks, integer x ticks,
 * one polyline with dots per series, a legend. yRange defaults to the data's range (padded).
 */
export function chartPanel(title: string, xLabel: string, series: Series[], x0: number, y0: number, w: number, h: number, yRange?: [number, number]): string {
  const pad = { l: 44, r: 10, t: 22, b: 34 };
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]).filter((y): y is number => y !== null && Number.isFinite(y)));
  const xMin = xs.length ? Math.min(...xs) : 0;
  const xMax = xs.length ? Math.max(...xs) : 1;
  let [yMin, yMax] = yRange ?? [ys.length ? Math.min(...ys) : 0, ys.length ? Math.max(...ys) : 1];
  if (!yRange) {
    const span = yMax - yMin || Math.abs(yMax) || 1;
    yMin -= 0.05 * span;
    yMax += 0.05 * span;
  }
  const pw = w - pad.l - pad.r;
  const ph = h - pad.t - pad.b;
  const sx = (x: number) => x0 + pad.l + (xMax === xMin ? pw / 2 : ((x - xMin) / (xMax - xMin)) * pw);
  const sy = (y: number) => y0 + pad.t + ph - ((y - yMin) / (yMax - yMin || 1)) * ph;
  const out: string[] = [];
  out.push(`<text x="${x0 + w / 2}" y="${y0 + 14}" text-anchor="middle" font-weight="bold">${esc(title)}</text>`);
  out.push(`<rect x="${x0 + pad.l}" y="${y0 + pad.t}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`);
  for (let i = 0; i <= 4; i++) {
    const y = yMin + ((yMax - yMin) * i) / 4;
    out.push(`<line x1="${x0 + pad.l}" x2="${x0 + pad.l + pw}" y1="${sy(y).toFixed(1)}" y2="${sy(y).toFixed(1)}" stroke="#eee"/>`);
    out.push(`<text x="${x0 + pad.l - 4}" y="${(sy(y) + 4).toFixed(1)}" text-anchor="end">${fmt(y)}</text>`);
  }
  const step = Math.max(1, Math.ceil((xMax - xMin) / 10));
  for (let x = Math.ceil(xMin); x <= xMax; x += step) {
    out.push(`<text x="${sx(x).toFixed(1)}" y="${y0 + pad.t + ph + 14}" text-anchor="middle">${x}</text>`);
  }
  out.push(`<text x="${x0 + pad.l + pw / 2}" y="${y0 + h - 4}" text-anchor="middle">${esc(xLabel)}</text>`);
  series.forEach((s, si) => {
    const pts = s.points.filter((p): p is [number, number] => p[1] !== null && Number.isFinite(p[1]));
    if (pts.length > 1) {
      out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5,3"' : ''} points="${pts.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ')}"/>`);
    }
    for (const [x, y] of pts) out.push(`<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="2.5" fill="${s.color}"/>`);
    const ly = y0 + pad.t + 12 + si * 14;
    out.push(`<line x1="${x0 + pad.l + 8}" x2="${x0 + pad.l + 26}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5,3"' : ''}/>`);
    out.push(`<text x="${x0 + pad.l + 30}" y="${ly}">${esc(s.label)}</text>`);
  });
  return `<g>${out.join('')}</g>`;
}

/** A whole SVG document from panels laid out left to right (each w x h). */
export function svgDocument(panels: Array<(x0: number, y0: number, w: number, h: number) => string>, w = 360, h = 260, caption?: string): string {
  const width = w * panels.length;
  const height = h + (caption ? 18 : 0);
  const body = panels.map((p, i) => p(i * w, 0, w, h)).join('');
  const cap = caption ? `<text x="8" y="${h + 13}" fill="#555">${esc(caption)}</text>` : '';
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>${body}${cap}</svg>\n`;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd'];

/**
 * The learning curve of one or more runs: pass@1 / pass@3 of the rollouts (%), mean return, and
 * the training loss, against the iteration.
 */
export function learningCurveSvg(runs: Array<{ label: string; points: CurvePoint[] }>, caption?: string): string {
  const pass = runs.flatMap((r, i) => [
    { label: `${r.label} pass@1`, color: COLORS[i % COLORS.length]!, dashed: true, points: r.points.map((p) => [p.iteration, 100 * (p.passAtK['1'] ?? 0)] as [number, number]) },
    { label: `${r.label} pass@3`, color: COLORS[i % COLORS.length]!, points: r.points.map((p) => [p.iteration, 100 * (p.passAtK['3'] ?? 0)] as [number, number]) },
  ]);
  const ret = runs.map((r, i) => ({ label: r.label, color: COLORS[i % COLORS.length]!, points: r.points.map((p) => [p.iteration, p.meanReturn] as [number, number]) }));
  const loss = runs.map((r, i) => ({ label: r.label, color: COLORS[i % COLORS.length]!, points: r.points.map((p) => [p.iteration, p.loss] as [number, number | null]) }));
  return svgDocument(
    [
      (x, y, w, h) => chartPanel('rollouts: pass@k (%)', 'iteration', pass, x, y, w, h, [0, 100]),
      (x, y, w, h) => chartPanel('rollouts: mean return', 'iteration', ret, x, y, w, h),
      (x, y, w, h) => chartPanel('training loss (mean per job)', 'iteration', loss, x, y, w, h),
    ],
    360,
    260,
    caption,
  );
}
