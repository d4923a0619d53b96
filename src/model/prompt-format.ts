/**
 * Prompt formats of model versions: which layout a checkpoint was trained to read. Declared in a
 * builtin checkpoint's metadata (src/model/checkpoint.ts), rendered by the agent
 * (src/agent/prompt.ts renderActPrompt / renderReflectionPrompt).
 */
import { PROMPT_FORMATS } from '../domain.js';

/**
 * How a model version reads its prompts, declared by a builtin checkpoint in its metadata
 * (`lamer.promptFormat`; src/model/checkpoint.ts). Remote versions and checkpoints without one
 * use `chat`.
 * - `chat`: the layout of src/agent/prompt.ts (instructions, memory, the attempt's steps, the observation, the cue).
 * - `compact`: for small models trained on few tokens a decision (layout below). It assumes
 *   nothing about the environment: an env the checkpoint does not know gets its instructions.
 */
export type PromptFormat = { name: 'chat' } | CompactPromptFormat;

/**
 * The `compact` layout:
 *   head  = tag + memory lines        tag = "[env]" when the session's env label is in `envTags`
 *                                     (and `instructions` is not true), else the instructions
 *           memory line: "\nm " + reflection (each cut to COMPACT_REFLECTION_CHARS); with a
 *           `history_*` memory mode "\nh " + the previous attempt's last actions, space-separated
 *   steps = "\n" + obs_i + "\n> " + action_i   (only the last `historySteps` steps; 0 = none)
 *   tail  = "\n" + obs_t + "\n> "
 * Reflection prompt: the acting head, the failed attempt's last step ("\n" + obs + "\n> " +
 * action), then "\n" + final observation + "\n! ".
 * With `memoryAt: 'tail'` the memory lines leave the head and go between the observation and the
 * cue (tail = "\n" + obs_t + memory lines + "\n> "; reflection tail likewise before "\n! "): the
 * board then starts at the same position whatever the memory holds, so a model with absolute
 * position embeddings reads every attempt's board at the positions it read attempt 1's.
 */
export interface CompactPromptFormat {
  name: 'compact';
  /** Env labels the checkpoint was trained on; their sessions get the tag instead of instructions. */
  envTags: string[];
  /** Earlier steps of the current attempt shown (0: none; the games here are fully observable). */
  historySteps: number;
  /** true: always show the instructions, even for a known env. */
  instructions?: boolean;
  /** Where the memory lines go: after the tag (`head`, the default) or after the observation (`tail`). */
  memoryAt?: 'head' | 'tail';
}

/** The `chat` format (today's layout), used when a version declares none. */
export const CHAT_FORMAT: PromptFormat = { name: 'chat' };

/**
 * A prompt format from checkpoint metadata. @throws Error naming the field for anything that is
 * not a known format with valid fields (absent/null gives `chat`).
 */
export function parsePromptFormat(raw: unknown): PromptFormat {
  if (raw === undefined || raw === null) return CHAT_FORMAT;
  const f = raw as Record<string, unknown>;
  if (typeof f !== 'object' || !PROMPT_FORMATS.includes(f.name as never)) {
    throw new Error(`promptFormat.name must be one of ${PROMPT_FORMATS.join(', ')}, got ${JSON.stringify(f?.name)}`);
  }
  if (f.name === 'chat') return CHAT_FORMAT;
  if (!Array.isArray(f.envTags) || !f.envTags.every((t) => typeof t === 'string' && /^[A-Za-z0-9_.:-]{1,64}$/.test(t))) {
    throw new Error('promptFormat.envTags must be an array of env labels (letters, digits, _ . : -; 1-64 chars)');
  }
  if (!Number.isInteger(f.historySteps) || (f.historySteps as number) < 0 || (f.historySteps as number) > 64) {
    throw new Error(`promptFormat.historySteps must be an integer 0..64, got ${JSON.stringify(f.historySteps)}`);
  }
  if (f.instructions !== undefined && typeof f.instructions !== 'boolean') throw new Error('promptFormat.instructions must be a boolean');
  if (f.memoryAt !== undefined && f.memoryAt !== 'head' && f.memoryAt !== 'tail') throw new Error(`promptFormat.memoryAt must be 'head' or 'tail', got ${JSON.stringify(f.memoryAt)}`);
  return {
    name: 'compact', envTags: [...f.envTags] as string[], historySteps: f.historySteps as number,
    ...(f.instructions !== undefined ? { instructions: f.instructions as boolean } : {}),
    ...(f.memoryAt !== undefined ? { memoryAt: f.memoryAt as 'head' | 'tail' } : {}),
  };
}
