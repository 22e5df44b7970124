import { PoolTimeout, asPoolTimeout, isDatabaseUnreachable } from "../db/transaction";
import { GateError } from "../http/gate";

/**
 * A refusal of /storage/v1 in the platform storage server's shape: `{statusCode, code, error, message}`, the
 * intended status as a string in `statusCode`. Like the platform, the HTTP status of a client error is 400
 * (the storage client reads `statusCode`), except where the platform sends its own (`httpStatus`).
 */
export class StorageError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly error: string,
    message: string,
    readonly httpStatus = status >= 500 ? status : 400,
  ) {
    super(message);
  }

  get body() {
    return { statusCode: String(this.status), code: this.code, error: this.error, message: this.message };
  }
}

export const bucketNotFound = () =>
  new StorageError(404, "NoSuchBucket", "Bucket not found", "Bucket not found");
export const objectNotFound = () => new StorageError(404, "NoSuchKey", "not_found", "Object not found");
export const alreadyExists = (code = "ResourceAlreadyExists") =>
  new StorageError(409, code, "Duplicate", "The resource already exists");
export const invalidRequest = (message: string) =>
  new StorageError(400, "InvalidRequest", "InvalidRequest", message);
export const invalidParameter = (name: string) =>
  new StorageError(400, "InvalidParameter", "InvalidParameter", `Invalid Parameter ${name}`);
export const invalidKey = (key: string) =>
  new StorageError(400, "InvalidKey", "InvalidKey", `Invalid key: ${key}`);
export const invalidBucketName = () =>
  new StorageError(400, "InvalidBucketName", "Invalid Input", "Bucket name invalid");
export const tooLarge = () =>
  new StorageError(
    413,
    "EntityTooLarge",
    "Payload too large",
    "The object exceeded the maximum allowed size",
  );
export const mimeRefused = (type: string) =>
  new StorageError(415, "InvalidMimeType", "invalid_mime_type", `mime type ${type} is not supported`);
export const rlsRefused = (message = "new row violates row-level security policy") =>
  new StorageError(403, "AccessDenied", "Unauthorized", message);
export const bucketNotEmpty = () =>
  new StorageError(
    409,
    "ResourceNotEmpty",
    "ResourceNotEmpty",
    "The bucket you tried to delete is not empty",
  );
/**
 * No space left for a write: the bytes' file system (ENOSPC, EDQUOT) or the database (SQLSTATE 53100
 * disk_full). The platform's storage server has no code for it (it answers 500 InternalError or
 * DatabaseError): 507 Insufficient Storage says what happened, and that a retry will not help until space is
 * freed. Nothing of the upload is kept.
 */
export const insufficientStorage = () =>
  new StorageError(
    507,
    "InsufficientStorage",
    "InsufficientStorage",
    "There is not enough storage space left to store the object",
  );

export function isOutOfSpace(e: unknown): boolean {
  const code = (e as { code?: unknown } | undefined)?.code;
  return code === "ENOSPC" || code === "EDQUOT" || code === "53100";
}

export const invalidRange = () =>
  new StorageError(416, "InvalidRange", "InvalidRange", "The requested range is not satisfiable", 416);
export const uploadNotFound = () => new StorageError(404, "NoSuchUpload", "not_found", "Upload not found");
export const routeNotFound = (route: string) =>
  new StorageError(404, "InvalidRequest", "Not Found", `Route ${route} not found`, 404);
export const tooManyConnections = (message: string) =>
  new StorageError(429, "SlowDown", "too_many_connections", message, 429);
export const databaseUnavailable = () =>
  new StorageError(503, "DatabaseUnavailable", "DatabaseUnavailable", "The database is out of reach", 503);
export const internalError = () =>
  new StorageError(500, "InternalError", "internal", "Internal Server Error");

export const invalidJwt = (message: string) => new StorageError(400, "InvalidJWT", "InvalidJWT", message);
export const invalidSignature = (message = "Invalid signature") =>
  new StorageError(400, "InvalidSignature", "InvalidSignature", message);

/**
 * A refusal of the data gate in storage's shape: a missing or unknown API key is the gateway's 401; a bearer
 * JWT that does not verify is storage's AccessDenied; a paused or missing project keeps its status.
 */
export function fromGate(e: GateError): StorageError {
  if (e.code === "invalid_jwt") return rlsRefused(e.message);
  return new StorageError(
    e.status,
    e.status === 401 ? "Unauthorized" : "Unavailable",
    e.code,
    e.message,
    e.status,
  );
}

/**
 * A database error from a metadata statement run as the request's role: RLS and privileges answer 403,
 * a taken id or name 409, a value the table refuses 400. Anything else is not the client's doing.
 */
export function fromDatabase(e: unknown, duplicate = "ResourceAlreadyExists"): unknown {
  const code = (e as { code?: unknown }).code;
  const message = (e as Error).message;
  if (code === "42501") return rlsRefused(/row-level security/.test(message) ? undefined : message);
  if (code === "23505") return alreadyExists(duplicate);
  if (code === "23503") {
    // Deleting a bucket that still holds objects, or writing an object into a bucket that is gone.
    return /delete on table "buckets"/.test(message) ? bucketNotEmpty() : bucketNotFound();
  }
  if (code === "22P02" || code === "23514" || code === "22001" || code === "22021")
    return invalidRequest(message);
  if (code === "57014")
    return new StorageError(544, "DatabaseTimeout", "DatabaseTimeout", "The database timed out");
  if (isOutOfSpace(e)) return insufficientStorage();
  return e;
}

/** A thrown error as the client's answer, or undefined for a server fault. */
export function refusalOf(caught: unknown): StorageError | undefined {
  const e = asPoolTimeout(caught);
  if (e instanceof StorageError) return e;
  // The client went away in the middle of its upload: nothing was stored, and nobody is left to answer.
  if ((e as Error).message === "aborted" || (e as { code?: unknown }).code === "ECONNRESET") {
    return invalidRequest("The upload was cut off before its end");
  }
  if (e instanceof GateError) return fromGate(e);
  if (e instanceof PoolTimeout) return tooManyConnections(e.message);
  // Before the check below, which takes any error with a system code (ENOSPC too) for an unreachable database.
  if (isOutOfSpace(e)) return insufficientStorage();
  if (isDatabaseUnreachable(e)) return databaseUnavailable();
  const status = (e as { status?: unknown }).status;
  // express.json: a malformed or oversized body.
  if (typeof status === "number" && status >= 400 && status < 500)
    return invalidRequest((e as Error).message);
  return undefined;
}
