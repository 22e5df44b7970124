import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

/** Debian's chromium, which Studio's browser tests drive; no browser is downloaded. */
export const CHROMIUM = process.env.STRATA_TEST_CHROMIUM ?? "/usr/bin/chromium";

/** A fresh machine gets Debian's package once per run (as `.ci/run` installs it), when the tests run as root. */
export function ensureChromium(): void {
  if (existsSync(CHROMIUM) || process.getuid?.() !== 0) return;
  execFileSync("sh", ["-c", "apt-get update -q && apt-get install -y -q chromium"], {
    stdio: "inherit",
    timeout: 900_000,
  });
}
