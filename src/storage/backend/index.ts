import path from "node:path";
import type { StrataConfig } from "../../config";
import { DiskBackend } from "./disk";
import { S3Backend } from "./s3";
import type { ObjectBackend } from "./types";

export type { ObjectBackend } from "./types";
export { ObjectMissing } from "./types";

declare module "../../context" {
  interface AppContext {
    /** Where storage keeps object bytes (absent in CLI commands that serve nothing). */
    storage?: ObjectBackend;
  }
}

/** The configured backend: an S3-compatible bucket when STORAGE_S3_BUCKET is set, else the data directory. */
export function backendOf(config: StrataConfig): ObjectBackend {
  const s = config.storage;
  if (s.s3Bucket) {
    return new S3Backend({
      bucket: s.s3Bucket,
      endpoint: s.s3Endpoint,
      region: s.s3Region,
      accessKeyId: s.s3AccessKeyId,
      secretAccessKey: s.s3SecretAccessKey,
      forcePathStyle: s.s3ForcePathStyle,
    });
  }
  return new DiskBackend(path.join(config.dataDir, "storage"));
}
