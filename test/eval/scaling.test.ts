/** The scaling grid's pure parts: points, existing checkpoints, --sft-args, records, table, chart. */
import { describe, expect, it } from 'vitest';
import {
  defaultHeads, formatTokens, parseExisting, parsePoint, parsePoints, parseSftArgs, POINT_DIR_RE, scalingMarkdown, scalingRecord, scalingSeries,
  scalingSvg, ScalingUsageError, sortRecords, type BaseEvalJson, type ScalingRecord,
} from '../../src/eval/scaling.js';

describe('parsePoint', () => {
  it.each([
    ['2x64:200', { layers: 2, embd: 64, heads: 2, steps: 200, name: '2x64-s200' }],
    ['4x128:800', { layers: 4, embd: 128, heads: 4, steps: 800, name: '4x128-s800' }],
    [' 1x32:2 ', { layers: 1, embd: 32, heads: 1, steps: 2, name: '1x32-s2' }],
    ['1x16:5', { layers: 1, embd: 16, heads: 1, steps: 5, name: '1x16-s5' }],
    ['2x64h2:200', { layers: 2, embd: 64, heads: 2, steps: 200, name: '2x64-s200' }],
    ['2x64h8:200', { layers: 2, embd: 64, heads: 8, steps: 200, name: '2x64h8-s200' }],
    ['3x192:1000', { layers: 3, embd: 192, heads: 6, steps: 1000, name: '3x192-s1000' }],
  ])('%s', (text, want) => {
    expect(parsePoint(text)).toEqual(want);
    expect(POINT_DIR_RE.test(want.name)).toBe(true);
  });

  it.each([
    ['4x128', "point '4x128' is not LAYERSxEMBD[hHEADS]:STEPS (e.g. 4x128:800 or 2x64h2:200)"],
    ['4*128:800', "point '4*128:800' is not LAYERSxEMBD[hHEADS]:STEPS (e.g. 4x128:800 or 2x64h2:200)"],
    ['4x128:-1', "point '4x128:-1' is not LAYERSxEMBD[hHEADS]:STEPS (e.g. 4x128:800 or 2x64h2:200)"],
    ['4x128:1e3', "point '4x128:1e3' is not LAYERSxEMBD[hHEADS]:STEPS (e.g. 4x128:800 or 2x64h2:200)"],
    ['', "point '' is not LAYERSxEMBD[hHEADS]:STEPS (e.g. 4x128:800 or 2x64h2:200)"],
    ['0x64:200', "point '0x64:200': layers must be an integer >= 1, got 0"],
    ['2x64:0', "point '2x64:0': steps must be an integer >= 1, got 0"],
    ['2x64h0:10', "point '2x64h0:10': heads must be an integer >= 1, got 0"],
    ['2x100:10', "point '2x100:10': 3 heads do not divide n_embd 100; give the heads, e.g. 2x100h4:10"],
    ['2x64h3:10', "point '2x64h3:10': 3 heads do not divide n_embd 64; give the heads, e.g. 2x64h4:10"],
  ])('refuses %j', (text, message) => {
    expect(() => parsePoint(text)).toThrow(ScalingUsageError);
    expect(() => parsePoint(text)).toThrow(message);
  });

  it('defaults the heads to n_embd / 32, at least 1', () => {
    expect([16, 32, 48, 64, 128, 256].map(defaultHeads)).toEqual([1, 1, 1, 2, 4, 8]);
  });
});

describe('parsePoints / parseExisting', () => {
  it('parses a list in order', () => {
    expect(parsePoints('2x64:200, 4x128:800').map((p) => p.name)).toEqual(['2x64-s200', '4x128-s800']);
  });

  it.each([
    ['', 'no points given (e.g. 2x64:200,4x128:800)'],
    [' , ', 'no points given (e.g. 2x64:200,4x128:800)'],
    ['2x64:200,2x64h2:200', 'point 2x64-s200 is given twice'],
    ['2x64:200,bad', "point 'bad' is not"],
  ])('refuses points %j', (text, message) => {
    expect(() => parsePoints(text)).toThrow(message);
  });

  it('splits POINT=DIR on the first =', () => {
    expect(parseExisting('4x128:700=models/base, 2x64:10=/tmp/a=b')).toEqual([
      { spec: { layers: 4, embd: 128, heads: 4, steps: 700, name: '4x128-s700' }, dir: 'models/base' },
      { spec: { layers: 2, embd: 64, heads: 2, steps: 10, name: '2x64-s10' }, dir: '/tmp/a=b' },
    ]);
  });

  it.each([
    ['4x128:700', "existing '4x128:700' is not POINT=DIR (e.g. 4x128:700=models/base)"],
    ['4x128:700=', "existing '4x128:700=' is not POINT=DIR (e.g. 4x128:700=models/base)"],
    ['4x128=models/base', "point '4x128' is not"],
    ['4x128:700=a,4x128:700=b', 'point 4x128-s700 is given twice'],
    ['', 'no existing checkpoints given'],
  ])('refuses existing %j', (text, message) => {
    expect(() => parseExisting(text)).toThrow(ScalingUsageError);
    expect(() => parseExisting(text)).toThrow(message);
  });
});

