import { Upload } from "tus-js-client";
import type { ProjectApi } from "./projectApi";

/**
 * Large files go through the project's resumable upload endpoint (`/storage/v1/upload/resumable`, TUS), as the
 * platform's Studio sends them: in chunks, each one acknowledged, so a pause, a dropped connection or a closed
 * tab loses at most the chunk under way, and the same file picked again for the same place resumes where the
 * server's copy ends.
 */

/** When a file goes resumably, and the size of its chunks: the platform's 6 MB for both. */
export interface UploadTuning {
  resumableAboveBytes: number;
  chunkBytes: number;
}

const MB = 1024 * 1024;
const DEFAULT_TUNING: UploadTuning = { resumableAboveBytes: 6 * MB, chunkBytes: 6 * MB };
/** Where a browser may set other values (developer tools): `{"resumableAboveBytes": …, "chunkBytes": …}`. */
const TUNING_KEY = "strata.studio.uploads";

export function uploadTuning(): UploadTuning {
  let set: Partial<Record<keyof UploadTuning, unknown>> = {};
  try {
    set = JSON.parse(localStorage.getItem(TUNING_KEY) ?? "{}") as typeof set;
  } catch {
    // not JSON: the defaults
  }
  const positive = (v: unknown, fallback: number) =>
    typeof v === "number" && Number.isInteger(v) && v > 0 ? v : fallback;
  return {
    resumableAboveBytes: positive(set.resumableAboveBytes, DEFAULT_TUNING.resumableAboveBytes),
    chunkBytes: positive(set.chunkBytes, DEFAULT_TUNING.chunkBytes),
  };
}

export interface ResumableUpload {
  /** Settles when the last byte is stored (the object then exists), or with the API's refusal. */
  done: Promise<void>;
  /** Stops after the chunk under way; `resume` carries on from the server's offset. */
  pause(): void;
  resume(): void;
}

/** Uploads `file` to `bucket/path` resumably, reporting bytes sent and whether an earlier upload was resumed. */
export function uploadResumably(
  api: ProjectApi,
  target: { bucket: string; path: string },
  file: File,
  events: { onProgress: (sent: number, total: number) => void; onResumed: () => void },
): ResumableUpload {
  const { chunkBytes } = uploadTuning();
  let upload: Upload | undefined;
  const done = new Promise<void>((resolve, reject) => {
    upload = new Upload(file, {
      endpoint: `${api.url}/storage/v1/upload/resumable`,
      chunkSize: chunkBytes,
      retryDelays: [0, 1000, 3000, 5000],
      headers: {
        apikey: api.key,
        ...(api.key.startsWith("ey") ? { authorization: `Bearer ${api.key}` } : {}),
        "x-upsert": "true",
      },
      metadata: {
        bucketName: target.bucket,
        objectName: target.path,
        contentType: file.type || "application/octet-stream",
        cacheControl: "3600",
      },
      // An earlier upload is the same file (name, size, type, time) to the same place of the same project.
      fingerprint: (f: File) =>
        Promise.resolve(
          ["strata-studio", api.url, target.bucket, target.path, f.name, f.size, f.type, f.lastModified].join(
            "\n",
          ),
        ),
      removeFingerprintOnSuccess: true,
      onProgress: events.onProgress,
      onSuccess: () => resolve(),
      onError: reject,
    });
    const started = upload;
    started
      .findPreviousUploads()
      .then((previous) => {
        if (previous[0]) {
          started.resumeFromPreviousUpload(previous[0]);
          events.onResumed();
        }
        started.start();
      })
      .catch(reject);
  });
  return {
    done,
    pause: () => void upload?.abort(),
    resume: () => upload?.start(),
  };
}
