/**
 * Action extraction: the action to execute from the model's full output.
 * Part of the engine contract: the builtin and remote engines and the step transition all read an
 * action from an output this way.
 * Rule: the first non-empty line, trimmed, with a leading "Action:" label removed; an output with
 * no non-empty line gives ''.
 * Examples: " up\nbecause..." -> "up"; "Action: (2, 3)" -> "(2, 3)".
 */
export function extractAction(output: string): string {
  for (const raw of output.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    return line.replace(/^action\s*:\s*/i, '').trim();
  }
  return '';
}
