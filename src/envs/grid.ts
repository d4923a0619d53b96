/**
 * Compact grid observations shared by the built-in games: one byte per cell, so that a small
 * byte-level model reads a cell's column from its position in the row.
 *
 *   gridText(['??1', '.1?'], 1) =
 *     '  123'     header: column numbers (a tens line above when a number has two digits)
 *     '1 ??1'     row number, one space, the cells
 *     '2 .1?'
 */

/**
 * A grid as compact observation text: a header line of column numbers, then per row its number, a
 * space and its cells (one character each), numbers counted from `base` (0 or 1). Row numbers are
 * right-aligned to the widest; with 10 or more columns the header has a tens line above the units
 * line. E.g. gridText(['??1', '.1?'], 1) = '  123\n1 ??1\n2 .1?'.
 */
export function gridText(rows: readonly string[], base: 0 | 1): string {
  const cols = rows[0]?.length ?? 0;
  const w = String(rows.length - 1 + base).length;
  const pad = ' '.repeat(w + 1);
  const nums = Array.from({ length: cols }, (_, c) => c + base);
  const header: string[] = [];
  if (nums.some((n) => n >= 10)) header.push(pad + nums.map((n) => (n >= 10 ? String(Math.floor(n / 10) % 10) : ' ')).join(''));
  header.push(pad + nums.map((n) => String(n % 10)).join(''));
  return [...header, ...rows.map((r, i) => `${String(i + base).padStart(w)} ${r}`)].join('\n');
}

/**
 * The cell rows of a grid observation: `gridText` lines (`1 ??1.??`; the digit-only header lines
 * are skipped) or the older spaced form (`Row 1: ? ? 1`, `0: # # #`). Returns one string array of
 * symbols per row. Lines of neither form are ignored.
 */
export function parseGridRows(text: string): string[][] {
  const out: string[][] = [];
  for (const raw of text.split('\n')) {
    const l = raw.trim();
    if (l === '' || /^\d+$/.test(l)) continue; // empty or column-number header
    const old = /^(?:Row\s+)?\d+:\s*(.*)$/.exec(l);
    if (old) {
      out.push(old[1].trim().split(/\s+/));
      continue;
    }
    const m = /^\d+ (\S+)$/.exec(l);
    if (m) out.push([...m[1]]);
  }
  return out;
}
