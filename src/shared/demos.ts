/**
 * The demonstration file format (SFT data): one `DemoSession` JSON object per line. Written by the
 * environments (`lamer demos`, src/envs/demos.ts) and read by training (src/training/data/sft-data.ts),
 * which must not import each other, so the shape lives here, below both. Types only.
 */

/**
 * One step of a demonstration: the observation the env posted, the action taken (null at the last
 * step), the reward of the previous action (0 at step 0), and whether the attempt ended / succeeded.
 */
export interface DemoStep {
  observation: string;
  action: string | null;
  reward: number;
  done: boolean;
  success: boolean;
}

/** One attempt of a demonstration; `reflection` follows a failed attempt when another follows, else null. */
export interface DemoAttempt {
  steps: DemoStep[];
  reflection: string | null;
}

/**
 * A demonstration session, one JSON object per line of the SFT demonstration file (written by
 * `lamer demos`, src/envs/demos.ts; read by src/training/data/sft-data.ts `parseDemoJsonl`).
 */
export interface DemoSession {
  env: string;
  taskId: string;
  instructions: string;
  memory: 'reflection_only';
  attempts: DemoAttempt[];
}
