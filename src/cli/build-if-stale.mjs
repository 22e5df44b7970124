// `npm start`'s first step: compiles the server's sources to dist/ and builds Studio (the dashboard) into
// dist/studio, each only when one of its sources is newer than its last build. `npm install` builds once; a
// no-op `tsc --incremental` still loads the whole program (several seconds), while comparing modification times
// takes milliseconds. Plain JavaScript, as it runs before anything is compiled. `node build-if-stale.mjs studio`
// builds Studio only (the browser tests).
import { spawnSync } from "node:child_process";
import { readdirSync, statSync, utimesSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = (name) => path.join(root, "node_modules", name);

const TARGETS = {
  server: {
    stamp: "dist/.tsbuildinfo",
    inputs: ["src", "presets", "plugins", "graphile.config.ts", "tsconfig.json", "tsconfig.build.json"],
    command: [bin("typescript/bin/tsc"), "-p", path.join(root, "tsconfig.build.json")],
  },
  studio: {
    stamp: "dist/studio/index.html",
    inputs: ["studio", "package.json"],
    command: [bin("vite/bin/vite.js"), "build", "--config", path.join(root, "studio/vite.config.mts")],
  },
};

/** The newest modification time under `p` (a folder's own time counts: it changes when a file is added or removed). */
function newest(p) {
  const stat = statSync(p, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(p)) latest = Math.max(latest, newest(path.join(p, entry)));
  return latest;
}

function buildIfStale({ stamp, inputs, command }) {
  const stampPath = path.join(root, stamp);
  const built = statSync(stampPath, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const changed = Math.max(...inputs.map((input) => newest(path.join(root, input))));
  if (changed <= built) return;
  const { status } = spawnSync(process.execPath, command, { stdio: "inherit", cwd: root });
  if (status !== 0) process.exit(status ?? 1);
  // A build may leave its stamp untouched when nothing needed emitting: the stamp says "checked now".
  const now = new Date();
  utimesSync(stampPath, now, now);
}

const only = process.argv[2];
for (const [name, target] of Object.entries(TARGETS)) if (!only || only === name) buildIfStale(target);
