/**
 * What the OpenAI-compatible routes share (the sessionless `/openai/v1` and the session-scoped
 * `/v1/sessions/{id}/openai/v1`): sending an answer of the completion service
 * (src/serving/completions.ts) as a JSON body or as server-sent events.
 */
import type { FastifyReply } from 'fastify';
import type { OpenAiAnswer } from '../../serving/completions.js';

/** Server-sent events of a finished answer: the chunks, then `[DONE]`. */
export function sse(reply: FastifyReply, chunks: unknown[]): FastifyReply {
  const text = chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n';
  return reply.header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache').send(text);
}

/**
 * The handler's result for an answer: its body (Fastify serialises it by the route's response
 * schema), or, for a streamed answer, its chunks sent now as server-sent events (the reply itself,
 * which tells Fastify the answer is sent).
 */
export function send<T>(reply: FastifyReply, a: OpenAiAnswer<T>): T {
  return a.stream ? (sse(reply, a.chunks) as never) : a.body;
}
