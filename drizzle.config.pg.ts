/**
 * drizzle-kit settings of the PostgreSQL dialect: `npm run db:generate` writes SQL migrations from
 * src/db/pg/schema.ts into migrations-pg/ (after the SQLite ones, drizzle.config.ts).
 */
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/pg/schema.ts',
  out: './migrations-pg',
});
