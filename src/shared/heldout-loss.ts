/**
 * The shape of a held-out loss report (nats per trained target token, per output kind), shared by
 * the code that measures it (src/training/run/heldout-loss.ts heldOutLoss, src/recipes/heldout-loss.ts
 * heldOutDemoLoss) and the eval reports that print it (src/eval/base-policy.ts, src/eval/scaling.ts).
 * Types only.
 */

/** The loss of one kind of output. */
export interface KindLoss {
  /** Mean -ln p(target) over the trained target tokens, nats per token; null when there are none. */
  natsPerToken: number | null;
  /** Trained target tokens of this kind (makeBatch's mask: all output tokens, or a packed
   *  sample's `lossTargets` >= 0). */
  tokens: number;
}

/** Held-out loss per sample kind: acting turns ('action') and reflections ('reflection'). */
export interface HeldOutLoss {
  action: KindLoss;
  reflection: KindLoss;
}

/** `heldOutLoss` on held-out demonstrations, with what it was measured on. */
export interface HeldOutDemoLoss extends HeldOutLoss {
  sessions: number;
  seed: number;
  /** Samples per kind (a packed acting sample holds several turns). */
  samples: { action: number; reflection: number };
}
