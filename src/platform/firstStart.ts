import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { KeyEncryptionKey } from "./kek";
import pg from "pg";
import { databaseName } from "../db/urls";
import { newAccessToken, newProjectRef, randomSecret, sha256 } from "./ids";
import { withAdminTransaction } from "../db/transaction";

export const DEFAULT_CLUSTER_ID = "local";
export const DEFAULT_REGION = "local";
export const BOOTSTRAP_ADMIN_EMAIL = "admin@strata.local";

/** Values only this machine knows in plain text (the token is stored hashed in the database). */
interface LocalState {
  managementToken?: string;
}

function readLocalState(dataDir: string): LocalState {
  const file = path.join(dataDir, "local-state.json");
  return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {};
}

function writeLocalState(dataDir: string, state: LocalState): void {
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(path.join(dataDir, "local-state.json"), JSON.stringify(state, null, 2) + "\n", {
    mode: 0o600,
  });
}

export interface FirstStartResult {
  defaultRef: string;
  /** The bootstrap admin's token, when this machine knows it (given, or generated here). */
  managementToken: string | undefined;
}

/**
 * Creates, once, what a fresh installation needs: the local cluster, the bootstrap admin user, the default
 * organization and the default project (the main database itself) with its JWT secret. Later starts only
 * apply `JWT_SECRET` and `MANAGEMENT_TOKEN` when given.
 */
export async function ensureFirstStart(
  client: pg.ClientBase,
  kek: KeyEncryptionKey,
  opts: {
    adminUrl: string;
    jwtSecret?: string;
    managementToken?: string;
    authenticatorPassword?: string;
    dataDir: string;
  },
): Promise<FirstStartResult> {
  return withAdminTransaction(client, async () => {
    await client.query("select pg_advisory_xact_lock(7305002)");
    const cluster = await client.query("select id from platform.clusters where id = $1", [
      DEFAULT_CLUSTER_ID,
    ]);
    if (cluster.rowCount === 0) {
      await client.query(
        "insert into platform.clusters (id, region, admin_url, authenticator_password) values ($1, $2, $3, $4)",
        [
          DEFAULT_CLUSTER_ID,
          DEFAULT_REGION,
          kek.seal(opts.adminUrl, "platform.clusters.admin_url"),
          kek.seal(
            opts.authenticatorPassword ?? randomSecret(24),
            "platform.clusters.authenticator_password",
          ),
        ],
      );
    } else {
      await client.query(
        "update platform.clusters set admin_url = $2, authenticator_password = coalesce($3, authenticator_password) where id = $1",
        [
          DEFAULT_CLUSTER_ID,
          kek.seal(opts.adminUrl, "platform.clusters.admin_url"),
          opts.authenticatorPassword === undefined
            ? null
            : kek.seal(opts.authenticatorPassword, "platform.clusters.authenticator_password"),
        ],
      );
    }

    // The bootstrap admin is the operator's own user: an installation administrator (cluster-wide powers).
    const user = await client.query(
      `insert into platform.users (email, username, is_installation_admin) values ($1, 'admin', true)
       on conflict (email) do update set is_installation_admin = true returning id`,
      [BOOTSTRAP_ADMIN_EMAIL],
    );
    const userId: string = user.rows[0].id;

    let project = await client.query("select ref from platform.projects where is_default");
    if (project.rowCount === 0) {
      const org = await client.query(
        // The installation's own organization has every feature (src/management/billing/plans.ts).
        `insert into platform.organizations (slug, name, plan) values ('default-org', 'Default Organization', 'enterprise')
         on conflict (slug) do update set name = platform.organizations.name returning id`,
      );
      await client.query(
        `insert into platform.organization_members (organization_id, user_id, role_name) values ($1, $2, 'Owner')
         on conflict do nothing`,
        [org.rows[0].id, userId],
      );
      project = await client.query(
        `insert into platform.projects (ref, name, organization_id, cluster_id, database_name, status, is_default, jwt_secret)
         values ($1, 'Default Project', $2, $3, $4, 'ACTIVE_HEALTHY', true, $5) returning ref`,
        [
          newProjectRef(),
          org.rows[0].id,
          DEFAULT_CLUSTER_ID,
          databaseName(opts.adminUrl),
          kek.seal(opts.jwtSecret ?? randomSecret(32), "platform.projects.jwt_secret"),
        ],
      );
    } else if (opts.jwtSecret) {
      const current = await client.query("select jwt_secret from platform.projects where is_default");
      if (kek.open(current.rows[0].jwt_secret, "platform.projects.jwt_secret") !== opts.jwtSecret) {
        await client.query(
          "update platform.projects set jwt_secret = $1, updated_at = now() where is_default",
          [kek.seal(opts.jwtSecret, "platform.projects.jwt_secret")],
        );
      }
    }

    const local = readLocalState(opts.dataDir);
    let managementToken = opts.managementToken ?? local.managementToken;
    const hasToken = await client.query("select 1 from platform.access_tokens where user_id = $1 limit 1", [
      userId,
    ]);
    if (!managementToken && hasToken.rowCount === 0) managementToken = newAccessToken();
    if (managementToken) {
      await client.query(
        `insert into platform.access_tokens (user_id, name, token_hash, token_prefix) values ($1, 'bootstrap', $2, $3)
         on conflict (token_hash) do nothing`,
        [userId, sha256(managementToken), managementToken.slice(0, 8)],
      );
      if (!opts.managementToken && managementToken !== local.managementToken)
        writeLocalState(opts.dataDir, { ...local, managementToken });
    }
    return { defaultRef: project.rows[0].ref, managementToken };
  });
}
