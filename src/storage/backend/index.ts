import path from "node:path";
import type { StrataConfig } from "../../config";
import { DiskBackend } from "./disk";
import { S3Backend, type S3Settings } from "./s3";
import type { ObjectBackend } from "./types";

export type { ObjectBackend } from "./types";
export { ObjectMissing } from "./types";

declare module "../../context" {
  interface AppContext {
    /** Where storage keeps object bytes (absent in CLI commands that serve nothing). */
    storage?: ObjectBackend;
  }
}

/** The S3-compatible bucket storage uses when STORAGE_S3_BUCKET is set. */
export function s3SettingsOf(config: StrataConfig): S3Settings | undefined {
  const s = config.storage;
  if (!s.s3Bucket) return undefined;
  return {
    bucket: s.s3Bucket,
    endpoint: s.s3Endpoint,
    region: s.s3Region,
    accessKeyId: s.s3AccessKeyId,
    secretAccessKey: s.s3SecretAccessKey,
    forcePathStyle: s.s3ForcePathStyle,
  };
}

/** The configured backend: an S3-compatible bucket when STORAGE_S3_BUCKET is set, else the data directory. */
export function backendOf(config: StrataConfig): ObjectBackend {
  const s3 = s3SettingsOf(config);
  return s3 ? new S3Backend(s3) : new DiskBackend(path.join(config.dataDir, "storage"));
}
