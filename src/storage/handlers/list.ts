import { invalidRequest } from "../errors";
import type { CallerInput } from "../http/route";
import { oneOf, optionalCount, type BucketParams, type Fields, type Schema } from "../http/schema";
import { checkObjectName, checkPrefix } from "../names";
import * as store from "../store";

/** Listings as the caller's role sees the objects: one folder level (`list`), or pages of keys (`list-v2`). */

type FolderQuery = Parameters<typeof store.listFolder>[2];

const sortByOf = (b: Fields) => (b.sortBy ?? {}) as Fields;

export const listBody: Schema<FolderQuery> = (b) => ({
  prefix: checkPrefix(b.prefix),
  search: typeof b.search === "string" ? b.search : "",
  limit: Math.min(optionalCount(b.limit, "limit") ?? 100, 1500),
  offset: optionalCount(b.offset, "offset") ?? 0,
  sortColumn: oneOf(
    sortByOf(b).column,
    ["name", "created_at", "updated_at", "last_accessed_at"] as const,
    "name",
  ),
  sortOrder: oneOf(sortByOf(b).order, ["asc", "desc"] as const, "asc"),
});

export async function listObjects({
  res,
  service,
  caller,
  params,
  body,
}: CallerInput<BucketParams, undefined, FolderQuery>) {
  res.json(await service.asRole(caller, (c) => store.listFolder(c, params.bucketId, body)));
}

interface KeysQuery {
  prefix: string;
  delimiter: boolean;
  /** The page's size; one more is read to know whether another page follows. */
  limit: number;
  sortColumn: "name" | "created_at" | "updated_at";
  sortOrder: "asc" | "desc";
  cursor: Cursor;
}

export const listV2Body: Schema<KeysQuery> = (b) => {
  const sortColumn = oneOf(sortByOf(b).column, ["name", "created_at", "updated_at"] as const, "name");
  const sortOrder = oneOf(sortByOf(b).order, ["asc", "desc"] as const, "asc");
  const limit = Math.min(Math.max(optionalCount(b.limit, "limit") ?? 1000, 1), 1000);
  const cursor = cursorOf(b.cursor);
  if (b.with_delimiter !== undefined && typeof b.with_delimiter !== "boolean") {
    throw invalidRequest("with_delimiter must be true or false");
  }
  const prefix = typeof b.prefix === "string" ? b.prefix : "";
  if (prefix) checkObjectName(prefix.replace(/\/+$/, "") || "x");
  return { prefix, delimiter: b.with_delimiter === true, limit, sortColumn, sortOrder, cursor };
};

export async function listObjectsV2({
  res,
  service,
  caller,
  params,
  body,
}: CallerInput<BucketParams, undefined, KeysQuery>) {
  const { limit, cursor, ...keys } = body;
  const { entries } = await service.asRole(caller, (c) =>
    store.listKeys(c, params.bucketId, {
      ...keys,
      limit: limit + 1,
      after: cursor.after,
      offset: cursor.offset ?? 0,
    }),
  );
  const page = entries.slice(0, limit);
  const last = page[page.length - 1];
  const next: Cursor | undefined =
    entries.length <= limit
      ? undefined
      : keys.sortColumn === "name"
        ? { after: last.key }
        : { offset: (cursor.offset ?? 0) + limit };
  res.json({
    hasNext: !!next,
    ...(next
      ? { nextCursor: Buffer.from(JSON.stringify(next)).toString("base64url"), nextCursorKey: last.key }
      : {}),
    folders: page.filter((e) => e.folder).map((e) => ({ name: e.key, key: e.key })),
    objects: page
      .filter((e) => !e.folder)
      .map((e) => ({
        name: e.key,
        key: e.key,
        id: e.id,
        updated_at: e.updated_at,
        created_at: e.created_at,
        last_accessed_at: e.last_accessed_at,
        metadata: e.metadata,
      })),
  });
}

/** Where a list-v2 page starts: after the last key (by name) or at an offset (by date). */
interface Cursor {
  after?: string;
  offset?: number;
}

/** A list-v2 cursor as this server issued it. */
function cursorOf(value: unknown): Cursor {
  if (value === undefined || value === null || value === "") return {};
  try {
    const parsed: unknown = JSON.parse(Buffer.from(String(value), "base64url").toString("utf8"));
    const { after, offset } = parsed as { after?: unknown; offset?: unknown };
    if (typeof after === "string") return { after };
    if (typeof offset === "number" && Number.isInteger(offset) && offset >= 0) return { offset };
  } catch {
    // answered below
  }
  throw invalidRequest("cursor is not one this server issued");
}
