/**
 * Typed option tables for the recipes' command lines, in the manner of CleanRL's `Args` dataclass:
 * a recipe writes each option once, as one entry of its table (name, kind, default, range, help),
 * and everything else comes from the table: the usage text (`usageText`), the node:util parseArgs
 * configuration, the check of each value with its message, the defaults, the value types
 * (`ArgsOf`), and `--config FILE` (a JSON object of option values by flag name, which the options on
 * the command line override).
 *
 * A table's keys are the options' names in camelCase; the flag is the kebab-case form
 * (`daggerFrom` -> `--dagger-from`). Kinds, with the message each refusal gives (UsageError, one
 * line naming the option):
 * - `int`: a number that is an integer in [lo, hi]: "--x must be an integer in [lo, hi], got 'v'";
 * - `number`: a finite number in [lo, hi]: "--x must be a number in [lo, hi], got 'v'";
 *   (a blank value is refused by both: Number('') is 0)
 * - `digits`: an integer written in digits, >= min or in [min, max] (src/shared/usage-error.ts
 *   `intOpt`): "--x must be an integer >= min written in digits, got 'v'";
 * - `onOff`: on or off, read as a boolean: "--x must be on or off, got 'v'";
 * - `choice`: one of `choices`: "--x must be a, b or c, got 'v'";
 * - `text`: free text, read by the field's own `parse` when it has one (which throws UsageError);
 * - `flag`: present or absent (a boolean that takes no value).
 * An option whose default is null has no value unless given ("none" in the usage).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseArgsMessage } from '../shared/parse-args-message.js';
import { intOpt, UsageError } from '../shared/usage-error.js';

interface Common {
  /** What the option does, for the usage text (its default and range are added to it). */
  readonly help: string;
  /** The value's placeholder in the usage text (`N`, `DIR`); default by kind. */
  readonly meta?: string;
  /** The default as the usage writes it, where the value alone says too little (`none`, `0: off`). */
  readonly defaultText?: string;
}
/** An integer in `range` ([lo, hi]), read as a number ('1e3' is 1000). */
export interface IntField<D extends number | null> extends Common {
  readonly kind: 'int';
  readonly default: D;
  readonly range: readonly [number, number];
}
/** A finite number in `range` ([lo, hi]). */
export interface NumberField<D extends number | null> extends Common {
  readonly kind: 'number';
  readonly default: D;
  readonly range: readonly [number, number];
}
/** An integer written in digits, >= `min` (and <= `max` when given). */
export interface DigitsField<D extends number | null> extends Common {
  readonly kind: 'digits';
  readonly default: D;
  readonly min: number;
  readonly max?: number;
}
/** on or off. */
export interface OnOffField extends Common { readonly kind: 'onOff'; readonly default: boolean }
/** One of `choices` (the refusal lists them in this order). */
export interface ChoiceField<C extends string> extends Common {
  readonly kind: 'choice';
  readonly default: C;
  readonly choices: readonly C[];
}
/** Free text; `default` is text as well (or null), read by `parse` like a given value. */
export interface TextField<V, D extends string | null> extends Common {
  readonly kind: 'text';
  readonly default: D;
  readonly parse?: (text: string) => V;
}
/** Present or absent; `short` is its one-letter form. */
export interface FlagField extends Common { readonly kind: 'flag'; readonly default: false; readonly short?: string }

/** One entry of an option table. */
export type Field =
  | IntField<number | null> | NumberField<number | null> | DigitsField<number | null> | OnOffField | ChoiceField<string>
  | TextField<unknown, string | null> | FlagField;

/** An option table: option name (camelCase) -> its field, in the order of the usage text. */
export type OptionTable = Readonly<Record<string, Field>>;

/** The value type of a field. */
export type ValueOf<F> =
  F extends IntField<infer D> | NumberField<infer D> | DigitsField<infer D> ? number | D
    : F extends OnOffField | FlagField ? boolean
      : F extends ChoiceField<infer C> ? C
        : F extends TextField<infer V, infer D> ? (unknown extends V ? string : V) | (D extends null ? null : never)
          : never;

/** The parsed options of a table: each option's value, by name. */
export type ArgsOf<T extends OptionTable> = { -readonly [K in keyof T]: ValueOf<T[K]> };

