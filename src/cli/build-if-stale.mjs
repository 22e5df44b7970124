// `npm start`'s first step: compiles the sources to dist/ only when one of them is newer than the last build.
// `npm install` builds once; a no-op `tsc --incremental` still loads the whole program (several seconds), while
// comparing modification times takes milliseconds. Plain JavaScript, as it runs before anything is compiled.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync, utimesSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const STAMP = path.join(root, "dist/.tsbuildinfo");
const INPUTS = ["src", "presets", "plugins", "graphile.config.ts", "tsconfig.json", "tsconfig.build.json"];

/** The newest modification time under `p` (a folder's own time counts: it changes when a file is added or removed). */
function newest(p) {
  const stat = statSync(p, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(p)) latest = Math.max(latest, newest(path.join(p, entry)));
  return latest;
}

const built = statSync(STAMP, { throwIfNoEntry: false })?.mtimeMs ?? 0;
const changed = Math.max(...INPUTS.map((input) => newest(path.join(root, input))));
if (changed > built) {
  const tsc = path.join(root, "node_modules/typescript/bin/tsc");
  const { status } = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json")], {
    stdio: "inherit",
  });
  if (status !== 0) process.exit(status ?? 1);
  // tsc leaves its build info untouched when nothing needed emitting: the stamp says "checked now".
  const now = new Date();
  utimesSync(STAMP, now, now);
}
