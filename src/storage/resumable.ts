import { readdir, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import type { S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import type { DataStore, KvStore } from "@tus/utils" with { "resolution-mode": "import" };
import type { MetadataValue } from "@tus/s3-store" with { "resolution-mode": "import" };
import type { StrataConfig } from "../config";
import { s3SettingsOf } from "./backend";
import { s3ClientConfigOf, type S3Settings } from "./backend/s3";

/**
 * Where resumable uploads (`handlers/resumable.ts`) keep their parts until the last byte arrives.
 *
 * - With an S3 bucket (`STORAGE_S3_*`), in that bucket (`@tus/s3-store`): the upload's info object
 *   `<id>.info`, its parts as a multipart upload of the key `<id>` (a chunk smaller than a part waits in
 *   `<id>.part`), so any node of the installation takes the next chunk of an upload another node began.
 *   Keys have no `/`, so they never meet an object's `<ref>/<version>`.
 * - Otherwise in the data directory: a file per upload, named by the upload's id, and its info file beside it;
 *   an upload resumes on the node that began it.
 */

/** An upload not finished a day after it began is given up (its parts removed, its URL answered 404). */
export const EXPIRY_MS = 24 * 60 * 60 * 1000;
/** An upload's id, `<project ref>.<uuid>`: its parts are the file (or key) of that name, its info beside. */
const UPLOAD_ID = /^([a-z]{20}\.[0-9a-f-]{36})(\.json|\.info|\.part)?$/;
/** Upload infos a node keeps in memory (S3): one read of the info object per upload and node. */
const CACHED_INFOS = 1000;

export const partsDirOf = (dataDir: string) => path.join(dataDir, "storage-resumable");

/** The TUS store of the server's resumable uploads, with what the handler needs beyond the protocol. */
export interface ResumableParts {
  store: DataStore;
  /** The finished upload's bytes. */
  read(id: string): Promise<Readable>;
  /** Removes everything the upload left (after it finished, or was refused). */
  remove(id: string): Promise<void>;
}

export async function resumablePartsOf(config: StrataConfig): Promise<ResumableParts> {
  const s3 = s3SettingsOf(config);
  if (s3) return s3Parts(s3);
  const { FileStore } = await import("@tus/file-store");
  const store = new FileStore({
    directory: partsDirOf(config.dataDir),
    // Parts of an upload left unfinished for a day are removed by the storage sweep (removeExpiredUploads).
    expirationPeriodInMilliseconds: EXPIRY_MS,
  });
  return { store, read: async (id) => store.read(id), remove: (id) => store.remove(id) };
}

async function s3Parts(settings: S3Settings): Promise<ResumableParts> {
  const { bucket } = settings;
  const config = s3ClientConfigOf(settings);
  const { S3Store } = await import("@tus/s3-store");
  const cache = new BoundedCache<MetadataValue>(CACHED_INFOS);
  const store = new S3Store({
    // A chunk is sent as it streams in: with the SDK's default checksum it would travel aws-chunked with a
    // trailer, which S3-compatible servers that do not read such trailers store as part of the bytes.
    s3ClientConfig: { ...config, requestChecksumCalculation: "WHEN_REQUIRED", bucket },
    // Expiry is the storage sweep's (removeExpiredUploads); tags, which many S3-compatible servers lack, unused.
    useTags: false,
    cache,
  });
  const client = await s3Client(config);
  return {
    store,
    read: (id) => store.read(id),
    // A finished upload's multipart upload is complete (S3Store's remove would stop at aborting it): its
    // keys are deleted here.
    async remove(id) {
      await store.remove(id).catch(() => {});
      await deleteKeys(client, bucket, [id, `${id}.info`, `${id}.part`]);
      await cache.delete(id);
    },
  };
}

/** Most recently stored first out last: the info of an upload in progress stays while it is written. */
class BoundedCache<T> implements KvStore<T> {
  private readonly entries = new Map<string, T>();

  constructor(private readonly max: number) {}

  async get(key: string) {
    return this.entries.get(key);
  }

  async set(key: string, value: T) {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!);
  }

  async delete(key: string) {
    this.entries.delete(key);
  }
}

async function s3Client(config: S3ClientConfig): Promise<S3Client> {
  const { S3Client } = await import("@aws-sdk/client-s3");
  return new S3Client(config);
}

async function deleteKeys(client: S3Client, bucket: string, keys: string[]): Promise<void> {
  const { DeleteObjectsCommand } = await import("@aws-sdk/client-s3");
  await client.send(
    new DeleteObjectsCommand({
      Bucket: bucket,
      Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true },
    }),
  );
}

