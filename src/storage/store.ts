import { randomUUID } from "node:crypto";
import type pg from "pg";

/**
 * The SQL of storage metadata. Every function takes the client of a transaction its caller opened, as the
 * request's role (RLS decides) or as the project's owner where the platform acts without RLS (public
 * buckets, signed URLs). Nothing here knows HTTP.
 */

/**
 * What a single statement needs of its connection: a transaction's client, or one round trip on its own
 * (StorageService.oneAsRole / oneAsOwner).
 */
export interface Sql {
  query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>>;
}

const BUCKET_COLUMNS = `id, name, owner::text, owner_id, public, type, file_size_limit::float8 as file_size_limit,
  allowed_mime_types, created_at, updated_at`;

export interface BucketRow {
  id: string;
  name: string;
  owner: string | null;
  owner_id: string | null;
  public: boolean;
  type: string;
  file_size_limit: number | null;
  allowed_mime_types: string[] | null;
  created_at: Date;
  updated_at: Date;
}

export interface ObjectRow {
  id: string;
  bucket_id: string;
  name: string;
  owner: string | null;
  owner_id: string | null;
  version: string | null;
  metadata: ObjectMetadata | null;
  user_metadata: Record<string, unknown> | null;
  created_at: Date;
  updated_at: Date;
  last_accessed_at: Date;
}

/** What the platform keeps in `storage.objects.metadata`. */
export interface ObjectMetadata {
  eTag: string;
  size: number;
  mimetype: string;
  cacheControl: string;
  lastModified: string;
  contentLength: number;
  httpStatusCode: number;
}

const OBJECT_COLUMNS = `id, bucket_id, name, owner::text, owner_id, version, metadata, user_metadata, created_at,
  updated_at, last_accessed_at`;

export type BucketSort = "id" | "name" | "created_at" | "updated_at";

export async function listBuckets(
  c: pg.ClientBase,
  options: {
    limit?: number;
    offset?: number;
    search?: string;
    sortColumn: BucketSort;
    sortOrder: "asc" | "desc";
  },
): Promise<BucketRow[]> {
  const { rows } = await c.query<BucketRow>(
    `select ${BUCKET_COLUMNS} from storage.buckets
      where $1::text is null or name ilike '%' || replace(replace(replace($1, '\\', '\\\\'), '%', '\\%'), '_', '\\_') || '%'
      order by ${options.sortColumn} ${options.sortOrder} limit $2 offset $3`,
    [options.search ?? null, options.limit ?? null, options.offset ?? 0],
  );
  return rows;
}

export async function findBucket(c: Sql, id: string): Promise<BucketRow | undefined> {
  const { rows } = await c.query<BucketRow>(`select ${BUCKET_COLUMNS} from storage.buckets where id = $1`, [
    id,
  ]);
  return rows[0];
}

export interface BucketSettings {
  public?: boolean;
  fileSizeLimit?: number | null;
  allowedMimeTypes?: string[] | null;
}

export async function insertBucket(
  c: pg.ClientBase,
  bucket: { id: string; name: string; owner: string | undefined } & BucketSettings,
): Promise<void> {
  await c.query(
    `insert into storage.buckets (id, name, owner, owner_id, public, file_size_limit, allowed_mime_types)
     values ($1, $2, $3::uuid, $4, $5, $6, $7)`,
    [
      bucket.id,
      bucket.name,
      uuidOrNull(bucket.owner),
      bucket.owner ?? null,
      bucket.public ?? false,
      bucket.fileSizeLimit ?? null,
      bucket.allowedMimeTypes ?? null,
    ],
  );
}

/** Updates the settings given (undefined: unchanged); false when no visible bucket has the id. */
export async function updateBucket(c: pg.ClientBase, id: string, settings: BucketSettings): Promise<boolean> {
  const { rowCount } = await c.query(
    `update storage.buckets set
        public = case when $2 then $3 else public end,
        file_size_limit = case when $4 then $5::bigint else file_size_limit end,
        allowed_mime_types = case when $6 then $7::text[] else allowed_mime_types end,
        updated_at = now()
      where id = $1`,
    [
      id,
      settings.public !== undefined,
      settings.public ?? null,
      settings.fileSizeLimit !== undefined,
      settings.fileSizeLimit ?? null,
      settings.allowedMimeTypes !== undefined,
      settings.allowedMimeTypes ?? null,
    ],
  );
  return rowCount === 1;
}

/** Deletes a bucket; a bucket that still holds objects fails on the objects' foreign key (23503). */
export async function deleteBucket(c: pg.ClientBase, id: string): Promise<boolean> {
  const { rowCount } = await c.query("delete from storage.buckets where id = $1", [id]);
  return rowCount === 1;
}

export async function findObject(c: Sql, bucketId: string, name: string): Promise<ObjectRow | undefined> {
  const { rows } = await c.query<ObjectRow>(
    `select ${OBJECT_COLUMNS} from storage.objects where bucket_id = $1 and name = $2`,
    [bucketId, name],
  );
  return rows[0];
}

