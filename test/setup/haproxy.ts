import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

/** Debian's HAProxy, the proxy of the cluster test (test/cluster) in front of three Strata nodes. */
export const HAPROXY = process.env.STRATA_TEST_HAPROXY ?? "/usr/sbin/haproxy";

/** A fresh machine gets Debian's package once per run, when the tests run as root (as for chromium). */
export function ensureHaproxy(): void {
  if (existsSync(HAPROXY) || process.getuid?.() !== 0) return;
  execFileSync("sh", ["-c", "apt-get update -q && apt-get install -y -q haproxy"], {
    stdio: "inherit",
    timeout: 900_000,
  });
}
