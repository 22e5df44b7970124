import { bucketNotFound, invalidRequest } from "../errors";
import type { CallerInput } from "../http/route";
import { oneOf, optionalCount, type BucketParams, type Schema } from "../http/schema";
import { bucketJson } from "../http/shapes";
import { checkBucketId } from "../names";
import { subjectOf } from "../service";
import * as store from "../store";

/** `/bucket`: buckets as the caller's role sees and changes them (the project's RLS on storage.buckets). */

type ListQuery = Parameters<typeof store.listBuckets>[1];

export const listQuery: Schema<ListQuery> = (q) => ({
  limit: optionalCount(q.limit, "limit"),
  offset: optionalCount(q.offset, "offset"),
  search: typeof q.search === "string" && q.search ? q.search : undefined,
  sortColumn: oneOf(q.sortColumn, ["id", "name", "created_at", "updated_at"] as const, "name"),
  sortOrder: oneOf(q.sortOrder, ["asc", "desc"] as const, "asc"),
});

export async function listBuckets({ res, service, caller, query }: CallerInput<undefined, ListQuery>) {
  const buckets = await service.asRole(caller, (c) => store.listBuckets(c, query));
  res.json(buckets.map(bucketJson));
}

export async function getBucket({ res, service, caller, params }: CallerInput<BucketParams>) {
  const bucket = await service.asRole(caller, (c) => store.findBucket(c, params.bucketId));
  if (!bucket) throw bucketNotFound();
  res.json(bucketJson(bucket));
}

interface NewBucket {
  id: string;
  name: string;
  settings: store.BucketSettings;
}

/** `id` defaults to `name` and `name` to `id`, as the platform takes either. */
export const createBody: Schema<NewBucket> = (b) => {
  const id = checkBucketId(b.id ?? b.name);
  const name = b.name === undefined ? id : checkBucketId(b.name);
  return { id, name, settings: bucketSettingsOf(b) };
};

export async function createBucket({
  res,
  service,
  caller,
  body,
}: CallerInput<undefined, undefined, NewBucket>) {
  const bucket = { id: body.id, name: body.name, owner: subjectOf(caller.auth), ...body.settings };
  await service.asRole(caller, (c) => store.insertBucket(c, bucket), "BucketAlreadyExists");
  res.json({ name: body.id });
}

export const updateBody: Schema<store.BucketSettings> = bucketSettingsOf;

export async function updateBucket({
  res,
  service,
  caller,
  params,
  body,
}: CallerInput<BucketParams, undefined, store.BucketSettings>) {
  const updated = await service.asRole(caller, (c) => store.updateBucket(c, params.bucketId, body));
  if (!updated) throw bucketNotFound();
  res.json({ message: "Successfully updated" });
}

export async function emptyBucket({ res, service, caller, params }: CallerInput<BucketParams>) {
  await service.emptyBucket(caller, params.bucketId);
  res.json({ message: "Successfully emptied" });
}

export async function deleteBucket({ res, service, caller, params }: CallerInput<BucketParams>) {
  await service.deleteBucket(caller, params.bucketId);
  res.json({ message: "Successfully deleted" });
}

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };
const SIZE = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i;

/** A bucket's settings from the client's body: `file_size_limit` as bytes or a size such as `20MB`. */
function bucketSettingsOf(body: Record<string, unknown>): store.BucketSettings {
  const settings: store.BucketSettings = {};
  if (body.public !== undefined) {
    if (typeof body.public !== "boolean") throw invalidRequest("public must be true or false");
    settings.public = body.public;
  }
  if (body.file_size_limit !== undefined) settings.fileSizeLimit = sizeOf(body.file_size_limit);
  const types = body.allowed_mime_types;
  if (types !== undefined) {
    if (types === null) settings.allowedMimeTypes = null;
    else if (
      Array.isArray(types) &&
      types.every((t) => typeof t === "string" && /^[\w.+-]+\/[\w.+*-]+$/.test(t))
    ) {
      settings.allowedMimeTypes = types as string[];
    } else throw invalidRequest("allowed_mime_types must be a list of media types such as image/png");
  }
  return settings;
}

function sizeOf(limit: unknown): number | null {
  if (limit === null) return null;
  if (typeof limit === "number" && Number.isInteger(limit) && limit >= 0) return limit;
  const size = typeof limit === "string" ? SIZE.exec(limit) : null;
  if (!size) throw invalidRequest("file_size_limit must be a number of bytes or a size such as 20MB");
  return Math.floor(Number(size[1]) * SIZE_UNITS[(size[2] ?? "b").toLowerCase()]);
}
