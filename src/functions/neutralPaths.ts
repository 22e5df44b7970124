import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";

/**
 * Where the platform's runtime keeps a function's files: what function logs show instead of this machine's
 * paths (the data directory, a worker's scratch directory, Strata's installation), which stack traces,
 * `import.meta.url` and Deno's own errors carry.
 */
export const NEUTRAL_ROOT = "/var/tmp/sb-compile-edge-runtime";

/** A directory (or file) of this machine and the neutral path shown in its place. */
export type PathMapping = [host: string, neutral: string];

/** The path and, when it differs (a symlinked temporary directory), the path it resolves to. */
function spellings(hostPath: string): string[] {
  try {
    return [...new Set([hostPath, realpathSync.native(hostPath)])];
  } catch {
    return [hostPath];
  }
}

/**
 * Rewrites each host path of `mappings`, as a path and as a file URL, to its neutral path. Longer paths are
 * replaced first, so a directory inside another takes its own mapping.
 */
export function pathNeutraliser(mappings: PathMapping[]): (line: string) => string {
  const pairs = mappings
    .flatMap(([host, neutral]) =>
      spellings(host).flatMap((h): [string, string][] => [
        [pathToFileURL(h).href, pathToFileURL(neutral).href],
        [h, neutral],
      ]),
    )
    .sort(([a], [b]) => b.length - a.length);
  return (line) => pairs.reduce((text, [from, to]) => text.replaceAll(from, to), line);
}