describe('parseSftArgs', () => {
  it.each([
    ['', []],
    ['  --sessions 8   --curriculum minesweeper:4x4/2 --block 512 ', ['--sessions', '8', '--curriculum', 'minesweeper:4x4/2', '--block', '512']],
    ['--workers=2 --keep-demos', ['--workers=2', '--keep-demos']],
  ])('splits %j on whitespace', (text, want) => {
    expect(parseSftArgs(text)).toEqual(want);
  });

  it.each([
    ['--steps 5', '--sft-args may not set --steps: each point sets --out, --layers, --embd, --heads and --steps itself'],
    ['--out=/tmp/x', '--sft-args may not set --out:'],
    ['--sessions 8 --epochs 2', '--sft-args may not set --epochs:'],
    ['--dry-run', '--sft-args may not set --dry-run:'],
    ["--curriculum 'a b'", '--sft-args is split on whitespace and takes no quotes or backslashes'],
  ])('refuses %j', (text, message) => {
    expect(() => parseSftArgs(text)).toThrow(ScalingUsageError);
    expect(() => parseSftArgs(text)).toThrow(message);
  });
});

const evalJson = (layers: number, embd: number, heads: number, parameters: number, games: Array<[string, Record<string, number>, number, number | null]>): BaseEvalJson => ({
  model: { config: { n_layer: layers, n_embd: embd, n_head: heads }, parameters },
  games: games.map(([env, passAtK, invalid, names]) => ({
    env,
    rows: [{
      row: 'lamer', tasks: 64, errors: 0, passAtK, invalidActionRate: invalid,
      reflections: { reflections: 10, afterLosingAction: 5, namesEndingCell: names, repeatsPrevious: null, sharedAcrossTasks: null },
    }],
  })),
});

describe('scalingRecord', () => {
  it('takes the config and parameters from the eval JSON and the lamer row of each game', () => {
    const r = scalingRecord({ name: '2x64-s200', steps: 200 }, { source: 'trained', modelDir: '/g/2x64-s200/model', tokens: 123456, trainSeconds: 98.7 },
      evalJson(2, 64, 2, 115_000, [['minesweeper-6x6-3', { 1: 0.125, 2: 0.25, 3: 0.3125 }, 0.05, 0.5], ['sokoban-6x6-2', { 1: 0, 2: 0, 3: 0.015625 }, 0.2, null]]));
    expect(r).toEqual({
      point: '2x64-s200', layers: 2, embd: 64, heads: 2, parameters: 115_000, steps: 200,
      source: 'trained', modelDir: '/g/2x64-s200/model', tokens: 123456, trainSeconds: 98.7,
      games: [
        { env: 'minesweeper-6x6-3', tasks: 64, errors: 0, passAtK: { 1: 0.125, 2: 0.25, 3: 0.3125 }, invalidActionRate: 0.05, namesEndingCell: 0.5 },
        { env: 'sokoban-6x6-2', tasks: 64, errors: 0, passAtK: { 1: 0, 2: 0, 3: 0.015625 }, invalidActionRate: 0.2, namesEndingCell: null },
      ],
    });
  });

  it("takes each game's held-out loss (nats per token) when the eval JSON has it", () => {
    const j = evalJson(1, 32, 1, 10, [['minesweeper-6x6-3', { 1: 0 }, 0, null], ['sokoban-6x6-2', { 1: 0 }, 0, null]]);
    j.games[0]!.heldOutLoss = { reflection: { natsPerToken: 1.5, tokens: 4000 }, action: { natsPerToken: 0.25, tokens: 9000 } };
    j.games[1]!.heldOutLoss = null;
    const r = scalingRecord({ name: '1x32-s2', steps: 2 }, { source: 'trained', modelDir: 'm', tokens: 1, trainSeconds: 1 }, j);
    expect(r.games.map((g) => g.heldOutLoss)).toEqual([{ reflection: 1.5, action: 0.25 }, undefined]);
    expect('heldOutLoss' in r.games[1]!).toBe(false);
  });

  it('throws when a game has no lamer row', () => {
    const j = evalJson(1, 32, 1, 10, [['minesweeper-6x6-3', { 1: 0 }, 0, null]]);
    j.games[0]!.rows[0]!.row = 'independent';
    expect(() => scalingRecord({ name: '1x32-s2', steps: 2 }, { source: 'trained', modelDir: 'm', tokens: 1, trainSeconds: 1 }, j)).toThrow("point 1x32-s2: the eval of minesweeper-6x6-3 has no 'lamer' row");
  });
});

