// The dashboard's pure readings of API answers (no DOM): stats groups side by side by memory, and
// an attempt's step cards. Unit-tested in test/ui/figures.test.ts; types in figures.d.ts.

/** How the dashboard names a stats group's memory (`GET /v1/stats` groups[].memory). */
export const MEMORY_LABELS = {
  none: 'independent retries (no memory)',
  reflection_only: 'memory: reflections',
  history_only: 'memory: history',
  history_and_reflection: 'memory: history + reflections',
};

/** The label of a memory value; an unknown value is shown as it is, a missing one as ''. */
export const memoryLabel = (m) => (m ? MEMORY_LABELS[m] ?? m : '');

/**
 * Stats groups side by side by memory: one block per (modelVersion, env, mode) that has more than
 * one memory group, its rows in the API's order (independent retries first, then the memory
 * modes), with K the largest k of their pass@k and, for each row, `gain`: its pass@k minus the
 * independent-retries row's at each k = 1..K (null for that row itself, and where either value is
 * missing; all null when the block has no independent-retries row). Blocks keep the groups' order.
 */
export function memoryComparison(groups) {
  const blocks = new Map();
  for (const g of groups) {
    const key = JSON.stringify([g.modelVersion, g.env, g.mode]);
    const b = blocks.get(key) ?? { modelVersion: g.modelVersion, env: g.env, mode: g.mode, groups: [] };
    b.groups.push(g);
    blocks.set(key, b);
  }
  const out = [];
  for (const b of blocks.values()) {
    if (b.groups.length < 2) continue;
    const K = Math.max(0, ...b.groups.map((g) => Math.max(0, ...Object.keys(g.passAtK).map(Number))));
    const base = b.groups.find((g) => g.memory === 'none');
    const rows = b.groups.map((g) => ({
      group: g,
      gain: Array.from({ length: K }, (_, i) => {
        const k = String(i + 1);
        if (!base || g === base || g.passAtK[k] === undefined || base.passAtK[k] === undefined) return null;
        return g.passAtK[k] - base.passAtK[k];
      }),
    }));
    out.push({ modelVersion: b.modelVersion, env: b.env, mode: b.mode, K, rows });
  }
  return out;
}

/**
 * The cards of one attempt: its action rows (`kind: 'action'` rows of the trajectory) in step
 * order, each with `invalid`: true when the env rejected that row's action. The env reports it with
 * the next observation, so the flag is read from the next row's `invalidAction`; a row's own
 * `invalidAction` is about the action before it.
 */
export function stepCards(rows) {
  const sorted = rows.slice().sort((a, b) => a.step - b.step);
  return sorted.map((r, i) => ({ ...r, invalid: r.action !== null && sorted[i + 1]?.invalidAction === true }));
}

/** Actions taken in an attempt: its rows with an action (the final observation has none). */
export const actionsTaken = (rows) => rows.filter((r) => r.action !== null).length;
