#!/usr/bin/env node
/**
 * `lamer <command> [options]`: the command-line entry point. Each command lives in its own module
 * (`src/cli/<command>.ts`) exporting `run(argv: string[]): Promise<number>` (the exit code), loaded
 * only when called so that `lamer eval` does not pay for the server's imports and vice versa.
 */
const commands: Record<string, { module: string; summary: string }> = {
  serve: { module: './serve.js', summary: 'run the HTTP server (builtin model, SQLite)' },
  eval: { module: './eval.js', summary: 'play built-in environments against a server; pass@k' },
  train: { module: './train.js', summary: 'experiment driver: rollouts + training jobs, learning curve' },
  export: { module: './export.js', summary: 'write recorded steps as JSONL for external trainers' },
  replay: { module: './replay.js', summary: "replay a server's recorded sessions against another model version" },
  demos: { module: './demos.js', summary: 'generate solver demonstration sessions (SFT data)' },
};

function usage(): string {
  const lines = Object.entries(commands).map(([n, c]) => `  ${n.padEnd(8)} ${c.summary}`);
  return `usage: lamer <command> [options]\n\ncommands:\n${lines.join('\n')}\n\nlamer <command> --help for its options`;
}

async function main(): Promise<number> {
  const [name, ...rest] = process.argv.slice(2);
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return name ? 0 : 2;
  }
  const cmd = commands[name];
  if (!cmd) {
    console.error(`lamer: unknown command '${name}'\n\n${usage()}`);
    return 2;
  }
  const mod = (await import(cmd.module)) as { run: (argv: string[]) => Promise<number> };
  return mod.run(rest);
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exitCode = 1;
  },
);
