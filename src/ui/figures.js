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

/**
 * The promotion-gate history of `GET /v1/models` items: one row per version whose job had a gate,
 * oldest first (createdAt, then version), with the gate's metric k, the candidate's and the
 * incumbent's pass@k at that k on the gate tasks (null until the gate has figures), the paired
 * difference with its interval, the margin and decision, the outcome (`status`, `promoted`,
 * `reason`) and `rise`: the candidate's value minus that of the last earlier promoted version
 * gated on the same env, tasks, seeds and metric (null when there is none, or no value yet).
 */
export function gateHistory(models) {
  const gated = models.filter((m) => m.gate)
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.version.localeCompare(b.version));
  const lastPromoted = new Map();
  return gated.map((m) => {
    const g = m.gate;
    const k = Number(/^pass@(\d+)$/.exec(g.metric)?.[1] ?? 1);
    const candidate = g.candidatePassAtK?.[String(k)] ?? null;
    const same = JSON.stringify([g.env, g.tasks, g.seedStart, g.metric]);
    const before = lastPromoted.get(same);
    const row = {
      version: m.version, modelStatus: m.status, status: g.status, promoted: g.promoted, reason: g.reason, progress: g.progress,
      env: g.env, tasks: g.tasks, metric: g.metric, k, margin: g.margin, decision: g.decision, incumbentVersion: g.incumbent,
      candidate, incumbent: g.incumbentPassAtK?.[String(k)] ?? null, difference: g.difference,
      rise: candidate !== null && before !== undefined ? candidate - before : null,
    };
    if (g.promoted && candidate !== null) lastPromoted.set(same, candidate);
    return row;
  });
}