/** A bucket and the version of the object at `name` in it (an upload replaces it), in one statement. */
export async function findUploadTarget(
  c: Sql,
  bucketId: string,
  name: string,
): Promise<{ bucket: BucketRow; previousVersion: string | null } | undefined> {
  const { rows } = await c.query<BucketRow & { previous_version: string | null }>(
    `select ${BUCKET_COLUMNS},
            (select version from storage.objects where bucket_id = $1 and name = $2) as previous_version
       from storage.buckets where id = $1`,
    [bucketId, name],
  );
  if (!rows[0]) return undefined;
  const { previous_version: previousVersion, ...bucket } = rows[0];
  return { bucket, previousVersion };
}

export interface NewObject {
  bucketId: string;
  name: string;
  owner: string | undefined;
  version: string;
  metadata: ObjectMetadata;
  userMetadata: Record<string, unknown> | undefined;
}

/**
 * Inserts the object's row; with `upsert`, replaces the row of a taken name (insert and update policies both
 * apply, and select for the row it answers, as on the platform). A taken name without `upsert` fails with
 * 23505. A plain insert returns nothing from the database, so an insert policy alone lets a role upload.
 */
/** $1-$7 of the object statements: bucket, name, owner (uuid or null), owner_id, version, metadata, user metadata. */
function objectValues(object: NewObject): unknown[] {
  return [
    object.bucketId,
    object.name,
    uuidOrNull(object.owner),
    object.owner ?? null,
    object.version,
    object.metadata,
    object.userMetadata ?? null,
  ];
}

export async function writeObject(c: Sql, object: NewObject, upsert: boolean): Promise<ObjectRow> {
  const values = objectValues(object);
  if (upsert) {
    const { rows } = await c.query<ObjectRow>(
      `insert into storage.objects (bucket_id, name, owner, owner_id, version, metadata, user_metadata)
       values ($1, $2, $3::uuid, $4, $5, $6, $7)
       on conflict (bucket_id, name) do update set owner = excluded.owner, owner_id = excluded.owner_id,
         version = excluded.version, metadata = excluded.metadata, user_metadata = excluded.user_metadata,
         updated_at = now(), last_accessed_at = now()
       returning ${OBJECT_COLUMNS}`,
      values,
    );
    return rows[0];
  }
  const id = randomUUID();
  await c.query(
    `insert into storage.objects (id, bucket_id, name, owner, owner_id, version, metadata, user_metadata)
     values ($8, $1, $2, $3::uuid, $4, $5, $6, $7)`,
    [...values, id],
  );
  const now = new Date();
  return {
    id,
    bucket_id: object.bucketId,
    name: object.name,
    owner: values[2] as string | null,
    owner_id: object.owner ?? null,
    version: object.version,
    metadata: object.metadata,
    user_metadata: object.userMetadata ?? null,
    created_at: now,
    updated_at: now,
    last_accessed_at: now,
  };
}

/** Replaces the bytes of an existing object (PUT /object): only an update, never an insert. */
export async function replaceObject(c: Sql, object: NewObject): Promise<ObjectRow | undefined> {
  const { rows } = await c.query<ObjectRow>(
    `update storage.objects set owner = $3::uuid, owner_id = $4, version = $5, metadata = $6, user_metadata = $7,
        updated_at = now(), last_accessed_at = now()
      where bucket_id = $1 and name = $2 returning ${OBJECT_COLUMNS}`,
    objectValues(object),
  );
  return rows[0];
}

/** Deletes the named objects the role may delete; answers the rows deleted (their versions hold bytes). */
export async function deleteObjects(
  c: pg.ClientBase,
  bucketId: string,
  names: string[],
): Promise<ObjectRow[]> {
  const { rows } = await c.query<ObjectRow>(
    `delete from storage.objects where bucket_id = $1 and name = any($2::text[]) returning ${OBJECT_COLUMNS}`,
    [bucketId, names],
  );
  return rows;
}

/** Deletes up to `limit` objects of a bucket (emptying it in batches). */
export async function deleteSomeObjects(
  c: pg.ClientBase,
  bucketId: string,
  limit: number,
): Promise<ObjectRow[]> {
  const { rows } = await c.query<ObjectRow>(
    `delete from storage.objects where id in (select id from storage.objects where bucket_id = $1 limit $2)
     returning ${OBJECT_COLUMNS}`,
    [bucketId, limit],
  );
  return rows;
}

/** Renames an object, within its bucket or into another: metadata only, the bytes stay where they are. */
export async function renameObject(
  c: pg.ClientBase,
  from: { bucketId: string; name: string },
  to: { bucketId: string; name: string },
): Promise<ObjectRow | undefined> {
  const { rows } = await c.query<ObjectRow>(
    `update storage.objects set bucket_id = $3, name = $4, updated_at = now()
      where bucket_id = $1 and name = $2 returning ${OBJECT_COLUMNS}`,
    [from.bucketId, from.name, to.bucketId, to.name],
  );
  return rows[0];
}

