import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/**
 * A temporary directory for a test (a data directory, a cluster, a package), made under the run's own
 * directory, which globalTeardown removes with everything in it: a run leaves nothing in the system's
 * temporary directory, however its tests end.
 */
export function testTempDir(prefix: string): string {
  return mkdtempSync(path.join(process.env.STRATA_TEST_TMP ?? os.tmpdir(), prefix));
}
