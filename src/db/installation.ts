import { createHash, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";

/**
 * The PostgreSQL installation the clusters Strata runs start from: a copy, in STRATA_DATA_DIR, of the binaries
 * package's `bin`, `lib` and `share`, with Strata's control files for the platform's database modules added.
 *
 * Why a copy: PostgreSQL 17 finds extensions only in the `share` directory beside the real path of its binary
 * (symbolic links are resolved), and the package's own files are not Strata's to change. Why those extensions:
 * SQL written for the platform enables its modules with `create extension pg_cron` (pg_net, pgmq,
 * supabase_vault), which a migration pushed over the database listener sends to PostgreSQL itself. Every project
 * database has these modules already, built by Strata (sql/project/710-741): each extension here is a marker
 * that owns nothing. Its script only checks that the database has the module; `drop extension` removes the
 * marker and nothing of the module's. `pg_extension` and `pg_available_extensions` then list them as the
 * platform's tools expect. A real extension owns its tables, which is how Strata tells one apart
 * (sql/project/800_module_extensions.sql).
 *
 * The copy is made once per server binary and set of Strata's files (its directory is named for a digest of
 * both) and reused; a new one replaces the copies of the same major made before (a dependency update).
 */

interface ModuleExtension {
  name: string;
  /** The version the platform's clusters report as `default_version`. */
  version: string;
  comment: string;
  /** The schema the extension must be in, as its control file says on the platform (none: any). */
  schema?: string;
  /** A table of Strata's module in the database: the extension may be created where it exists. */
  moduleTable: string;
  /** Strata's module, as messages name it. */
  module: string;
}

const MODULE_EXTENSIONS: readonly ModuleExtension[] = [
  {
    name: "pg_cron",
    version: "1.6",
    comment: "Job scheduler for PostgreSQL",
    moduleTable: "cron.job",
    module: "cron",
  },
  {
    name: "pg_net",
    version: "0.14.0",
    comment: "Async HTTP",
    moduleTable: "net.http_request_queue",
    module: "net",
  },
  {
    name: "pgmq",
    version: "1.5.1",
    comment: "A lightweight message queue. Like AWS SQS and RSMQ but on Postgres.",
    schema: "pgmq",
    moduleTable: "pgmq.meta",
    module: "pgmq",
  },
  {
    name: "supabase_vault",
    version: "0.3.1",
    comment: "Supabase Vault Extension",
    schema: "vault",
    moduleTable: "vault.secrets",
    module: "vault",
  },
];

/** The files Strata adds to the installation's `share/postgresql/extension`, by name. */
function moduleExtensionFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const e of MODULE_EXTENSIONS) {
    files.set(
      `${e.name}.control`,
      [
        `# Strata's ${e.module} module, built into every project database: this extension owns nothing.`,
        `comment = '${e.comment}'`,
        `default_version = '${e.version}'`,
        "relocatable = false",
        ...(e.schema ? [`schema = '${e.schema}'`] : []),
        // The project's owner creates it, as on the platform; its script reads the catalog only.
        "trusted = true",
        "",
      ].join("\n"),
    );
    files.set(
      `${e.name}--${e.version}.sql`,
      [
        `-- ${e.name} as Strata provides it: the database's ${e.module} module is Strata's (sql/project/7xx) and`,
        "-- exists already; the extension creates nothing, so dropping it removes nothing of the module.",
        `\\echo Use "CREATE EXTENSION ${e.name}" to load this file. \\quit`,
        "do $strata$",
        "begin",
        `  if pg_catalog.to_regclass('${e.moduleTable}') is null then`,
        `    raise exception 'extension "${e.name}" is Strata''s ${e.module} module, which this database does not have'`,
        "      using hint = 'Strata builds it into every project database.';",
        "  end if;",
        "end",
        "$strata$;",
        "",
      ].join("\n"),
    );
  }
  return files;
}

/** The parts of an installation the server needs (the binaries package's layout). */
const PARTS = ["bin", "lib", "share"];

/** Copies made in this process, by source and data directory: computed once, so a running cluster's stays. */
const made = new Map<string, string>();

/**
 * The `bin` directory of Strata's copy of the installation whose `bin` is `sourceBinDir` (`bin/postgres`,
 * `bin/initdb`), made in `dataDir` when missing.
 */
export function strataInstallation(sourceBinDir: string, dataDir: string): string {
  const key = `${sourceBinDir}\0${dataDir}`;
  const known = made.get(key);
  if (known && existsSync(path.join(known, "postgres"))) return known;
  const binDir = makeInstallation(path.dirname(sourceBinDir), path.join(dataDir, "pg-installation"));
  made.set(key, binDir);
  return binDir;
}

function makeInstallation(source: string, root: string): string {
  const extensionDir = path.join("share", "postgresql", "extension");
  if (!existsSync(path.join(source, extensionDir)))
    throw new Error(`${source} is not a PostgreSQL installation of the expected layout (no ${extensionDir})`);
  const files = moduleExtensionFiles();
  const digest = createHash("sha256").update(readFileSync(path.join(source, "bin", "postgres")));
  for (const [name, text] of files) digest.update(`\0${name}\0${text}`);
  const version = execFileSync(path.join(source, "bin", "postgres"), ["--version"], { encoding: "utf8" });
  const release = /\d+(?:\.\d+)*/.exec(version)?.[0] ?? "unknown";
  const major = release.split(".")[0];
  const name = `${release}-${digest.digest("hex").slice(0, 12)}`;
  const target = path.join(root, name);
  if (!existsSync(path.join(target, "bin", "postgres"))) {
    // The OS user PostgreSQL runs as (as root: `postgres`) reads it; made aside, then renamed into place whole.
    mkdirSync(root, { recursive: true, mode: 0o755 });
    chmodSync(root, 0o755);
    const building = path.join(root, `.${name}.${randomBytes(4).toString("hex")}`);
    try {
      for (const part of PARTS)
        cpSync(path.join(source, part), path.join(building, part), {
          recursive: true,
          // The binaries as files, so PostgreSQL finds this copy's share; the libraries' links stay links to
          // their neighbours (copied as written, not made absolute paths into the package).
          ...(part === "bin" ? { dereference: true } : { verbatimSymlinks: true }),
        });
      for (const [file, text] of files)
        writeFileSync(path.join(building, extensionDir, file), text, { mode: 0o644 });
      chmodSync(building, 0o755);
      renameSync(building, target);
    } catch (e) {
      rmSync(building, { recursive: true, force: true });
      // Another process made the same copy a moment ago.
      if (!existsSync(path.join(target, "bin", "postgres"))) throw e;
    }
    // Copies of this major made for other binaries or another Strata version (and any left half-made).
    for (const other of readdirSync(root))
      if (other !== name && /^\.?(\d+)/.exec(other)?.[1] === major)
        rmSync(path.join(root, other), { recursive: true, force: true });
  }
  return path.join(target, "bin");
}
