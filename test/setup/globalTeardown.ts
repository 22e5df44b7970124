import { rmSync } from "node:fs";

/** Stops the run's PostgreSQL and removes the run's temporary directory (clusters, data directories, packages). */
export default async function globalTeardown(): Promise<void> {
  await (globalThis as any).__strataEmbedded?.stop();
  const dir = process.env.STRATA_TEST_TMP;
  if (dir) rmSync(dir, { recursive: true, force: true });
}
