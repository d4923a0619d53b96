/**
 * One training sequence from turns whose served prompts extend each other (docs/architecture.md
 * "Training data layout"): the acting prompt is append-only and the reflection prompt continues
 * the last acting prompt (src/agent/prompt.ts), so a run of turns can be laid as the first turn's
 * prompt followed by each turn's new tail and output, every turn's prompt a prefix of it. The
 * common core of the SFT packer (sft-data.ts) and the RL packer (rl-packing.ts); deciding which
 * turns form a run is theirs.
 */

/** One turn of a run, in the order the turns are laid. */
export interface RunTurn {
  /** The turn's served prompt: the first turn's prompt + everything laid before this turn + a tail
   *  (the caller has checked this). */
  prompt: readonly number[];
  /** The turn's output tokens, `[outLen]`. */
  output: readonly number[];
  /** How many of `output` the sequence shows: outLen, or outLen - 1 when the next turn's prompt
   *  does not show the last token (the EOS that ended the answer), which then trains at the first
   *  position of the next tail (dropped where that tail is empty or no turn follows). */
  shown: number;
  /** Whether the output trains; an untrained turn's tokens stay in the sequence as context. */
  trained: boolean;
}

/** Where a trained position's target comes from: output token `token` of turn `turn`. */
export interface TargetSource {
  turn: number;
  token: number;
}

/** A laid run; every array but `starts` is `[seqLen]`, position i being the one that predicts `tokens[i]`. */
export interface PackedRun {
  /** The sequence after the first turn's prompt: each turn's tail, then its shown output tokens. */
  tokens: number[];
  /** The token trained at each position (a trained output token, or a previous turn's unshown last
   *  token at the first position of the next tail); -1 where nothing trains. */
  targets: number[];
  /** The output token each trained position trains; null where `targets` is -1. */
  sources: Array<TargetSource | null>;
  /** Per turn: the index in `tokens` where its output starts. */
  starts: number[];
}

/**
 * Lay a run of turns after `first` (the first turn's prompt). Each turn adds the part of its prompt
 * not laid yet (its tail, untrained), then its `shown` output tokens, each the target of its own
 * position when the turn trains; a trained turn's unshown last token is the target of the first
 * position of the next tail, where the per-turn sample trains it (right after the turn's shown
 * output). The same per-token targets as the turns' own samples, at O(k) positions for k turns.
 */
export function packRun(first: readonly number[], turns: readonly RunTurn[]): PackedRun {
  const tokens: number[] = [];
  const targets: number[] = [];
  const sources: Array<TargetSource | null> = [];
  const starts: number[] = [];
  const lay = (id: number, source: TargetSource | null) => {
    tokens.push(id);
    targets.push(source ? turns[source.turn].output[source.token] : -1);
    sources.push(source);
  };
  let unshown: TargetSource | null = null; // the previous turn's trained last token, not in its prompt
  turns.forEach((t, j) => {
    const tailAt = tokens.length;
    for (const id of t.prompt.slice(first.length + tokens.length)) lay(id, null);
    if (unshown && tailAt < tokens.length) {
      targets[tailAt] = turns[unshown.turn].output[unshown.token];
      sources[tailAt] = unshown;
    }
    unshown = null;
    starts.push(tokens.length);
    for (let k = 0; k < t.shown; k++) lay(t.output[k], t.trained ? { turn: j, token: k } : null);
    if (t.trained && t.shown < t.output.length) unshown = { turn: j, token: t.output.length - 1 };
  });
  return { tokens, targets, sources, starts };
}