const rec = (point: string, layers: number, embd: number, heads: number, parameters: number, steps: number, tokens: number | null, trainSeconds: number | null, games: ScalingRecord['games']): ScalingRecord => ({
  point, layers, embd, heads, parameters, steps, tokens, trainSeconds, source: tokens === null ? 'existing' : 'trained', modelDir: `/g/${point}/model`, games,
});
const ms = (p1: number, p2: number, p3: number, invalid: number, names: number | null, errors = 0) => ({ env: 'minesweeper-6x6-3', tasks: 64, errors, passAtK: { 1: p1, 2: p2, 3: p3 }, invalidActionRate: invalid, namesEndingCell: names });
const sk = (p1: number, p2: number, p3: number, invalid: number) => ({ env: 'sokoban-6x6-2', tasks: 64, errors: 0, passAtK: { 1: p1, 2: p2, 3: p3 }, invalidActionRate: invalid, namesEndingCell: null });

const HEAD = [
  '| model | parameters | steps | tokens trained | training (s) | game | tasks | pass@1 (%) | pass@2 (%) | pass@3 (%) | invalid actions (%) | names the ending cell (%) | held-out reflection loss (nats/token) | held-out action loss (nats/token) | aim pass@1 / pass@3 (%) |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
];

describe('scalingMarkdown', () => {
  it.each([
    ['no records', [], [...HEAD]],
    ['one point, both games', [rec('2x64-s200', 2, 64, 2, 115_000, 200, 123_456, 98.7, [ms(0.125, 0.25, 0.3125, 0.05, 0.5), sk(0, 0, 0.015625, 0.2)])], [
      ...HEAD,
      '| 2x64, 2 heads | 115,000 | 200 | 123.5k | 99 | minesweeper-6x6-3 | 64 | 12.5 | 25.0 | 31.3 | 5.0 | 50.0 | - | - | not reached (40.0 / 60.0) |',
      '| 2x64, 2 heads | 115,000 | 200 | 123.5k | 99 | sokoban-6x6-2 | 64 | 0.0 | 0.0 | 1.6 | 20.0 | - | - | - | not reached (30.0 / 45.0) |',
    ]],
    ['aim reached only with both pass@1 and pass@3; errors; unknown tokens; 1 head', [
      rec('4x128-s700', 4, 128, 4, 957_696, 700, 7_474_113, 4593.8, [ms(0.4, 0.5, 0.6, 0, 0.75, 2)]),
      rec('1x32-s2', 1, 32, 1, 42_000, 2, null, null, [ms(0.5, 0.6, 0.59, 0.9, null)]),
    ], [
      ...HEAD,
      '| 4x128, 4 heads | 957,696 | 700 | 7.47M | 4594 | minesweeper-6x6-3 | 64 (2 errors) | 40.0 | 50.0 | 60.0 | 0.0 | 75.0 | - | - | reached (40.0 / 60.0) |',
      '| 1x32, 1 head | 42,000 | 2 | - | - | minesweeper-6x6-3 | 64 | 50.0 | 60.0 | 59.0 | 90.0 | - | - | - | not reached (40.0 / 60.0) |',
    ]],
    ['the held-out loss when the eval measured it (3 decimals; - for a kind without tokens)', [
      rec('4x128-s700', 4, 128, 4, 957_696, 700, 7_474_113, 4593.8, [{ ...ms(0.4, 0.5, 0.6, 0, 0.75), heldOutLoss: { reflection: 1.51249, action: 0.3126 } }, { ...sk(0, 0, 0, 0.1), heldOutLoss: { reflection: null, action: 0.25 } }]),
    ], [
      ...HEAD,
      '| 4x128, 4 heads | 957,696 | 700 | 7.47M | 4594 | minesweeper-6x6-3 | 64 | 40.0 | 50.0 | 60.0 | 0.0 | 75.0 | 1.512 | 0.313 | reached (40.0 / 60.0) |',
      '| 4x128, 4 heads | 957,696 | 700 | 7.47M | 4594 | sokoban-6x6-2 | 64 | 0.0 | 0.0 | 0.0 | 10.0 | - | - | 0.250 | not reached (30.0 / 45.0) |',
    ]],
    ['a game without an aim', [rec('1x32-s2', 1, 32, 1, 42_000, 2, 950, 3, [{ env: 'minesweeper-5x5-2', tasks: 2, errors: 0, passAtK: { 1: 1, 2: 1, 3: 1 }, invalidActionRate: 0, namesEndingCell: null }])], [
      ...HEAD,
      '| 1x32, 1 head | 42,000 | 2 | 950 | 3 | minesweeper-5x5-2 | 2 | 100.0 | 100.0 | 100.0 | 0.0 | - | - | - | - |',
    ]],
  ])('%s', (_, records, lines) => {
    expect(scalingMarkdown(records as ScalingRecord[])).toBe(lines.join('\n') + '\n');
  });
});

