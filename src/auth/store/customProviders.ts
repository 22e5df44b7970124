import type pg from "pg";

/** The project's custom OAuth 2.0 / OIDC providers (`auth.custom_oauth_providers`). */

type Db = pg.Pool | pg.PoolClient;

export interface CustomProviderRow {
  id: string;
  provider_type: "oauth2" | "oidc";
  identifier: string;
  name: string;
  client_id: string;
  client_secret: string;
  acceptable_client_ids: string[];
  scopes: string[];
  pkce_enabled: boolean;
  attribute_mapping: Record<string, unknown>;
  custom_claims_allowlist: string[];
  authorization_params: Record<string, string>;
  enabled: boolean;
  email_optional: boolean;
  issuer: string | null;
  discovery_url: string | null;
  skip_nonce_check: boolean;
  cached_discovery: Record<string, unknown> | null;
  authorization_url: string | null;
  token_url: string | null;
  userinfo_url: string | null;
  jwks_uri: string | null;
  created_at: Date;
  updated_at: Date;
}

/** The columns an admin sets (all but the id, the discovery cache's time and the timestamps). */
export type CustomProviderFields = Omit<CustomProviderRow, "id" | "created_at" | "updated_at">;

const FIELDS: (keyof CustomProviderFields)[] = [
  "provider_type",
  "identifier",
  "name",
  "client_id",
  "client_secret",
  "acceptable_client_ids",
  "scopes",
  "pkce_enabled",
  "attribute_mapping",
  "custom_claims_allowlist",
  "authorization_params",
  "enabled",
  "email_optional",
  "issuer",
  "discovery_url",
  "skip_nonce_check",
  "cached_discovery",
  "authorization_url",
  "token_url",
  "userinfo_url",
  "jwks_uri",
];

const JSON_FIELDS = new Set(["attribute_mapping", "authorization_params", "cached_discovery"]);
const valuesOf = (f: CustomProviderFields) =>
  FIELDS.map((k) => (JSON_FIELDS.has(k) && f[k] !== null ? JSON.stringify(f[k]) : f[k]));

export async function customProviders(db: Db, type?: string): Promise<CustomProviderRow[]> {
  const { rows } = await db.query(
    `select * from auth.custom_oauth_providers where $1::text is null or provider_type = $1
      order by created_at`,
    [type ?? null],
  );
  return rows;
}

export async function customProviderOf(db: Db, identifier: string): Promise<CustomProviderRow | undefined> {
  return (await db.query("select * from auth.custom_oauth_providers where identifier = $1", [identifier]))
    .rows[0];
}

export async function countCustomProviders(db: Db): Promise<number> {
  return (await db.query("select count(*)::int as n from auth.custom_oauth_providers")).rows[0].n;
}

/** A new provider; undefined when one of that identifier exists. */
export async function insertCustomProvider(
  db: Db,
  f: CustomProviderFields,
): Promise<CustomProviderRow | undefined> {
  const { rows } = await db.query(
    `insert into auth.custom_oauth_providers (${FIELDS.join(", ")}, discovery_cached_at)
     values (${FIELDS.map((_, i) => `$${i + 1}`).join(", ")}, case when $17::jsonb is null then null else now() end)
     on conflict (identifier) do nothing returning *`,
    valuesOf(f),
  );
  return rows[0];
}

export async function updateCustomProvider(
  db: Db,
  id: string,
  f: CustomProviderFields,
): Promise<CustomProviderRow> {
  const { rows } = await db.query(
    `update auth.custom_oauth_providers
        set ${FIELDS.map((k, i) => `${k} = $${i + 2}`).join(", ")},
            discovery_cached_at = case when $18::jsonb is null then null else now() end, updated_at = now()
      where id = $1 returning *`,
    [id, ...valuesOf(f)],
  );
  return rows[0];
}

export async function deleteCustomProvider(db: Db, id: string): Promise<void> {
  await db.query("delete from auth.custom_oauth_providers where id = $1", [id]);
}
