import type { BucketRow, ObjectRow } from "../store";

/** Buckets and objects as the platform's storage server answers them. */

export function bucketJson(b: BucketRow) {
  return {
    id: b.id,
    name: b.name,
    owner: b.owner ?? "",
    public: b.public,
    type: b.type,
    file_size_limit: b.file_size_limit,
    allowed_mime_types: b.allowed_mime_types,
    created_at: b.created_at,
    updated_at: b.updated_at,
  };
}

export function objectJson(o: ObjectRow) {
  return {
    bucket_id: o.bucket_id,
    name: o.name,
    owner: o.owner ?? "",
    owner_id: o.owner_id ?? "",
    id: o.id,
    version: o.version,
    updated_at: o.updated_at,
    created_at: o.created_at,
    last_accessed_at: o.last_accessed_at,
    metadata: o.metadata,
    user_metadata: o.user_metadata,
  };
}

/** `GET /object/info/...`: the object's stored headers under the names the client reads. */
export function infoJson(o: ObjectRow) {
  return {
    id: o.id,
    name: o.name,
    version: o.version,
    bucket_id: o.bucket_id,
    size: o.metadata?.size ?? null,
    content_type: o.metadata?.mimetype ?? null,
    cache_control: o.metadata?.cacheControl ?? null,
    etag: o.metadata?.eTag ?? null,
    metadata: o.user_metadata ?? {},
    last_modified: o.metadata?.lastModified ?? o.updated_at,
    created_at: o.created_at,
  };
}
