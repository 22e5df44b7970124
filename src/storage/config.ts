import type pg from "pg";
import { readSettings } from "../projects/settings";

/** The storage configuration of `/v1/projects/{ref}/config/storage`, over the platform's defaults. */
export const STORAGE_DEFAULTS = {
  fileSizeLimit: 52_428_800,
  features: {
    imageTransformation: { enabled: false },
    s3Protocol: { enabled: false },
    icebergCatalog: { enabled: false, maxNamespaces: 10, maxTables: 10, maxCatalogs: 2 },
    vectorBuckets: { enabled: false, maxBuckets: 10, maxIndexes: 10 },
  },
  capabilities: { list_v2: true, iceberg_catalog: false },
  external: { upstreamTarget: "main" },
  migrationVersion: "",
  databasePoolMode: "recycled",
};

export type StorageSettings = typeof STORAGE_DEFAULTS;

/** The read of each project's settings that requests arriving now will share, by control-plane pool. */
const nextReads = new WeakMap<pg.Pool, Map<string, Promise<StorageSettings>>>();

/**
 * Read for each request (one indexed row), so a PATCH of the config applies to the next upload. Requests that
 * arrive together share one read, sent once the requests of this turn of the event loop have asked: every
 * request's read is sent after it arrived, so it sees whatever was committed before.
 */
export function storageSettingsOf(platformPool: pg.Pool, ref: string): Promise<StorageSettings> {
  let reads = nextReads.get(platformPool);
  if (!reads) nextReads.set(platformPool, (reads = new Map()));
  let read = reads.get(ref);
  if (!read) {
    const pending = reads;
    read = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      // Requests from now on wait for a read of their own.
      pending.delete(ref);
      return readSettings({ platformPool }, ref, "storage", STORAGE_DEFAULTS);
    });
    reads.set(ref, read);
  }
  return read;
}
