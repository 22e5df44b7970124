import { createHash, randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { oneOffClient } from "../db/client";
import { withAdminTransaction } from "../db/transaction";
import { runUtilityStatement } from "../db/utility";

/**
 * Loads into a project's database (restores, upgrades, branch copies) run as the project's owner: on a
 * connection that logs in as the project's SQL role (`strata_sql_<ref>`, never a superuser) and acts as its
 * owner, so whatever tenant code the load sets off (constraints, defaults, triggers, domains, index
 * expressions, views) runs with the owner's rights. `SET ROLE` on a superuser's session would not do: tenant
 * code could `RESET ROLE`.
 *
 * The steps only a superuser may take go through `_strata_load` (sql/project/630_owner_loads.sql), in the
 * same transaction, with a key Strata registers for this one session from its own superuser connection.
 */

/** Where the owner's connection logs in: ProjectRecord has these, an upgrade builds them for the new cluster. */
export interface OwnerLogin {
  /** URL as `strata_sql_<ref>`. */
  sqlUrl: string;
  /** `postgres_<ref>`. */
  ownerRole: string;
}

/** Anything that runs a query as Strata's superuser on the same database: a client or a pool. */
interface Queryable {
  query(text: string, values?: unknown[]): Promise<pg.QueryResult>;
}

/** Strata's own part of a load, called from the owner's transaction. */
export class StrataLoad {
  constructor(
    private readonly client: pg.ClientBase,
    private readonly key: string,
    /** The role the load acts as. */
    readonly ownerRole: string,
  ) {}

  /** Whether the session still acts as the owner (tenant code may have run `SET ROLE`). */
  async actsAsOwner(): Promise<boolean> {
    const { rows } = await this.client.query("select current_user = $1 as owner", [this.ownerRole]);
    return rows[0].owner;
  }

  /** Drops the user's schemas whole (public is kept, emptied, with its privileges). */
  async dropUserSchemas(schemas: string[]): Promise<void> {
    await this.client.query("select _strata_load.drop_user_schemas($1, $2::text[])", [this.key, schemas]);
  }

  /** Empties tables of the platform's schemas (`"auth"."users"`, ...). */
  async truncatePlatformTables(tables: string[]): Promise<void> {
    await this.client.query("select _strata_load.truncate_platform_tables($1, $2::text[])", [
      this.key,
      tables,
    ]);
  }

  /**
   * Writes rows in COPY text format (`columns` in that order) into a platform table a superuser owns, keeping
   * rows already there; answers how many were written.
   */
  async loadPlatformRows(table: string, columns: string[], rows: Readable): Promise<number> {
    const { rows: staged } = await this.client.query(
      "select _strata_load.stage($1, $2, $3::text[]) as name",
      [this.key, table, columns],
    );
    const columnList = columns.map(quoteIdent).join(", ");
    await copyRowsInto(this.client, `copy ${staged[0].name} (${columnList}) from stdin`, rows);
    const { rows: written } = await this.client.query(
      "select _strata_load.load_staged($1, $2::regclass, $3) as n",
      [this.key, staged[0].name, table],
    );
    return Number(written[0].n);
  }

  /** Sets a sequence of a platform table a superuser owns. */
  async setPlatformSequence(sequence: string, value: string, isCalled: boolean): Promise<void> {
    await this.client.query("select _strata_load.set_platform_sequence($1, $2, $3::bigint, $4)", [
      this.key,
      sequence,
      value,
      isCalled,
    ]);
  }
}

export const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Streams `rows` (COPY text) into `copy ... from stdin` on `client`; answers how many were copied. */
export async function copyRowsInto(client: pg.ClientBase, copySql: string, rows: Readable): Promise<number> {
  const into = client.query(copyFrom(copySql));
  await pipeline(rows, into);
  return into.rowCount;
}

/**
 * Runs `work` in one transaction on a connection of its own that logs in as `login`'s SQL role and acts as
 * the owner; `admin` (Strata's superuser connection to the same database) registers the session's key for
 * `work`'s StrataLoad and removes it afterwards. The connection ends afterwards, so nothing tenant code left
 * in the session lasts.
 */
export async function withOwnerLoad<T>(
  login: OwnerLogin,
  admin: Queryable,
  applicationName: string,
  work: (client: pg.Client, strata: StrataLoad) => Promise<T>,
): Promise<T> {
  const client = oneOffClient({ connectionString: login.sqlUrl, application_name: applicationName });
  const key = randomBytes(32).toString("base64url");
  const keyHash = createHash("sha256").update(key).digest();
  try {
    await client.connect();
    await runUtilityStatement(client, "set role %I", [login.ownerRole]);
    const { rows } = await client.query("select pg_backend_pid() as pid");
    await admin.query(
      `insert into _strata_load.session_keys (key_hash, pid, owner_role, expires_at)
       values ($1, $2, $3, now() + interval '1 day')`,
      [keyHash, rows[0].pid, login.ownerRole],
    );
    return await withAdminTransaction(client, async () => {
      // A project's own timeouts (its config, its roles' settings) are for its requests, not for a load.
      await client.query("set local statement_timeout = 0");
      return work(client, new StrataLoad(client, key, login.ownerRole));
    });
  } finally {
    await client.end().catch(() => {});
    await admin
      .query("delete from _strata_load.session_keys where key_hash = $1 or expires_at < now()", [keyHash])
      .catch(() => {});
  }
}
