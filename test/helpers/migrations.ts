/**
 * Databases as an earlier build left them: a copy of a migrations folder (either dialect) whose
 * journal ends at a given migration, for drizzle's migrator to apply as that build did.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A temporary copy of `folder` (migrations/ or migrations-pg/) whose journal holds the entries
 * before the one tagged `*_<name>`, or up to and with it when `through`. The caller removes it.
 * @throws Error when no migration has that name.
 */
export function migrationsUpTo(folder: string, name: string, through: boolean): string {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-old-migrations-'));
  fs.cpSync(folder, copy, { recursive: true });
  const journalFile = path.join(copy, 'meta', '_journal.json');
  const journal = JSON.parse(fs.readFileSync(journalFile, 'utf8')) as { entries: Array<{ tag: string }> };
  const at = journal.entries.findIndex((e) => e.tag.endsWith(`_${name}`));
  if (at < 0) throw new Error(`no migration named ${name} in ${folder}`);
  journal.entries = journal.entries.slice(0, through ? at + 1 : at);
  fs.writeFileSync(journalFile, JSON.stringify(journal));
  return copy;
}
