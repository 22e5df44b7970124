import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { denoBinary } from "./deno";

/** A deployed file as the Management API stores it. */
export interface DeployedFile {
  name: string;
  content: string;
}

/** A deployment Deno cannot load: refused, with the reason. */
export class InvalidDeployment extends Error {}

const SOURCE = /\.(ts|tsx|mts|cts|js|jsx|mjs|cjs)$/;

/** Deno's module cache (remote and npm modules), shared by every function. */
export function denoCacheDir(dataDir: string): string {
  return path.join(dataDir, "functions", ".deno");
}

/** Where the files of a function (or one of its versions) live under the data directory. */
export function functionDir(dataDir: string, ref: string, slug: string, version?: number): string {
  const dir = path.join(dataDir, "functions", ref, slug);
  return version === undefined ? dir : path.join(dir, String(version));
}

/**
 * A deployed path as a relative path inside the function (`file:///x/a.ts`, `/x/a.ts` -> `x/a.ts`);
 * absolute escapes and `..` segments are refused.
 */
export function relativeFilePath(name: string): string {
  const plain = name.replace(/^file:\/\//, "").replace(/\\/g, "/");
  const normal = path.posix.normalize(plain).replace(/^\/+/, "");
  if (!normal || normal === "." || normal.split("/").includes("..")) {
    throw new InvalidDeployment(`Invalid file path: ${name}`);
  }
  return normal;
}

async function writeFiles(dir: string, files: DeployedFile[]) {
  for (const f of files) {
    const target = path.join(dir, relativeFilePath(f.name));
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, f.content);
  }
}

/** Parses every source file with Deno's own parser (`deno lint`), reporting syntax errors only. */
async function checkSyntax(dataDir: string, dir: string, files: string[]) {
  const sources = files.filter((f) => SOURCE.test(f));
  if (!sources.length) return;
  const run = promisify(execFile);
  const report = await run(denoBinary(), ["lint", "--json", "--no-config", ...sources], {
    cwd: dir,
    env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", DENO_DIR: denoCacheDir(dataDir) },
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    (r) => r.stdout,
    (e: { stdout?: string }) => e.stdout ?? "",
  );
  let errors: { file_path: string; message: string }[];
  try {
    errors = JSON.parse(report).errors ?? [];
  } catch {
    throw new Error(`deno lint gave no report: ${report.slice(0, 200)}`);
  }
  if (errors.length) {
    const first = errors[0];
    throw new InvalidDeployment(
      `Failed to parse ${path.relative(dir, first.file_path)}: ${first.message.split("\n")[0]}`,
    );
  }
}

/**
 * Writes a deployment into a staging directory and checks it: the entrypoint (and import map) must be
 * among the files, the import map must be JSON and every source file must parse. Returns the staging
 * directory, to be published under its version once the deployment is recorded.
 */
export async function stageDeployment(
  dataDir: string,
  ref: string,
  files: DeployedFile[],
  entrypoint: string,
  importMap: string | undefined,
): Promise<string> {
  const names = files.map((f) => relativeFilePath(f.name));
  // Deno reads a `.npmrc` next to the deno.json for npm registries and fetches what they list without the
  // functions' network rules (it loads modules before any function runs): a registry, or a package URL one
  // names, on this machine's network would be reached.
  if (names.some((n) => path.posix.basename(n) === ".npmrc")) {
    throw new InvalidDeployment(".npmrc files are not supported: npm packages come from the public registry");
  }
  if (!names.includes(relativeFilePath(entrypoint))) {
    throw new InvalidDeployment(`The entrypoint ${entrypoint} is not among the deployed files`);
  }
  if (importMap !== undefined) {
    const file = files.find((f) => relativeFilePath(f.name) === relativeFilePath(importMap));
    if (!file) throw new InvalidDeployment(`The import map ${importMap} is not among the deployed files`);
    try {
      JSON.parse(file.content);
    } catch (e) {
      throw new InvalidDeployment(`The import map ${importMap} is not JSON: ${(e as Error).message}`);
    }
  }
  const staging = path.join(dataDir, "functions", ref, `.staging-${randomUUID()}`);
  try {
    await writeFiles(staging, files);
    await checkSyntax(dataDir, staging, names);
    return staging;
  } catch (e) {
    await rm(staging, { recursive: true, force: true });
    throw e;
  }
}

/** Moves a checked staging directory to its version's place. */
export async function publishVersion(staging: string, dir: string) {
  await rm(dir, { recursive: true, force: true });
  await mkdir(path.dirname(dir), { recursive: true });
  await rename(staging, dir);
}

/**
 * Removes the files of versions before `version - 1`: the previous version stays while its worker
 * finishes the requests it is serving.
 */
export async function pruneVersions(dataDir: string, ref: string, slug: string, version: number) {
  const dir = functionDir(dataDir, ref, slug);
  for (const name of await readdir(dir)) {
    if (/^\d+$/.test(name) && Number(name) < version - 1) {
      await rm(path.join(dir, name), { recursive: true, force: true });
    }
  }
}

/** Writes a version's files when its directory is missing (a data directory moved or cleaned). */
export async function materialise(dir: string, files: () => Promise<DeployedFile[]>) {
  if (existsSync(dir)) return;
  const staging = `${dir}.staging-${randomUUID()}`;
  await writeFiles(staging, await files());
  await publishVersion(staging, dir);
}

export async function removeFunctionFiles(dataDir: string, ref: string, slug: string) {
  await rm(functionDir(dataDir, ref, slug), { recursive: true, force: true });
}
