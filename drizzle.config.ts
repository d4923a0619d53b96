/** drizzle-kit settings: `npm run db:generate` writes SQL migrations from src/db/schema.ts into migrations/ (and the PostgreSQL ones, drizzle.config.pg.ts). */
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: './src/db/schema.ts',
  out: './migrations',
});
