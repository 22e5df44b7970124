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

/** Read per request (one indexed row), so a PATCH of the config applies to the next upload. */
export async function storageSettingsOf(platformPool: pg.Pool, ref: string): Promise<StorageSettings> {
  return readSettings({ platformPool }, ref, "storage", STORAGE_DEFAULTS);
}
