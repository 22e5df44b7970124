import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

/** Debian's PostgreSQL 15, the cluster of the real pg_cron test (test/modules/realCron.test.ts). */
export const PG15_BIN = "/usr/lib/postgresql/15/bin";
/** Debian's `postgresql-15-cron` (pg_cron 1.4 on bookworm). */
export const PG15_CRON_LIBRARY = "/usr/lib/postgresql/15/lib/pg_cron.so";

/**
 * A fresh machine gets Debian's package (and with it PostgreSQL 15) once per run, when the tests run as root.
 * The package makes and may start a cluster `15 main`: one it made is dropped (the test makes its own). A failed
 * install only says so: the test that needs it is skipped and names the missing file.
 */
export function ensurePgCron(): void {
  if (existsSync(PG15_CRON_LIBRARY) || process.getuid?.() !== 0) return;
  try {
    execFileSync(
      "sh",
      [
        "-c",
        "had=$(ls -d /etc/postgresql/15/main 2>/dev/null); apt-get update -q &&" +
          " DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15-cron &&" +
          ' { [ -n "$had" ] || pg_dropcluster --stop 15 main || true; }',
      ],
      { stdio: "inherit", timeout: 900_000 },
    );
  } catch (e) {
    console.warn(`postgresql-15-cron could not be installed: ${(e as Error).message}`);
  }
}
