/**
 * Prompt rendering: the acting prompt and the reflection prompt of a LaMer
 * session, as `PromptParts` (src/policy/engine.ts). Pure functions over plain data, so the SFT job
 * renders demonstration sessions with exactly the prompts used when serving.
 *
 * Memory modes (docs/method.md#memory-and-reflections):
 * - `reflection_only`: the acting prompt lists all previous reflections (each cut to 2000 chars);
 * - `history_only`: the acting prompt shows the previous attempt's last 7 steps;
 * - `history_and_reflection`: both.
 * The reflection prompt continues the acting prompt of the attempt that failed: the same head
 * (instructions and memory), every step of that attempt that fits the context (the LaMer reference
 * code shows its last ~7 steps only: the whole attempt is at most the turn cap, and a prompt that extends the
 * last acting prompt lets the builtin engine reuse its KV cache, src/policy/builtin/generate.ts),
 * the final observation, and says the task was not completed.
 *
 * Layout (compact, for a small byte-level model):
 *   head  = instructions + memory section
 *   steps = "\nObservation:\n" + obs_i + "\nAction: " + action_i      (earlier steps of this attempt)
 *   tail  = "\nObservation:\n" + obs_t + "\nAction: "
 * The first observation of the attempt is steps[0] (or the tail at step 0); it is not repeated in
 * the head (the builtin games' observations are Markov). The layout is append-only: while the
 * context drops nothing, prompt(step t+1) = prompt(step t) + action_t + tail(t+1) (the cue ends
 * with "Action: ", so the action the model writes right after it is the text the next prompt
 * shows; a training sequence can hold a whole attempt, src/training/data/data.ts), and the reflection
 * prompt = prompt(last step) + last action + reflection tail.
 */
import type { PromptParts } from '../policy/engine.js';
import type { MemoryMode } from '../domain.js';
import type { CompactPromptFormat, PromptFormat } from '../model/prompt-format.js';
export { CHAT_FORMAT, parsePromptFormat, type CompactPromptFormat, type PromptFormat } from '../model/prompt-format.js';

/** Max characters of one reflection in a `compact` prompt's memory lines. */
export const COMPACT_REFLECTION_CHARS = 200;

/** The compact memory: the `history_*` line and one line per reflection ("\nh ...", "\nm ..."). */
function compactMemory(ctx: Pick<ActContext, 'memory' | 'previousAttempts'>): string {
  let out = '';
  const prev = ctx.previousAttempts;
  if (prev.length > 0 && (ctx.memory === 'history_only' || ctx.memory === 'history_and_reflection')) {
    const last = prev[prev.length - 1]!;
    out += `\nh ${last.steps.slice(-HISTORY_STEPS).map((s) => s.action).join(' ')}`;
  }
  if (ctx.memory === 'reflection_only' || ctx.memory === 'history_and_reflection') {
    for (const a of prev) if (a.reflection !== null) out += `\nm ${cutChars(a.reflection.replace(/\s+/g, ' ').trim(), COMPACT_REFLECTION_CHARS)}`;
  }
  return out;
}

/** The compact head: the env tag (or the instructions), then the memory unless it goes in the tail. */
function compactHead(format: CompactPromptFormat, ctx: Pick<ActContext, 'instructions' | 'memory' | 'previousAttempts' | 'env'>): string {
  const known = !format.instructions && typeof ctx.env === 'string' && format.envTags.includes(ctx.env);
  const head = known ? `[${ctx.env}]` : ctx.instructions;
  return format.memoryAt === 'tail' ? head : head + compactMemory(ctx);
}

/** The memory lines the tail carries (`memoryAt: 'tail'`), else ''. */
const tailMemory = (format: CompactPromptFormat, ctx: Pick<ActContext, 'memory' | 'previousAttempts'>): string =>
  (format.memoryAt === 'tail' ? compactMemory(ctx) : '');

const compactStep = (s: PromptStep): string => `\n${s.observation}\n> ${s.action}`;

/** The `compact` acting prompt (layout in `CompactPromptFormat`). */
export function renderCompactAct(format: CompactPromptFormat, ctx: ActContext): PromptParts {
  const shown = format.historySteps > 0 ? ctx.steps.slice(-format.historySteps) : [];
  return { head: compactHead(format, ctx), steps: shown.map(compactStep), tail: `\n${ctx.observation}${tailMemory(format, ctx)}\n> ` };
}

/** The `compact` reflection prompt (layout in `CompactPromptFormat`). */
export function renderCompactReflection(format: CompactPromptFormat, ctx: ReflectContext): PromptParts {
  const last = ctx.steps.slice(-1);
  return { head: compactHead(format, ctx), steps: last.map(compactStep), tail: `\n${ctx.finalObservation}${tailMemory(format, ctx)}\n! ` };
}

/** Steps of the previous attempt shown by the `history_*` memory modes, as in the reference code
 *  (docs/method.md#memory-and-reflections). */
