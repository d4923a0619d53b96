/** drizzle-kit settings: `npm run db:generate` writes SQL migrations from src/db/schema.ts into migrations/. */
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: './src/db/schema.ts',
  out: './migrations',
});
