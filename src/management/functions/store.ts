import type pg from "pg";
import type { DeployedFile } from "../../functions/files";
import { announceFunctionsChanged, FUNCTIONS_CHANGED } from "../../functions/gate";
import { allRows, firstRow, oneRow } from "../rows";

/** platform.edge_functions (what each function serves) and platform.edge_function_bundles (uploads waiting). */

/** A function's row; `files` are its paths and contents as deployed. */
export type FunctionRow = Record<string, any> & {
  id: string;
  project_ref: string;
  slug: string;
  version: number;
};

export interface Deployment {
  ref: string;
  slug: string;
  name: string;
  verifyJwt: boolean;
  entrypoint: string;
  importMap: string | null;
  files: DeployedFile[];
}

/**
 * The version a new upload of a function gets: after the served one and after every bundle still waiting,
 * so that no two uploads share a version directory.
 */
const NEXT_VERSION = `greatest(
    coalesce((select version from platform.edge_functions where project_ref = $1 and slug = $2), 0),
    coalesce((select max(version) from platform.edge_function_bundles where project_ref = $1 and slug = $2), 0)
  ) + 1`;

/** A deploy: the function is created or its next version served at once. */
export async function storeFunction(pool: pg.Pool, d: Deployment): Promise<FunctionRow> {
  return oneRow(
    pool,
    // Every node serving the project reads the new version at its next invocation (DeployedFunctions).
    `with f as (
       insert into platform.edge_functions
         (project_ref, slug, name, verify_jwt, entrypoint_path, import_map_path, files, version)
       values ($1, $2, $3, $4, $5, $6, $7, ${NEXT_VERSION})
       on conflict (project_ref, slug) do update set name = excluded.name, verify_jwt = excluded.verify_jwt,
         entrypoint_path = excluded.entrypoint_path, import_map_path = excluded.import_map_path, files = excluded.files,
         version = excluded.version, updated_at = now()
       returning *)
     select f.* from f, pg_notify($8, f.project_ref) as announced`,
    [
      d.ref,
      d.slug,
      d.name,
      d.verifyJwt,
      d.entrypoint,
      d.importMap,
      JSON.stringify(d.files),
      FUNCTIONS_CHANGED,
    ],
  );
}

/**
 * A deploy with `bundleOnly=true`: the files are kept as the function's next version but not served until a
 * bulk update (PUT) names that id and version; the answer is the function as it will be then.
 */
export async function storeBundle(pool: pg.Pool, d: Deployment): Promise<FunctionRow> {
  return oneRow(
    pool,
    `insert into platform.edge_function_bundles
       (project_ref, slug, name, verify_jwt, entrypoint_path, import_map_path, files, id, version)
     values ($1, $2, $3, $4, $5, $6, $7,
       coalesce((select id from platform.edge_functions where project_ref = $1 and slug = $2), gen_random_uuid()),
       ${NEXT_VERSION})
     returning *, 'ACTIVE' as status, false as import_map, created_at as updated_at`,
    [d.ref, d.slug, d.name, d.verifyJwt, d.entrypoint, d.importMap, JSON.stringify(d.files)],
  );
}

export interface BulkUpdate {
  id: string;
  slug: string;
  name: string;
  status: string;
  version: number;
  verify_jwt?: boolean;
  entrypoint_path?: string;
}

/**
 * One entry of a bulk update: a waiting bundle with that id and version becomes the served version of its
 * function (created when new); otherwise the existing function's metadata changes (undefined: no such function).
 */
export async function activateOrUpdate(
  client: pg.ClientBase,
  ref: string,
  f: BulkUpdate,
): Promise<FunctionRow> {
  const bundle = await client.query(
    `delete from platform.edge_function_bundles where project_ref = $1 and slug = $2 and id = $3 and version = $4
     returning *`,
    [ref, f.slug, f.id, f.version],
  );
  const b = bundle.rows[0];
  const { rows } = b
    ? await client.query(
        `insert into platform.edge_functions
           (id, project_ref, slug, name, status, version, verify_jwt, entrypoint_path, import_map_path, files)
         values ($1, $2, $3, $4, $5, $6, coalesce($7::boolean, $8::boolean), coalesce($9::text, $10::text), $11, $12)
         on conflict (project_ref, slug) do update set name = excluded.name, status = excluded.status,
           version = excluded.version, verify_jwt = excluded.verify_jwt, entrypoint_path = excluded.entrypoint_path,
           import_map_path = excluded.import_map_path, files = excluded.files, updated_at = now()
         returning *`,
        [
          b.id,
          ref,
          f.slug,
          f.name,
          f.status,
          f.version,
          f.verify_jwt ?? null,
          b.verify_jwt,
          f.entrypoint_path ?? null,
          b.entrypoint_path,
          b.import_map_path,
          JSON.stringify(b.files),
        ],
      )
    : await client.query(
        `update platform.edge_functions set name = $3, status = $4, version = $5, verify_jwt = coalesce($6, verify_jwt),
           entrypoint_path = coalesce($7, entrypoint_path), updated_at = now()
         where project_ref = $1 and slug = $2 returning *`,
        [ref, f.slug, f.name, f.status, f.version, f.verify_jwt ?? null, f.entrypoint_path ?? null],
      );
  await announceFunctionsChanged(client, ref);
  return rows[0];
}

export async function listFunctions(pool: pg.Pool, ref: string): Promise<FunctionRow[]> {
  return allRows(pool, "select * from platform.edge_functions where project_ref = $1 order by slug", [ref]);
}

export async function getFunction(pool: pg.Pool, ref: string, slug: string) {
  return firstRow<FunctionRow>(
    pool,
    "select * from platform.edge_functions where project_ref = $1 and slug = $2",
    [ref, slug],
  );
}

export async function functionExists(pool: pg.Pool, ref: string, slug: string): Promise<boolean> {
  const row = await firstRow(
    pool,
    "select from platform.edge_functions where project_ref = $1 and slug = $2",
    [ref, slug],
  );
  return row !== undefined;
}

export async function deleteFunctionRow(pool: pg.Pool, id: string): Promise<void> {
  await pool.query(
    `with f as (delete from platform.edge_functions where id = $1 returning project_ref)
     select from f, pg_notify($2, f.project_ref) as announced`,
    [id, FUNCTIONS_CHANGED],
  );
}
