import type { IncomingMessage } from "node:http";
import { PassThrough, Transform, type Readable } from "node:stream";
import busboy from "busboy";
import { invalidRequest, mimeRefused, tooLarge } from "./errors";

/** An upload's bytes (not yet read) and what the request says about them. */
export interface UploadBody {
  stream: Readable;
  contentType: string;
  cacheControl: string;
  userMetadata: Record<string, unknown> | undefined;
}

const DEFAULT_CACHE = "no-cache";

/** `3600` or `max-age=3600` as the Cache-Control value kept with the object. */
export function cacheControlOf(value: string | undefined): string {
  if (!value) return DEFAULT_CACHE;
  return /^\d+$/.test(value) ? `max-age=${value}` : value;
}

function userMetadataOf(json: string | undefined): Record<string, unknown> | undefined {
  if (!json) return undefined;
  try {
    const value: unknown = JSON.parse(json);
    if (value && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw invalidRequest("metadata must be a JSON object");
}

/**
 * Reads an upload as the storage client sends it: a multipart form (fields `cacheControl`, `metadata`, then
 * the file part) or the raw bytes with `content-type`, `cache-control` and base64 `x-metadata` headers.
 * Resolves once the bytes start, without reading them.
 */
export function readUpload(req: IncomingMessage): Promise<UploadBody> {
  const type = req.headers["content-type"] ?? "";
  if (!/^multipart\/form-data/i.test(type)) {
    const xMetadata = req.headers["x-metadata"];
    return Promise.resolve({
      stream: req,
      contentType: type || "application/octet-stream",
      cacheControl: cacheControlOf(req.headers["cache-control"]),
      userMetadata: userMetadataOf(
        typeof xMetadata === "string" ? Buffer.from(xMetadata, "base64").toString("utf8") : undefined,
      ),
    });
  }
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { files: 1, fields: 20, fieldSize: 64 * 1024 } });
    } catch (e) {
      reject(invalidRequest((e as Error).message));
      return;
    }
    const fields: Record<string, string> = {};
    let settled = false;
    parser.on("field", (name, value) => {
      fields[name] = value;
    });
    parser.on("file", (_name, file, info) => {
      settled = true;
      // The file's stream must keep flowing for busboy to finish: hand it on through a PassThrough that ends
      // with an error when the request is cut off before the form's closing boundary.
      const bytes = new PassThrough();
      file.on("error", (e) => bytes.destroy(e));
      file.pipe(bytes);
      parser.on("error", (e) => bytes.destroy(e as Error));
      req.on("aborted", () => bytes.destroy(invalidRequest("the upload was cut off")));
      try {
        resolve({
          stream: bytes,
          contentType: fields.contentType || info.mimeType || "application/octet-stream",
          cacheControl: cacheControlOf(fields.cacheControl),
          userMetadata: userMetadataOf(fields.metadata ?? fields.userMetadata),
        });
      } catch (e) {
        reject(e);
      }
    });
    parser.on("error", (e) => {
      if (!settled) reject(invalidRequest(`invalid multipart body: ${(e as Error).message}`));
    });
    parser.on("close", () => {
      if (!settled) reject(invalidRequest("No content provided"));
    });
    req.pipe(parser);
  });
}

/** Counts the bytes passing and fails the stream with 413 once they exceed `limit`. */
export function limitedTo(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > limit) done(tooLarge());
      else done(null, chunk);
    },
  });
}

/** Refuses a media type the bucket does not allow (`image/png`, or a family such as `image/*`). */
export function checkMimeType(contentType: string, allowed: string[] | null): void {
  if (!allowed?.length) return;
  const type = contentType.split(";")[0].trim().toLowerCase();
  const ok = allowed.some((a) => {
    const pattern = a.trim().toLowerCase();
    return pattern.endsWith("/*") ? type.startsWith(pattern.slice(0, -1)) : type === pattern;
  });
  if (!ok) throw mimeRefused(type);
}