export type ObjectSort = "name" | "created_at" | "updated_at" | "last_accessed_at";

export interface ListEntry {
  name: string;
  id: string | null;
  updated_at: Date | null;
  created_at: Date | null;
  last_accessed_at: Date | null;
  metadata: ObjectMetadata | null;
}

/** `like` pattern text for a literal. */
const likeLiteral = (s: string) => s.replace(/[\\%_]/g, (m) => `\\${m}`);

/**
 * One level of a bucket under `prefix` (empty, or a folder ending in `/`): the files directly in it and one
 * entry (id null) per sub-folder, sorted together, as the platform's `storage.search` answers.
 */
export async function listFolder(
  c: pg.ClientBase,
  bucketId: string,
  options: {
    prefix: string;
    search: string;
    limit: number;
    offset: number;
    sortColumn: ObjectSort;
    sortOrder: "asc" | "desc";
  },
): Promise<ListEntry[]> {
  // By name, folders and files interleave; by a date, folders (which have none) come first, as on the platform.
  const order =
    options.sortColumn === "name"
      ? `lower(name) collate "C" ${options.sortOrder}, name collate "C" ${options.sortOrder}`
      : `id is not null, ${options.sortColumn} ${options.sortOrder}, name collate "C"`;
  const { rows } = await c.query<ListEntry>(
    `with level as (
       select split_part(substr(o.name, $3), '/', 1) as entry, strpos(substr(o.name, $3), '/') > 0 as folder, o.*
         from storage.objects o
        where o.bucket_id = $1 and o.name like $2 escape '\\'
     ), entries as (
       select distinct entry as name, null::uuid as id, null::timestamptz as updated_at, null::timestamptz as created_at,
              null::timestamptz as last_accessed_at, null::jsonb as metadata
         from level where folder
       union all
       select entry, id, updated_at, created_at, last_accessed_at, metadata from level where not folder
     )
     select * from entries where lower(name) like lower($4) escape '\\'
      order by ${order} limit $5 offset $6`,
    [
      bucketId,
      `${likeLiteral(options.prefix)}%`,
      options.prefix.length + 1,
      `${likeLiteral(options.search)}%`,
      options.limit,
      options.offset,
    ],
  );
  return rows;
}

function uuidOrNull(value: string | undefined): string | null {
  return value && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)
    ? value
    : null;
}

export interface KeyListing {
  /** Objects and (with a delimiter) folders, by full key; a folder's key ends with `/`. */
  entries: (ListEntry & { key: string; folder: boolean })[];
}

/**
 * A page of keys under `prefix` (list-v2): every object below it, or with `delimiter` one entry per
 * sub-folder. Ordered by key (`C` collation) after `after`, or by a date column with `offset`.
 */
export async function listKeys(
  c: pg.ClientBase,
  bucketId: string,
  options: {
    prefix: string;
    delimiter: boolean;
    limit: number;
    sortColumn: "name" | "created_at" | "updated_at";
    sortOrder: "asc" | "desc";
    after?: string;
    offset: number;
  },
): Promise<KeyListing> {
  const byName = options.sortColumn === "name";
  const cmp = options.sortOrder === "asc" ? ">" : "<";
  const order = byName
    ? `key collate "C" ${options.sortOrder}`
    : `folder desc, ${options.sortColumn} ${options.sortOrder} nulls first, key collate "C"`;
  const { rows } = await c.query<ListEntry & { key: string; folder: boolean }>(
    `with level as (
       select o.*, $3::boolean and strpos(substr(o.name, $4), '/') > 0 as folder,
              case when $3::boolean and strpos(substr(o.name, $4), '/') > 0
                then left(o.name, $4 + strpos(substr(o.name, $4), '/') - 1) else o.name end as key
         from storage.objects o
        where o.bucket_id = $1 and o.name like $2 escape '\\'
     ), entries as (
       select distinct key, true as folder, null::uuid as id, null::timestamptz as updated_at,
              null::timestamptz as created_at, null::timestamptz as last_accessed_at, null::jsonb as metadata
         from level where folder
       union all
       select key, false, id, updated_at, created_at, last_accessed_at, metadata from level where not folder
     )
     select key, key as name, folder, id, updated_at, created_at, last_accessed_at, metadata from entries
      where $5::text is null or key collate "C" ${cmp} $5::text collate "C"
      order by ${order} limit $6 offset $7`,
    [
      bucketId,
      `${likeLiteral(options.prefix)}%`,
      options.delimiter,
      options.prefix.length + 1,
      byName ? (options.after ?? null) : null,
      options.limit,
      byName ? 0 : options.offset,
    ],
  );
  return { entries: rows };
}

/** Which of `versions` no object row holds (bytes the sweep may remove). */
export async function versionsWithoutRow(c: pg.ClientBase, versions: string[]): Promise<string[]> {
  const { rows } = await c.query<{ version: string }>(
    `select v.version from unnest($1::text[]) as v (version)
      where not exists (select from storage.objects o where o.version = v.version)`,
    [versions],
  );
  return rows.map((r) => r.version);
}
