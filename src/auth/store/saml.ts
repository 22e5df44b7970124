import type pg from "pg";

/**
 * SAML single sign-on's records: the providers the Management API registers and this service provider's key
 * pair (control plane), the relay state of each sign-in started here (the project's `auth` schema), and the
 * IDs of the responses already taken (control plane, shared by every node).
 */

type Db = pg.Pool | pg.PoolClient;

/** An SSO provider as the Management API stores it (settings kind `sso_providers`). */
export interface SsoProvider {
  id: string;
  saml: {
    id: string;
    entity_id: string;
    metadata_url?: string;
    metadata_xml?: string;
    attribute_mapping?: unknown;
    name_id_format?: string;
  };
  domains: { id: string; domain: string; created_at: string; updated_at: string }[];
  created_at: string;
  updated_at: string;
}

export async function ssoProviders(platformPool: pg.Pool, ref: string): Promise<SsoProvider[]> {
  const { rows } = await platformPool.query(
    "select value from platform.project_settings where project_ref = $1 and kind = 'sso_providers'",
    [ref],
  );
  return (rows[0]?.value?.items as SsoProvider[] | undefined) ?? [];
}

/**
 * A provider's metadata replaced by a fresh copy (its metadata_url's), `updated_at` now: only while the
 * provider still has the metadata it was refreshed from (a concurrent change by the Management API wins).
 */
export async function replaceProviderMetadata(
  platformPool: pg.Pool,
  ref: string,
  provider: SsoProvider,
  metadataXml: string,
): Promise<void> {
  const fresh = {
    ...provider,
    saml: { ...provider.saml, metadata_xml: metadataXml },
    updated_at: new Date().toISOString(),
  };
  await platformPool.query(
    `update platform.project_settings
        set value = jsonb_set(value, '{items}',
              (select jsonb_agg(case when item->>'id' = $2 and item->'saml'->>'metadata_xml' = $3
                                     then $4::jsonb else item end order by n)
                 from jsonb_array_elements(value->'items') with ordinality as t(item, n)))
      where project_ref = $1 and kind = 'sso_providers' and jsonb_typeof(value->'items') = 'array'
        and jsonb_array_length(value->'items') > 0`,
    [ref, provider.id, provider.saml.metadata_xml ?? "", JSON.stringify(fresh)],
  );
}

/** The project's service-provider key and certificate, as stored (sealed). */
export async function spKeyRow(
  platformPool: pg.Pool,
  ref: string,
): Promise<{ private_key: string; certificate: string } | undefined> {
  const { rows } = await platformPool.query(
    "select private_key, certificate from platform.saml_sp_keys where project_ref = $1",
    [ref],
  );
  return rows[0];
}

/** Stores the project's key pair unless one is stored already (two first uses at once: the first wins). */
export async function insertSpKeys(
  platformPool: pg.Pool,
  ref: string,
  sealed: { privateKey: string; certificate: string },
): Promise<void> {
  await platformPool.query(
    `insert into platform.saml_sp_keys (project_ref, private_key, certificate) values ($1, $2, $3)
     on conflict (project_ref) do nothing`,
    [ref, sealed.privateKey, sealed.certificate],
  );
}

/** Sign-ins never finished leave their relay state (and unused PKCE state): cleared after an hour. */
export async function clearStaleRelayStates(db: Db): Promise<void> {
  await db.query(
    `with gone as (delete from auth.saml_relay_states where created_at < now() - interval '1 hour'
                   returning flow_state_id)
     delete from auth.flow_state
      where id in (select flow_state_id from gone) and user_id is null`,
  );
}

export async function insertRelayState(
  db: Db,
  relay: {
    id: string;
    providerId: string;
    requestId: string;
    redirectTo: string | null;
    flowStateId: string | null;
  },
): Promise<void> {
  await db.query(
    `insert into auth.saml_relay_states (id, sso_provider_id, request_id, redirect_to, flow_state_id)
     values ($1, $2, $3, $4, $5)`,
    [relay.id, relay.providerId, relay.requestId, relay.redirectTo, relay.flowStateId],
  );
}

export interface RelayStateRow {
  sso_provider_id: string;
  request_id: string;
  redirect_to: string | null;
  flow_state_id: string | null;
  /** Seconds since the sign-in started. */
  age: string;
}

/** Takes a relay state (it is used once): undefined when there is none of that id. */
export async function takeRelayState(db: Db, id: string): Promise<RelayStateRow | undefined> {
  const { rows } = await db.query(
    `delete from auth.saml_relay_states where id = $1
     returning sso_provider_id, request_id, redirect_to, flow_state_id,
               extract(epoch from now() - created_at) as age`,
    [id],
  );
  return rows[0];
}

/**
 * Records response and assertion IDs (`[kind, id]`) as taken until `expiresAt` (forgetting those past
 * theirs): answers how many were new.
 */
export async function recordConsumedIds(
  platformPool: pg.Pool,
  ref: string,
  ids: [string, string][],
  expiresAt: Date,
): Promise<number> {
  await platformPool.query("delete from platform.saml_consumed_ids where expires_at < now()");
  const { rows } = await platformPool.query(
    `insert into platform.saml_consumed_ids (project_ref, kind, id, expires_at)
     select $1, kind, id, $3 from unnest($2::text[], $4::text[]) as t(kind, id)
     on conflict do nothing returning id`,
    [ref, ids.map((p) => p[0]), expiresAt, ids.map((p) => p[1])],
  );
  return rows.length;
}
