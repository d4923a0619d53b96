/**
 * Returns of a LaMer session (trial): within-episode discounted return g_t(n) and cross-episode
 * return G_t(n), in both the paper's form (Eq. 4) and the reference code's recursion.
 * See docs/method.md#returns.
 *
 * Units: rewards as given by the environment; the reward of turn t of attempt n is the reward the
 * env returned for the action of that turn (i.e. the `reward` field posted with step t+1).
 * Indices are 0-based (attempt 0 is the first).
 */

import type { ReturnMode } from '../../domain.js';

/** How the cross-episode return is computed (src/domain.ts RETURN_MODES). */
export type { ReturnMode } from '../../domain.js';

export interface ReturnConfig {
  /** Discount between turns of one attempt, gamma_step in [0, 1] (LaMer: 0.95). */
  gammaStep: number;
  /** Discount between attempts, gamma_traj in [0, 1] (LaMer: 0.6 MineSweeper in CODE). */
  gammaTraj: number;
  /** 'paper' (Eq. 4, default) or 'code' (reference recursion with the extra gamma_step factor). */
  mode?: ReturnMode;
}

/** LaMer CODE defaults for MineSweeper (docs/method.md#defaults): gamma_step 0.95, gamma_traj 0.6, paper's Eq. 4. */
export const DEFAULT_RETURNS: Required<ReturnConfig> = { gammaStep: 0.95, gammaTraj: 0.6, mode: 'paper' };

/** Returns of one session. */
export interface SessionReturns {
  /** Within-episode returns g_t(n), `attempts[n][t]`. */
  withinEpisode: number[][];
  /** Cross-episode returns G_t(n), `attempts[n][t]`: what an action turn is trained with. */
  crossEpisode: number[][];
  /**
   * Returns of the reflection turns: `reflection[n]` belongs to the reflection written after
   * attempt n, and equals G_0(n+1) (the reference code; docs/method.md#returns).
   * Length = attempts - 1.
   */
  reflection: number[];
}

function checkGamma(name: string, g: number): void {
  if (!Number.isFinite(g) || g < 0 || g > 1) throw new RangeError(`${name} must be in [0, 1], got ${g}`);
}

/**
 * Within-episode discounted return: g_t = sum_{l>=t} gamma_step^(l-t) r_l.
 * @param rewards per-turn rewards of one attempt, `[T]`
 * @returns `[T]` returns g_0..g_{T-1}
 * @throws RangeError when gamma is outside [0, 1] or a reward is not finite.
 */
export function discountedReturns(rewards: readonly number[], gammaStep: number): number[] {
  checkGamma('gammaStep', gammaStep);
  const g = new Array<number>(rewards.length);
  let running = 0;
  for (let t = rewards.length - 1; t >= 0; t--) {
    const r = rewards[t];
    if (!Number.isFinite(r)) throw new RangeError(`reward at turn ${t} is not finite: ${r}`);
    running = r + gammaStep * running; // g_t = r_t + gamma_step * g_{t+1}
    g[t] = running;
  }
  return g;
}

/**
 * Cross-episode returns of one session (LaMer; docs/method.md#returns).
 *
 * PAPER Eq. 4:  G_t(n) = g_t(n) + sum_{m>n} gamma_traj^(m-n) g_0(m)
 * CODE:         G_t(n) = g_t(n) + gamma_step^(T_n-1-t) * gamma_traj * G_0(n+1)
 *
 * An attempt with no turns has g_0 = 0; in CODE mode its G_0 is gamma_traj * G_0(n+1) (the
 * exponent is taken as 0).
 *
 * @param attemptRewards per-turn rewards of each attempt, `[N][T_n]`
 * @throws RangeError on gammas outside [0, 1] or non-finite rewards.
 */
export function sessionReturns(attemptRewards: readonly (readonly number[])[], cfg: ReturnConfig): SessionReturns {
  checkGamma('gammaTraj', cfg.gammaTraj);
  const mode = cfg.mode ?? 'paper';
  const N = attemptRewards.length;
  const withinEpisode = attemptRewards.map((r) => discountedReturns(r, cfg.gammaStep));
  const g0 = withinEpisode.map((g) => (g.length > 0 ? g[0] : 0));
  const crossEpisode: number[][] = new Array(N);
  const G0 = new Array<number>(N).fill(0); // G_0(n), needed for reflections and the CODE recursion

  if (mode === 'paper') {
    for (let n = 0; n < N; n++) {
      // future = sum_{m>n} gamma_traj^(m-n) g_0(m)
      let future = 0;
      for (let m = n + 1; m < N; m++) future += Math.pow(cfg.gammaTraj, m - n) * g0[m];
      crossEpisode[n] = withinEpisode[n].map((g) => g + future);
      G0[n] = g0[n] + future;
    }
  } else if (mode === 'code') {
    for (let n = N - 1; n >= 0; n--) {
      const next = n + 1 < N ? G0[n + 1] : 0; // G_0(n+1)
      const T = withinEpisode[n].length;
      // G_t(n) = g_t(n) + gamma_step^(T_n-1-t) * gamma_traj * G_0(n+1)
      crossEpisode[n] = withinEpisode[n].map((g, t) => g + Math.pow(cfg.gammaStep, T - 1 - t) * cfg.gammaTraj * next);
      G0[n] = T > 0 ? crossEpisode[n][0] : cfg.gammaTraj * next;
    }
  } else {
    throw new RangeError(`unknown return mode: ${String(mode)}`);
  }

  // reflection after attempt n: return G_0(n+1)
  const reflection: number[] = [];
  for (let n = 0; n + 1 < N; n++) reflection.push(G0[n + 1]);
  return { withinEpisode, crossEpisode, reflection };
}