export const HISTORY_STEPS = 7;
/** Max characters (code points) of one reflection in the acting prompt, as in the reference code
 *  (docs/method.md#memory-and-reflections). */
export const REFLECTION_CHARS = 2000;

/** The first `max` characters (code points, as JSON Schema's maxLength counts) of `text`. */
export function cutChars(text: string, max: number): string {
  if (text.length <= max) return text;
  let out = '';
  let n = 0;
  for (const ch of text) {
    if (n++ === max) break;
    out += ch;
  }
  return out;
}

/** One step as the prompt sees it: the observation and the action taken on it. */
export interface PromptStep {
  observation: string;
  action: string;
}

/** A finished earlier attempt of the same session. */
export interface PromptAttempt {
  /** Observations with the actions taken on them, in order (the final observation excluded). */
  steps: PromptStep[];
  /** The observation the attempt ended on. */
  finalObservation: string;
  success: boolean;
  /** The reflection written after it, or null. */
  reflection: string | null;
}

/** Everything the acting prompt depends on. */
export interface ActContext {
  instructions: string;
  memory: MemoryMode;
  /** 0-based index of the current attempt. */
  attempt: number;
  /** Earlier attempts of this session, attempt 0 first. */
  previousAttempts: PromptAttempt[];
  /** Earlier steps of the current attempt (steps[0].observation is the initial observation). */
  steps: PromptStep[];
  /** The observation to act on now. */
  observation: string;
  /** The session's env label (`compact` prompts name a known env by it); null or absent: none. */
  env?: string | null;
  /** How the model version reads prompts (absent: `chat`, the layout above). */
  format?: PromptFormat;
}

/** Everything the reflection prompt depends on: the attempt that just failed, and the memory its
 *  acting prompts showed (so that the reflection prompt extends them). */
export interface ReflectContext {
  instructions: string;
  memory: MemoryMode;
  /** 0-based index of the attempt that failed. */
  attempt: number;
  /** Attempts before it, attempt 0 first. */
  previousAttempts: PromptAttempt[];
  /** Its steps with actions (the final observation excluded). */
  steps: PromptStep[];
  finalObservation: string;
  /** As in {@link ActContext.env}. */
  env?: string | null;
  /** As in {@link ActContext.format}. */
  format?: PromptFormat;
}

function renderStep(s: PromptStep): string {
  return `\nObservation:\n${s.observation}\nAction: ${s.action}`;
}

/**
 * The memory section of a `chat` prompt: per the memory mode, the previous attempt's last
 * {@link HISTORY_STEPS} steps and final observation, and/or every earlier reflection; each part
 * starts with "\n"; '' on the first attempt or when there is nothing to show. The session's
 * OpenAI-compatible endpoint sends the same text (without its leading "\n") as the memory.
 */
export function memorySection(ctx: Pick<ActContext, 'memory' | 'previousAttempts'>): string {
  const prev = ctx.previousAttempts;
  if (prev.length === 0) return '';
  let out = '';
  if (ctx.memory === 'history_only' || ctx.memory === 'history_and_reflection') {
    const last = prev[prev.length - 1]!;
    const shown = last.steps.slice(-HISTORY_STEPS);
    out += `\nPrevious attempt ${prev.length - 1} (${last.success ? 'completed' : 'not completed'}), last ${shown.length} steps:`;
    out += shown.map(renderStep).join('');
    out += `\nFinal observation:\n${last.finalObservation}`;
  }
  if (ctx.memory === 'reflection_only' || ctx.memory === 'history_and_reflection') {
    const refl = prev
      .map((a, i) => (a.reflection === null ? '' : `\nAttempt ${i}: ${cutChars(a.reflection, REFLECTION_CHARS)}`))
      .join('');
    if (refl !== '') out += `\nReflections on earlier attempts:${refl}`;
  }
  return out;
}

/** The acting prompt for the current step (layout above). */
export function renderActPrompt(ctx: ActContext): PromptParts {
  if (ctx.format && ctx.format.name === 'compact') return renderCompactAct(ctx.format, ctx);
  return {
    head: `${ctx.instructions}${memorySection(ctx)}`,
    steps: ctx.steps.map(renderStep),
    tail: `\nObservation:\n${ctx.observation}\nAction: `,
  };
}

/** The reflection prompt after a failed attempt: the acting head, all its steps, then the end. */
export function renderReflectionPrompt(ctx: ReflectContext): PromptParts {
  if (ctx.format && ctx.format.name === 'compact') return renderCompactReflection(ctx.format, ctx);
  return {
    head: `${ctx.instructions}${memorySection(ctx)}`,
    steps: ctx.steps.map(renderStep),
    tail:
      `\nObservation:\n${ctx.finalObservation}\nAttempt ${ctx.attempt} ended: the task was not completed.` +
      `\nReflect on what went wrong and write a plan for the next attempt.\nReflection:`,
  };
}
