import type pg from "pg";
import type { JSONWebKeySet } from "jose";
import type { ThirdPartyRow } from "../../auth/thirdParty";
import { allRows, firstRow, oneRow } from "../rows";

/** platform.third_party_auth: the issuers whose JWTs a project's data APIs accept (src/auth/thirdParty.ts reads them). */

const COLUMNS =
  "id, type, oidc_issuer_url, jwks_url, custom_jwks, audience, resolved_jwks, inserted_at, updated_at, resolved_at";

/** A row as the API answers it: the verifier's fields, the keys found and when. */
export interface ThirdPartyAuthRow extends ThirdPartyRow {
  resolved_jwks: JSONWebKeySet | null;
  inserted_at: Date;
  updated_at: Date;
  resolved_at: Date | null;
}

/** A new integration: how its keys are found, and those found at creation (null: not yet). */
export type NewThirdPartyAuth = Omit<ThirdPartyAuthRow, "id" | "inserted_at" | "updated_at" | "resolved_at">;

export async function insertThirdPartyAuth(
  pool: pg.Pool,
  ref: string,
  tpa: NewThirdPartyAuth,
): Promise<ThirdPartyAuthRow> {
  return oneRow(
    pool,
    `insert into platform.third_party_auth
       (project_ref, type, oidc_issuer_url, jwks_url, custom_jwks, resolved_jwks, resolved_at, audience)
     values ($1, $2, $3, $4, $5, $6, case when $6::jsonb is null then null else now() end, $7)
     returning ${COLUMNS}`,
    [
      ref,
      tpa.type,
      tpa.oidc_issuer_url,
      tpa.jwks_url,
      tpa.custom_jwks && JSON.stringify(tpa.custom_jwks),
      tpa.resolved_jwks && JSON.stringify(tpa.resolved_jwks),
      tpa.audience,
    ],
  );
}

export async function listThirdPartyAuth(pool: pg.Pool, ref: string): Promise<ThirdPartyAuthRow[]> {
  return allRows(
    pool,
    `select ${COLUMNS} from platform.third_party_auth where project_ref = $1 order by inserted_at`,
    [ref],
  );
}

export async function getThirdPartyAuth(pool: pg.Pool, ref: string, id: string) {
  return firstRow<ThirdPartyAuthRow>(
    pool,
    `select ${COLUMNS} from platform.third_party_auth where project_ref = $1 and id::text = $2`,
    [ref, id],
  );
}

export async function deleteThirdPartyAuth(pool: pg.Pool, id: string): Promise<void> {
  await pool.query("delete from platform.third_party_auth where id = $1", [id]);
}
