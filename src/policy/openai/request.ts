/**
 * What is sent to a remote OpenAI-compatible server for one generation: the chat messages of a
 * LaMer prompt, the sampling fields, the fields asking for token ids, and the kind's constrained
 * decoding fields that keep an action inside its candidates (docs/remote-engines.md).
 */
import type { GenerationRecord, PromptParts, RemoteVersionConfig, SamplingParams } from '../engine.js';

/** One chat message as sent and recorded (`role`, `content`). */
export type ChatMessage = GenerationRecord['messages'][number];

/**
 * The chat messages of a LaMer prompt: `system` = `instructions` when the prompt text starts with
 * them, `user` = the rest of the text (its leading newline removed); without instructions (or when
 * the text does not start with them) one `user` message with the whole text.
 * Joined with "\n" the contents give back the prompt text exactly (this server's own chat template).
 */
export function toMessages(prompt: PromptParts, instructions?: string): ChatMessage[] {
  const text = prompt.head + prompt.steps.join('') + prompt.tail;
  if (instructions && instructions.length > 0 && text.startsWith(instructions + '\n')) {
    return [
      { role: 'system', content: instructions },
      { role: 'user', content: text.slice(instructions.length + 1) },
    ];
  }
  return [{ role: 'user', content: text }];
}

/** A GBNF string literal (llama.cpp grammar) of `s`. */
function gbnfLiteral(s: string): string {
  return '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t') + '"';
}

/**
 * The request fields that keep the answer inside `actions`, per kind (docs/remote-engines.md),
 * and the name of that constraint as recorded (`parse` for a kind without one: the answer is
 * only matched afterwards).
 */
export function constraintFields(kind: RemoteVersionConfig['kind'], actions: string[]): { fields: Record<string, unknown>; constraint: NonNullable<GenerationRecord['constraint']> } {
  switch (kind) {
    case 'vllm':
      return { fields: { structured_outputs: { choice: actions } }, constraint: 'structured_outputs' };
    case 'vllm-legacy':
    case 'lamer':
      return { fields: { guided_choice: actions }, constraint: 'guided_choice' };
    case 'llamacpp':
      return { fields: { grammar: `root ::= ${actions.map(gbnfLiteral).join(' | ')}` }, constraint: 'grammar' };
    case 'openai':
      return {
        fields: {
          response_format: {
            type: 'json_schema',
            json_schema: {
              name: 'action',
              strict: true,
              schema: { type: 'object', properties: { action: { type: 'string', enum: actions } }, required: ['action'], additionalProperties: false },
            },
          },
        },
        constraint: 'json_schema',
      };
    default:
      return { fields: {}, constraint: 'parse' };
  }
}

/** Sampling fields of a request (`temperature`, `top_p`, `seed`); `top_k` only where the kind accepts it. */
export function samplingFields(kind: RemoteVersionConfig['kind'], s: SamplingParams): Record<string, unknown> {
  const f: Record<string, unknown> = { temperature: s.temperature, top_p: s.topP };
  if (s.seed !== undefined) f.seed = s.seed;
  if (s.topK > 0 && ['vllm', 'vllm-legacy', 'lamer', 'llamacpp'].includes(kind)) f.top_k = s.topK;
  return f;
}

/** Fields asking for prompt and output token ids where the kind can return them; else none. */
export function tokenFields(kind: RemoteVersionConfig['kind']): Record<string, unknown> {
  return ['vllm', 'vllm-legacy', 'lamer'].includes(kind) ? { return_token_ids: true, return_tokens_as_token_ids: true } : {};
}
