import { execFileSync } from "node:child_process";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { CHROMIUM } from "../setup/chromium";

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Builds Studio into dist/studio when its sources changed since the last build (as `npm start` does). */
export function buildStudio(): void {
  execFileSync(process.execPath, [path.resolve(__dirname, "../../src/cli/build-if-stale.mjs"), "studio"], {
    stdio: "inherit",
  });
}

export const VIEWPORT = { width: 1440, height: 900 };
