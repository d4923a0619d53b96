/**
 * Matching a remote answer against an action's candidates (`availableActions`), and the action
 * to execute when it matches none (docs/remote-engines.md).
 */
import { extractAction } from '../actions.js';

/** The `action` string field of an answer that is a JSON object (as sent, untrimmed), else null. */
function jsonAction(output: string): string | null {
  try {
    const j = JSON.parse(output) as { action?: unknown };
    if (j && typeof j === 'object' && typeof j.action === 'string') return j.action;
  } catch {
    /* not JSON */
  }
  return null;
}

/**
 * Index of the candidate an answer names, or -1: the answer trimmed; else, for JSON-schema answers,
 * its `action` field; else the first line without an "Action:" label (src/policy/actions.ts); each
 * compared exactly, then ignoring case and surrounding spaces.
 */
export function matchChoice(output: string, actions: string[]): number {
  const tries: string[] = [output.trim()];
  const fromJson = jsonAction(output);
  if (fromJson !== null) tries.push(fromJson.trim());
  tries.push(extractAction(output));
  for (const t of tries) {
    const i = actions.indexOf(t);
    if (i >= 0) return i;
  }
  for (const t of tries) {
    const i = actions.findIndex((a) => a.trim().toLowerCase() === t.toLowerCase());
    if (i >= 0) return i;
  }
  return -1;
}

/** The action to execute for an answer that matched no candidate: its JSON `action` or first line. */
export function invalidChoiceAction(output: string): string {
  return jsonAction(output) ?? extractAction(output);
}
