import { existsSync } from "node:fs";
import path from "node:path";

/**
 * The Deno binary shipped by the `deno` npm package: its postinstall copies it next to the package,
 * otherwise it is in the platform package (`@deno/<os>-<arch>[-glibc]`) the package depends on. Found with
 * the module system's own resolution (`require.resolve`: a package's published `package.json`, nothing private).
 */
export function denoBinary(): string {
  const name = process.platform === "win32" ? "deno.exe" : "deno";
  const copied = path.join(path.dirname(require.resolve("deno/package.json")), name);
  if (existsSync(copied)) return copied;
  const os = process.platform === "win32" ? "win32" : process.platform;
  const suffix = process.platform === "linux" ? "-glibc" : "";
  const pkg = require.resolve(`@deno/${os}-${process.arch}${suffix}/package.json`);
  return path.join(path.dirname(pkg), name);
}