/** Field makers: each keeps the literal types of its default and choices for `ArgsOf`. */
export const opt = {
  int: <D extends number | null>(f: Omit<IntField<D>, 'kind'>): IntField<D> => ({ kind: 'int', ...f }),
  number: <D extends number | null>(f: Omit<NumberField<D>, 'kind'>): NumberField<D> => ({ kind: 'number', ...f }),
  digits: <D extends number | null>(f: Omit<DigitsField<D>, 'kind'>): DigitsField<D> => ({ kind: 'digits', ...f }),
  onOff: (f: Omit<OnOffField, 'kind'>): OnOffField => ({ kind: 'onOff', ...f }),
  choice: <C extends string>(f: Omit<ChoiceField<C>, 'kind'>): ChoiceField<C> => ({ kind: 'choice', ...f }),
  text: <V = string, D extends string | null = string | null>(f: Omit<TextField<V, D>, 'kind'>): TextField<V, D> => ({
    kind: 'text',
    ...f,
  }),
  flag: (f: Omit<FlagField, 'kind' | 'default'>): FlagField => ({ kind: 'flag', default: false, ...f }),
};

/** The command-line flag of an option name: `daggerFrom` -> `dagger-from`. */
export function flagOf(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** `a`, `a or b`, `a, b or c`. */
function orList(xs: readonly string[]): string {
  return xs.length <= 1 ? (xs[0] ?? '') : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`;
}

/**
 * The value of option `name` written as `text` on the command line (a boolean for a flag).
 * @throws UsageError with the kind's message (module docstring).
 */
function readValue(name: string, field: Field, text: string | boolean): unknown {
  const flag = flagOf(name);
  if (field.kind === 'flag') return text === true;
  const v = String(text);
  switch (field.kind) {
    case 'int':
    case 'number': {
      // Number('') and Number(' ') are 0: a blank value is refused, not read as 0
      const x = v.trim() === '' ? NaN : Number(v);
      const [lo, hi] = field.range;
      const int = field.kind === 'int';
      if (!Number.isFinite(x) || (int && !Number.isInteger(x)) || x < lo || x > hi) {
        throw new UsageError(`--${flag} must be ${int ? 'an integer' : 'a number'} in [${lo}, ${hi}], got '${v}'`);
      }
      return x;
    }
    case 'digits':
      return intOpt(flag, v, undefined, field.min, field.max);
    case 'onOff':
      if (v !== 'on' && v !== 'off') throw new UsageError(`--${flag} must be on or off, got '${v}'`);
      return v === 'on';
    case 'choice':
      if (!field.choices.includes(v)) throw new UsageError(`--${flag} must be ${orList(field.choices)}, got '${v}'`);
      return v;
    case 'text':
      return field.parse ? field.parse(v) : v;
  }
}

/** The value of an option that is not given: its default (a text default read by its `parse`). */
function defaultValue(field: Field): unknown {
  if (field.kind === 'text' && field.default !== null && field.parse) return field.parse(field.default);
  return field.default;
}

/**
 * A config file's value of option `name` as the command line would give it: strings as they are,
 * numbers as text (String(n) reads back as n), booleans for flags, null for an option whose default
 * is null (its "none"). @throws UsageError for any other JSON value.
 */
function configText(name: string, field: Field, v: unknown): string | boolean | null {
  const flag = flagOf(name);
  if (field.kind === 'flag') {
    if (typeof v !== 'boolean') throw new UsageError(`--${flag} must be true or false`);
    return v;
  }
  if (v === null && field.default === null) return null;
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  throw new UsageError(`--${flag} must be a number or a string${field.default === null ? ' or null' : ''}, got ${JSON.stringify(v)}`);
}

/**
 * The option values in the JSON file `file`: an object whose keys are flags of `table` without
 * their dashes (`"dagger-from": 0.2`); a `$comment` key is ignored.
 * @throws UsageError (`--config FILE: ...`) for a file that cannot be read, is not a JSON object, or
 *   names an option the table does not have.
 */
function readConfig(table: OptionTable, file: string): Map<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new UsageError(`--config ${file}: ${why} (a JSON object of options expected)`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new UsageError(`--config ${file}: not a JSON object of options`);
  }
  const byFlag = new Map(Object.keys(table).map((name) => [flagOf(name), name]));
  const out = new Map<string, unknown>();
  for (const [key, v] of Object.entries(json)) {
    if (key === '$comment') continue;
    const name = byFlag.get(key);
    if (name === undefined) {
      throw new UsageError(`--config ${file}: unknown option '${key}' (the keys are the options' names without their dashes)`);
    }
    out.set(name, v);
  }
  return out;
}

/** What `parseTable` gives: the values, and which options were given (on the command line or in the config file). */
export interface ParsedOptions<T extends OptionTable> {
  args: ArgsOf<T>;
  given: ReadonlySet<keyof T & string>;
}

