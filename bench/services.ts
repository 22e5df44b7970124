/**
 * Every service against its floor, one after another: `npm run bench:services [-- --quick --skip-1gb
 * --sizes-... ]`. Runs bench/storage.ts, bench/realtime.ts and bench/functions.ts, each in a process of its
 * own with the same arguments (each reads the options it knows), and exits non-zero when one failed.
 */
import { spawnSync } from "node:child_process";

let failed = false;
for (const bench of ["storage", "realtime", "functions"]) {
  const run = spawnSync(
    process.execPath,
    ["--import", "tsx", `bench/${bench}.ts`, ...process.argv.slice(2)],
    {
      stdio: "inherit",
    },
  );
  if (run.status !== 0) {
    console.error(`bench/${bench}.ts failed (${run.status ?? run.signal})`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
