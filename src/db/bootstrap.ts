import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { withAdminTransaction } from "./transaction";
import { CATALOG_ONLY_SESSION, oneOffClient } from "./client";

/** `project` runs in every project database; `platform` only in the main database (the control plane). */
export type BootstrapSet = "project" | "platform";

// src/db in the sources, dist/src/db once compiled: the sql/ folder sits at the package root either way.
const SQL_DIR = [path.resolve(__dirname, "../../sql"), path.resolve(__dirname, "../../../sql")].find((dir) =>
  existsSync(path.join(dir, "project")),
)!;
// One lock for all bootstrap work, so two processes starting together apply each file once.
const BOOTSTRAP_LOCK = 7_305_001;

interface SqlFile {
  version: string;
  name: string;
  text: string;
}

function sqlFiles(set: BootstrapSet): SqlFile[] {
  const dir = path.join(SQL_DIR, set);
  return readdirSync(dir)
    .filter((f) => /^\d+_.*\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: f.split("_")[0], name: f, text: readFileSync(path.join(dir, f), "utf8") }));
}

/**
 * Applies the numbered files of `sets` that the database has not recorded yet (and `accept` accepts), in
 * order, each in its own transaction together with its entry in `_strata.bootstrap`. Returns the names of the
 * files applied.
 */
export async function applyBootstrap(
  databaseUrl: string,
  sets: BootstrapSet[],
  /** Only the files whose version this accepts (a database brought to another one's version). */
  accept: (version: string) => boolean = () => true,
): Promise<string[]> {
  // A project's files run where the tenant has objects of its own: they resolve nothing from its schemas.
  // (The control plane's create pgcrypto's functions in its search path.)
  const client = oneOffClient({
    connectionString: databaseUrl,
    options: sets.includes("platform") ? undefined : CATALOG_ONLY_SESSION,
  });
  await client.connect();
  const applied: string[] = [];
  try {
    await client.query("select pg_advisory_lock($1)", [BOOTSTRAP_LOCK]);
    await client.query(`
      create schema if not exists _strata;
      revoke all on schema _strata from public;
      create table if not exists _strata.bootstrap (
        set_name text not null,
        version text not null,
        name text not null,
        applied_at timestamptz not null default now(),
        primary key (set_name, version)
      )`);
    for (const set of sets) {
      const done = new Set(
        (await client.query("select version from _strata.bootstrap where set_name = $1", [set])).rows.map(
          (r) => r.version,
        ),
      );
      for (const file of sqlFiles(set)) {
        if (done.has(file.version) || !accept(file.version)) continue;
        await withAdminTransaction(client, async () => {
          await client.query(file.text);
          await client.query("insert into _strata.bootstrap (set_name, version, name) values ($1, $2, $3)", [
            set,
            file.version,
            file.name,
          ]);
        }).catch((e: Error) => {
          throw new Error(`bootstrap ${set}/${file.name} failed: ${e.message}`, { cause: e });
        });
        applied.push(`${set}/${file.name}`);
      }
    }
  } finally {
    await client.query("select pg_advisory_unlock($1)", [BOOTSTRAP_LOCK]).catch(() => {});
    await client.end();
  }
  return applied;
}