/**
 * Parse `argv` against `table` (strict: unknown options and positionals are refused), with
 * `--config FILE` and `--help` / `-h` besides the table's options. Each option's value comes from
 * the command line, else from the config file, else its default, and is checked by its kind
 * (module docstring); options are read in the table's order.
 * @returns the values, or null for --help (the caller prints `usageText`).
 * @throws UsageError with a one-line message naming the option (`--config FILE: ` first for a value
 *   from the file).
 */
export function parseTable<T extends OptionTable>(table: T, argv: string[]): ParsedOptions<T> | null {
  const options = Object.fromEntries([
    ...Object.entries(table).map(([name, f]) => [
      flagOf(name),
      f.kind === 'flag' ? { type: 'boolean', ...(f.short ? { short: f.short } : {}) } : { type: 'string' },
    ]),
    ['config', { type: 'string' }],
    ['help', { type: 'boolean', short: 'h' }],
  ]) as Record<string, { type: 'string' | 'boolean'; short?: string }>;
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values as typeof values;
  } catch (e) {
    // `--minutes -5` is read as an option without its value: the message says to write --minutes=-5
    throw new UsageError(parseArgsMessage(e));
  }
  if (values.help) return null;
  const file = typeof values.config === 'string' ? values.config : null;
  const fromFile = file === null ? new Map<string, unknown>() : readConfig(table, file);
  const args: Record<string, unknown> = {};
  const given = new Set<keyof T & string>();
  for (const [name, field] of Object.entries(table) as Array<[keyof T & string, Field]>) {
    const onLine = values[flagOf(name)];
    if (onLine !== undefined) {
      args[name] = readValue(name, field, onLine);
      given.add(name);
    } else if (fromFile.has(name)) {
      try {
        const text = configText(name, field, fromFile.get(name));
        args[name] = text === null ? null : readValue(name, field, text);
      } catch (e) {
        throw e instanceof UsageError ? new UsageError(`--config ${file}: ${e.message}`) : e;
      }
      if (args[name] !== null) given.add(name);
    } else args[name] = defaultValue(field);
  }
  return { args: args as ArgsOf<T>, given };
}

/** The usage text's placeholder of a field's value. */
function metaOf(field: Field): string {
  if (field.meta) return field.meta;
  switch (field.kind) {
    case 'int': case 'digits': return 'N';
    case 'number': return 'X';
    case 'onOff': return 'on|off';
    case 'choice': return field.choices.join('|');
    case 'text': return 'TEXT';
    case 'flag': return '';
  }
}

/** What the usage text adds to a field's help: its default and its range. */
function defaultNote(field: Field): string {
  if (field.kind === 'flag') return '';
  const value = field.defaultText
    ?? (field.default === null ? 'none' : field.kind === 'onOff' ? (field.default ? 'on' : 'off') : String(field.default));
  let range = '';
  if (field.kind === 'int') range = `; an integer in [${field.range.join(', ')}]`;
  if (field.kind === 'number') range = `; a number in [${field.range.join(', ')}]`;
  if (field.kind === 'digits') range = `; an integer ${field.max === undefined ? `>= ${field.min}` : `in [${field.min}, ${field.max}]`}`;
  return ` (default ${value}${range})`;
}

/** `text` wrapped to lines of at most `width` characters, every line after the first indented by `indent` spaces. */
function wrap(text: string, width: number, indent: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

/** Column of the help texts in the usage. */
const HELP_COLUMN = 26;
/** Width of the usage text's lines. */
const USAGE_WIDTH = 100;

/**
 * The usage text of `table`: `head` (the usage line), one entry per option in the table's order
 * (flag, placeholder, help, default, range), `--config` and `--help`, then `footer` if given.
 */
export function usageText(table: OptionTable, head: string, footer?: string): string {
  const entry = (flag: string, help: string) => {
    const left = `  ${flag}`;
    const pad = left.length < HELP_COLUMN - 1 ? left.padEnd(HELP_COLUMN) : `${left}\n${' '.repeat(HELP_COLUMN)}`;
    return pad + wrap(help, USAGE_WIDTH - HELP_COLUMN, HELP_COLUMN);
  };
  const lines = Object.entries(table).map(([name, f]) => {
    const meta = metaOf(f);
    return entry(`--${flagOf(name)}${meta ? ` ${meta}` : ''}`, f.help + defaultNote(f));
  });
  const config = 'a JSON object of these options by name, without the dashes ({"seed": 21, ...}); the options on the command line '
    + 'override it';
  lines.push(entry('--config FILE', config));
  lines.push(entry('--help, -h', 'this text'));
  return [head, ...lines, ...(footer ? ['', footer] : [])].join('\n');
}