describe('sortRecords / formatTokens', () => {
  it('orders by parameters, then tokens (unknown last), then name', () => {
    const g = [ms(0, 0, 0, 0, null)];
    const rs = [rec('b', 2, 64, 2, 200, 1, null, null, g), rec('a', 2, 64, 2, 200, 1, null, null, g), rec('c', 2, 64, 2, 200, 9, 50, 1, g), rec('d', 1, 32, 1, 100, 1, 900, 1, g)];
    expect(sortRecords(rs).map((r) => r.point)).toEqual(['d', 'c', 'a', 'b']);
  });

  it.each([[null, '-'], [0, '0'], [999, '999'], [12_345, '12.3k'], [7_474_113, '7.47M']])('%j -> %s', (n, s) => {
    expect(formatTokens(n)).toBe(s);
  });
});

describe('scalingSeries / scalingSvg', () => {
  const records = [
    rec('2x64-s800', 2, 64, 2, 115_000, 800, 1e6, 10, [ms(0.2, 0.3, 0.4, 0, null)]),
    rec('2x64-s200', 2, 64, 2, 115_000, 200, 1e5, 3, [ms(0.1, 0.2, 0.3, 0, null)]),
    rec('4x128-s700', 4, 128, 4, 957_696, 700, 1e7, 99, [ms(0.3, 0.4, 0.5, 0, null), sk(0.1, 0.1, 0.2, 0)]),
    rec('1x32-s2', 1, 32, 1, 42_000, 2, null, null, [ms(0, 0, 0, 0, null)]),
  ];

  it('draws pass@1 and pass@3 per model size against log10 tokens, sorted, then the aims', () => {
    const s = scalingSeries(records, 'minesweeper-6x6-3');
    expect(s.map((x) => [x.label, x.dashed ?? false, x.points])).toEqual([
      ['2x64, 2h pass@1', true, [[5, 10], [6, 20]]],
      ['2x64, 2h pass@3', false, [[5, 30], [6, 40]]],
      ['4x128, 4h pass@1', true, [[7, 30]]],
      ['4x128, 4h pass@3', false, [[7, 50]]],
      ['aim pass@1 40.0%', true, [[5, 40], [7, 40]]],
      ['aim pass@3 60.0%', false, [[5, 60], [7, 60]]],
    ]);
    expect(s[0]!.color).toBe(s[1]!.color);
    expect(s[0]!.color).not.toBe(s[2]!.color);
    expect(scalingSeries(records, 'sokoban-6x6-2').map((x) => x.label)).toEqual(['4x128, 4h pass@1', '4x128, 4h pass@3', 'aim pass@1 30.0%', 'aim pass@3 45.0%']);
    expect(scalingSeries(records, 'nothing')).toEqual([]);
  });

  it('stretches the aim lines over whole decades, so the x axis always has ticks', () => {
    const narrow = [rec('1x32-s2', 1, 32, 1, 37_472, 2, 13_628, 5, [ms(0, 0, 0, 1, null)]), rec('1x32-s6', 1, 32, 1, 37_472, 6, 39_890, 8, [ms(0, 0, 0, 1, null)])];
    const s = scalingSeries(narrow, 'minesweeper-6x6-3');
    expect(s.slice(2).map((x) => x.points)).toEqual([[[4, 40], [5, 40]], [[4, 60], [5, 60]]]);
    const one = scalingSeries([rec('1x32-s1', 1, 32, 1, 37_472, 1, 1000, 1, [ms(0, 0, 0, 1, null)])], 'minesweeper-6x6-3');
    expect(one.slice(2).map((x) => x.points)).toEqual([[[3, 40], [4, 40]], [[3, 60], [4, 60]]]);
  });

  it('draws one panel per game', () => {
    const svg = scalingSvg(records, ['minesweeper-6x6-3', 'sokoban-6x6-2'], 'a <caption>');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg" width="960" height="358"')).toBe(true);
    expect(svg).toContain('minesweeper-6x6-3: pass@1 (dashed), pass@3 (%)');
    expect(svg).toContain('tokens trained (log10)');
    expect(svg).toContain('a &lt;caption&gt;');
    // polylines: MineSweeper 2x64 pass@1 and pass@3 and its 2 aims; Sokoban its 2 aims (single-point series are dots)
    expect(svg.match(/<polyline/g)!.length).toBe(4 + 2);
  });
});