/**
 * Removes the uploads begun over a day before `now` (their expiry): abandoned ones, and any a crash left
 * behind, with or without their info. Returns how many.
 */
export async function removeExpiredUploads(config: StrataConfig, now = Date.now()): Promise<number> {
  const s3 = s3SettingsOf(config);
  return s3 ? removeExpiredS3Uploads(s3, now) : removeExpiredFileUploads(config.dataDir, now);
}

async function removeExpiredFileUploads(dataDir: string, now: number): Promise<number> {
  const dir = partsDirOf(dataDir);
  const ids = new Set<string>();
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const id = UPLOAD_ID.exec(name)?.[1];
    if (id) ids.add(id);
  }
  let removed = 0;
  for (const id of ids) {
    const files = [path.join(dir, id), path.join(dir, `${id}.json`)];
    const info = await readFile(files[1], "utf8")
      .then((text) => JSON.parse(text) as { creation_date?: string })
      .catch(() => undefined);
    // Without its info file (written right after the parts' file), the parts' file tells when it began.
    const began = info?.creation_date
      ? Date.parse(info.creation_date)
      : (await stat(files[0]).catch(() => undefined))?.mtimeMs;
    if (began === undefined || !(now - began > EXPIRY_MS)) continue;
    await Promise.all(files.map((f) => rm(f, { force: true })));
    removed++;
  }
  return removed;
}

/**
 * The bucket's uploads older than the expiry: their multipart uploads aborted (a store that cannot list
 * them has none to abort) and their keys at the bucket's top level (info, waiting chunk, a finished
 * upload's object a crash left) deleted. An upload's info is written when it begins and never again.
 */
async function removeExpiredS3Uploads(settings: S3Settings, now: number): Promise<number> {
  const { bucket } = settings;
  const { ListMultipartUploadsCommand, AbortMultipartUploadCommand, ListObjectsV2Command } =
    await import("@aws-sdk/client-s3");
  const client = await s3Client(s3ClientConfigOf(settings));
  const expired = (date: Date | undefined) => date !== undefined && now - date.getTime() > EXPIRY_MS;
  const ids = new Set<string>();
  try {
    let marker: { KeyMarker?: string; UploadIdMarker?: string } = {};
    for (;;) {
      const page = await client
        .send(new ListMultipartUploadsCommand({ Bucket: bucket, ...marker }))
        .catch((e: unknown) => {
          if ((e as { name?: string }).name === "NotImplemented") return undefined;
          throw e;
        });
      for (const { Key, UploadId, Initiated } of page?.Uploads ?? []) {
        const id = Key && UPLOAD_ID.exec(Key)?.[1];
        if (!id || !UploadId || !expired(Initiated)) continue;
        await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key, UploadId }));
        ids.add(id);
      }
      if (!page?.IsTruncated) break;
      marker = { KeyMarker: page.NextKeyMarker, UploadIdMarker: page.NextUploadIdMarker };
    }
    let token: string | undefined;
    do {
      // The top level only: objects live under `<ref>/`.
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: bucket, Delimiter: "/", ContinuationToken: token }),
      );
      const keys = (page.Contents ?? []).filter(({ Key, LastModified }) => {
        const id = Key && UPLOAD_ID.exec(Key)?.[1];
        return id && expired(LastModified) && ids.add(id);
      });
      if (keys.length)
        await deleteKeys(
          client,
          bucket,
          keys.map(({ Key }) => Key!),
        );
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return ids.size;
  } finally {
    client.destroy();
  }
}
