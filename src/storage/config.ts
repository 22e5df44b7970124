import type pg from "pg";

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
  const { rows } = await platformPool.query(
    "select value from platform.project_settings where project_ref = $1 and kind = 'storage'",
    [ref],
  );
  return { ...STORAGE_DEFAULTS, ...(rows[0]?.value ?? {}) };
}
