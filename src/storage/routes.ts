import express, { Router, type NextFunction, type Request, type Response } from "express";
import type { AppContext } from "../context";
import { PoolTimeout, asPoolTimeout, isDatabaseUnreachable } from "../db/transaction";
import { GateError, openDataRequest, openProject } from "../http/gate";
import { requestSettingsOf } from "../http/requestSettings";
import { roleSettingsOf } from "../catalog/roleSettings";
import type { ProjectRuntime } from "../projects/runtime";
import { backendOf } from "./backend";
import type { ByteRange } from "./backend/types";
import {
  bucketNotFound,
  fromGate,
  insufficientStorage,
  invalidParameter,
  isOutOfSpace,
  invalidRequest,
  objectNotFound,
  StorageError,
} from "./errors";
import { checkBucketId, checkObjectName, checkPrefix, nameOfSegments } from "./names";
import { signGrant, verifyGrant, type DownloadGrant, type UploadGrant } from "./signing";
import { StorageService, subjectOf, type Caller } from "./service";
import * as store from "./store";
import { readUpload } from "./upload";
import { resumableUploads } from "./resumable";
import { storageSettingsOf } from "./config";
import {
  hasTransformations,
  notAnImage,
  transform,
  transformationsOf,
  transformationsOff,
  type Transformations,
} from "./images";

/**
 * /storage/v1 as the platform's storage server answers `@supabase/storage-js`: buckets, objects, signed
 * URLs and public URLs. Keyed routes pass the data gate (API key, then the bearer JWT) and act as its role;
 * signed and public URLs need no key. Errors are `{statusCode, error, message}` with the real HTTP status.
 */
export function storageRouter(ctx: AppContext): Router {
  const service = new StorageService(ctx, (ctx.storage ??= backendOf(ctx.config)));
  const router = Router({ strict: false, caseSensitive: true });
  const json = express.json({ limit: "5mb" });

  /** The caller of a keyed route: project, role and claims, and the settings RLS may read. */
  async function callerOf(req: Request): Promise<Caller> {
    const { project, auth } = await openDataRequest(ctx, req);
    const settings = { ...(await roleSettingsOf(project, auth.role)), ...requestSettingsOf(req) };
    return { project, auth, settings };
  }
  const bucketOf = (req: Request) => checkBucketId(req.params.bucket);
  const nameOf = (req: Request) => nameOfSegments(req.params.name);

  const resumable = resumableUploads(ctx, service);
  router.all(["/upload/resumable", "/upload/resumable/*id"], resumable);

  // ------------------------------------------------------------------------------------------ buckets

  router.get("/bucket", async (req, res) => {
    const caller = await callerOf(req);
    const q = req.query as Record<string, string | undefined>;
    const sortColumn = oneOf(q.sortColumn, ["id", "name", "created_at", "updated_at"] as const, "name");
    const sortOrder = oneOf(q.sortOrder, ["asc", "desc"] as const, "asc");
    const buckets = await service.asRole(caller, (c) =>
      store.listBuckets(c, {
        limit: optionalCount(q.limit, "limit"),
        offset: optionalCount(q.offset, "offset"),
        search: q.search || undefined,
        sortColumn,
        sortOrder,
      }),
    );
    res.json(buckets.map(bucketJson));
  });

  router.get("/bucket/:bucket", async (req, res) => {
    const caller = await callerOf(req);
    const id = bucketOf(req);
    const bucket = await service.asRole(caller, (c) => store.findBucket(c, id));
    if (!bucket) throw bucketNotFound();
    res.json(bucketJson(bucket));
  });

  router.post("/bucket", json, async (req, res) => {
    const caller = await callerOf(req);
    const body = objectBody(req);
    const id = checkBucketId(body.id ?? body.name);
    const name = body.name === undefined ? id : checkBucketId(body.name);
    await service.asRole(
      caller,
      (c) => store.insertBucket(c, { id, name, owner: subjectOf(caller.auth), ...bucketSettingsOf(body) }),
      "BucketAlreadyExists",
    );
    res.json({ name: id });
  });

  router.put("/bucket/:bucket", json, async (req, res) => {
    const caller = await callerOf(req);
    const id = bucketOf(req);
    const updated = await service.asRole(caller, (c) =>
      store.updateBucket(c, id, bucketSettingsOf(objectBody(req))),
    );
    if (!updated) throw bucketNotFound();
    res.json({ message: "Successfully updated" });
  });

  router.post("/bucket/:bucket/empty", async (req, res) => {
    await service.emptyBucket(await callerOf(req), bucketOf(req));
    res.json({ message: "Successfully emptied" });
  });

  router.delete("/bucket/:bucket", async (req, res) => {
    await service.deleteBucket(await callerOf(req), bucketOf(req));
    res.json({ message: "Successfully deleted" });
  });

  // ------------------------------------------------------------------------------------------ listing, moves

  router.post("/object/list/:bucket", json, async (req, res) => {
    const caller = await callerOf(req);
    const bucketId = bucketOf(req);
    const body = objectBody(req);
    const sortBy = (body.sortBy ?? {}) as Record<string, unknown>;
    const entries = await service.asRole(caller, (c) =>
      store.listFolder(c, bucketId, {
        prefix: checkPrefix(body.prefix),
        search: typeof body.search === "string" ? body.search : "",
        limit: Math.min(optionalCount(body.limit, "limit") ?? 100, 1500),
        offset: optionalCount(body.offset, "offset") ?? 0,
        sortColumn: oneOf(
          sortBy.column,
          ["name", "created_at", "updated_at", "last_accessed_at"] as const,
          "name",
        ),
        sortOrder: oneOf(sortBy.order, ["asc", "desc"] as const, "asc"),
      }),
    );
    res.json(entries);
  });

  router.post("/object/list-v2/:bucket", json, async (req, res) => {
    const caller = await callerOf(req);
    const bucketId = bucketOf(req);
    const body = objectBody(req);
    const sortBy = (body.sortBy ?? {}) as Record<string, unknown>;
    const sortColumn = oneOf(sortBy.column, ["name", "created_at", "updated_at"] as const, "name");
    const sortOrder = oneOf(sortBy.order, ["asc", "desc"] as const, "asc");
    const limit = Math.min(Math.max(optionalCount(body.limit, "limit") ?? 1000, 1), 1000);
    const cursor = cursorOf(body.cursor);
    if (body.with_delimiter !== undefined && typeof body.with_delimiter !== "boolean") {
      throw invalidRequest("with_delimiter must be true or false");
    }
    const prefix = typeof body.prefix === "string" ? body.prefix : "";
    if (prefix) checkObjectName(prefix.replace(/\/+$/, "") || "x");
    const { entries } = await service.asRole(caller, (c) =>
      store.listKeys(c, bucketId, {
        prefix,
        delimiter: body.with_delimiter === true,
        limit: limit + 1,
        sortColumn,
        sortOrder,
        after: cursor.after,
        offset: cursor.offset ?? 0,
      }),
    );
    const page = entries.slice(0, limit);
    const hasNext = entries.length > limit;
    const last = page[page.length - 1];
    const next = hasNext
      ? sortColumn === "name"
        ? { after: last.key }
        : { offset: (cursor.offset ?? 0) + limit }
      : undefined;
    res.json({
      hasNext,
      ...(next
        ? { nextCursor: Buffer.from(JSON.stringify(next)).toString("base64url"), nextCursorKey: last.key }
        : {}),
      folders: page.filter((e) => e.folder).map((e) => ({ name: e.key, key: e.key })),
      objects: page
        .filter((e) => !e.folder)
        .map((e) => ({
          name: e.key,
          key: e.key,
          id: e.id,
          updated_at: e.updated_at,
          created_at: e.created_at,
          last_accessed_at: e.last_accessed_at,
          metadata: e.metadata,
        })),
    });
  });

  const moveTargets = (req: Request) => {
    const body = objectBody(req);
    const from = { bucketId: checkBucketId(body.bucketId), name: checkObjectName(body.sourceKey) };
    const to = {
      bucketId:
        body.destinationBucket === undefined || body.destinationBucket === null
          ? from.bucketId
          : checkBucketId(body.destinationBucket),
      name: checkObjectName(body.destinationKey),
    };
    return { from, to };
  };

  router.post("/object/move", json, async (req, res) => {
    const caller = await callerOf(req);
    const { from, to } = moveTargets(req);
    const moved = await service.move(caller, from, to);
    res.json({ message: "Successfully moved", Id: moved.id, Key: moved.name });
  });

  router.post("/object/copy", json, async (req, res) => {
    const caller = await callerOf(req);
    const { from, to } = moveTargets(req);
    const copied = await service.copy(caller, from, to, req.headers["x-upsert"] === "true");
    res.json({ ...objectJson(copied), Id: copied.id, Key: `${to.bucketId}/${to.name}` });
  });

  // ------------------------------------------------------------------------------------------ signed URLs

  const EXPIRY_MAX = 60 * 60 * 24 * 365 * 10;
  const expiresInOf = (value: unknown) => {
    const n = typeof value === "string" ? Number(value) : value;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > EXPIRY_MAX) {
      throw invalidParameter("expiresIn");
    }
    return n;
  };

  router.post("/object/sign/:bucket", json, async (req, res) => {
    const caller = await callerOf(req);
    const bucketId = bucketOf(req);
    const body = objectBody(req);
    const expiresIn = expiresInOf(body.expiresIn);
    if (!Array.isArray(body.paths) || !body.paths.length || body.paths.length > 1000) {
      throw invalidRequest("paths must be a list of 1 to 1000 object names");
    }
    const paths = body.paths.map((p) => checkObjectName(p));
    const visible = await service.asRole(caller, async (c) => {
      const found = new Set<string>();
      for (const name of paths) if (await store.findObject(c, bucketId, name)) found.add(name);
      return found;
    });
    const secret = caller.project.record.jwtSecret;
    res.json(
      await Promise.all(
        paths.map(async (name) =>
          visible.has(name)
            ? {
                error: null,
                path: name,
                signedURL: await signedDownloadPath(secret, bucketId, name, expiresIn),
              }
            : {
                error: "Either the object does not exist or you do not have access to it",
                path: name,
                signedURL: null,
              },
        ),
      ),
    );
  });

  router.post("/object/sign/:bucket/*name", json, async (req, res) => {
    const caller = await callerOf(req);
    const bucketId = bucketOf(req);
    const name = nameOf(req);
    const body = objectBody(req);
    const expiresIn = expiresInOf(body.expiresIn);
    const transform = body.transform;
    const transformations =
      transform && typeof transform === "object"
        ? transformationsOf(transform as Record<string, unknown>)
        : {};
    await service.visibleObject(caller, bucketId, name);
    const secret = caller.project.record.jwtSecret;
    res.json({ signedURL: await signedDownloadPath(secret, bucketId, name, expiresIn, transformations) });
  });

  const serveSigned = async (req: Request, res: Response) => {
    const project = await openProject(ctx, req);
    const bucketId = bucketOf(req);
    const name = nameOf(req);
    const grant = await verifyGrant<DownloadGrant>(
      project.record.jwtSecret,
      req.query.token,
      `${bucketId}/${name}`,
      "download",
    );
    if (grant.exp) res.setHeader("expires", new Date(grant.exp * 1000).toUTCString());
    await serveObject(service, req, res, project, await service.anyObject(project, bucketId, name));
  };
  router.get("/object/sign/:bucket/*name", serveSigned);
  router.head("/object/sign/:bucket/*name", serveSigned);

  router.post("/object/upload/sign/:bucket/*name", async (req, res) => {
    const caller = await callerOf(req);
    const bucketId = bucketOf(req);
    const name = nameOf(req);
    const upsert = req.headers["x-upsert"] === "true";
    await service.checkUploadAllowed(caller, { bucketId, name }, upsert);
    const grant: UploadGrant = {
      url: `${bucketId}/${name}`,
      scope: "upload",
      owner: subjectOf(caller.auth),
      upsert,
    };
    // Valid for two hours, as the platform documents signed upload URLs.
    const token = await signGrant(caller.project.record.jwtSecret, grant, 2 * 60 * 60);
    res.json({ url: `/object/upload/sign/${bucketId}/${name}?token=${token}`, token });
  });

  router.put("/object/upload/sign/:bucket/*name", async (req, res) => {
    const project = await openProject(ctx, req);
    const bucketId = bucketOf(req);
    const name = nameOf(req);
    const grant = await verifyGrant<UploadGrant>(
      project.record.jwtSecret,
      req.query.token,
      `${bucketId}/${name}`,
      "upload",
    );
    const caller: Caller = { project, auth: { role: "service_role", claims: {} }, settings: {} };
    const body = await readUpload(req);
    await service.upload(caller, { bucketId, name }, body, {
      mode: "create",
      upsert: grant.upsert,
      declaredLength: declaredLengthOf(req),
      signedFor: { owner: grant.owner },
    });
    res.json({ Key: `${bucketId}/${name}` });
  });

  // ------------------------------------------------------------------------------------------ public, info

  const servePublic = async (req: Request, res: Response) => {
    const project = await openProject(ctx, req);
    await serveObject(
      service,
      req,
      res,
      project,
      await service.publicObject(project, bucketOf(req), nameOf(req)),
    );
  };
  router.get("/object/public/:bucket/*name", servePublic);
  router.head("/object/public/:bucket/*name", servePublic);

  router.get("/object/info/public/:bucket/*name", async (req, res) => {
    const project = await openProject(ctx, req);
    res.json(infoJson(await service.publicObject(project, bucketOf(req), nameOf(req))));
  });
  const info = async (req: Request, res: Response) => {
    const caller = await callerOf(req);
    res.json(infoJson(await service.visibleObject(caller, bucketOf(req), nameOf(req))));
  };
  router.get("/object/info/authenticated/:bucket/*name", info);
  router.get("/object/info/:bucket/*name", info);

  // ------------------------------------------------------------------------------------------ images

  /** Transformations are the project's to turn on (`features.imageTransformation.enabled`). */
  const checkImagesOn = async (project: ProjectRuntime) => {
    const settings = await storageSettingsOf(ctx.platformPool, project.ref);
    if (!settings.features.imageTransformation?.enabled) throw transformationsOff();
  };
  router.get("/render/image/authenticated/:bucket/*name", async (req, res) => {
    const caller = await callerOf(req);
    await checkImagesOn(caller.project);
    const row = await service.visibleObject(caller, bucketOf(req), nameOf(req));
    await serveImage(
      service,
      req,
      res,
      caller.project,
      row,
      transformationsOf(req.query as Record<string, unknown>),
    );
  });
  router.get("/render/image/public/:bucket/*name", async (req, res) => {
    const project = await openProject(ctx, req);
    await checkImagesOn(project);
    const row = await service.publicObject(project, bucketOf(req), nameOf(req));
    await serveImage(
      service,
      req,
      res,
      project,
      row,
      transformationsOf(req.query as Record<string, unknown>),
    );
  });
  router.get("/render/image/sign/:bucket/*name", async (req, res) => {
    const project = await openProject(ctx, req);
    const bucketId = bucketOf(req);
    const name = nameOf(req);
    const grant = await verifyGrant<DownloadGrant>(
      project.record.jwtSecret,
      req.query.token,
      `${bucketId}/${name}`,
      "download",
    );
    await checkImagesOn(project);
    const row = await service.anyObject(project, bucketId, name);
    // The signer chose the transformations: they travel in the token, not in the URL.
    await serveImage(service, req, res, project, row, transformationsOf(grant.transformations ?? {}));
  });

  // ------------------------------------------------------------------------------------------ objects

  const serveAuthenticated = async (req: Request, res: Response) => {
    const caller = await callerOf(req);
    const row = await service.visibleObject(caller, bucketOf(req), nameOf(req));
    await serveObject(service, req, res, caller.project, row);
  };
  for (const path of ["/object/authenticated/:bucket/*name", "/object/:bucket/*name"]) {
    router.get(path, serveAuthenticated);
    router.head(path, serveAuthenticated);
  }

  const upload = (mode: "create" | "update") => async (req: Request, res: Response) => {
    const caller = await callerOf(req);
    const bucketId = bucketOf(req);
    const name = nameOf(req);
    const body = await readUpload(req);
    const row = await service.upload(caller, { bucketId, name }, body, {
      mode,
      upsert: mode === "create" && req.headers["x-upsert"] === "true",
      declaredLength: declaredLengthOf(req),
    });
    res.json({ Id: row.id, Key: `${bucketId}/${name}` });
  };
  router.post("/object/:bucket/*name", upload("create"));
  router.put("/object/:bucket/*name", upload("update"));

  router.delete("/object/:bucket/*name", async (req, res) => {
    const caller = await callerOf(req);
    const deleted = await service.remove(caller, bucketOf(req), [nameOf(req)]);
    if (!deleted.length) throw objectNotFound();
    res.json({ message: "Successfully deleted" });
  });

  router.delete("/object/:bucket", json, async (req, res) => {
    const caller = await callerOf(req);
    const bucketId = bucketOf(req);
    const { prefixes } = objectBody(req);
    if (!Array.isArray(prefixes) || prefixes.length > 1000) {
      throw invalidRequest("prefixes must be a list of at most 1000 object names");
    }
    const deleted = await service.remove(
      caller,
      bucketId,
      prefixes.map((p) => checkObjectName(p)),
    );
    res.json(deleted.map(objectJson));
  });

  router.use((req: Request, res: Response) => {
    res.status(404).json({
      statusCode: "404",
      code: "InvalidRequest",
      error: "Not Found",
      message: `Route ${req.method}:${req.baseUrl}${req.path} not found`,
    });
  });
  router.use((caught: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = refusalOf(asPoolTimeout(caught));
    if (!e) {
      ctx.log.error({ err: caught, path: req.path }, "storage request failed");
    } else if (e.status === 507) {
      // The client is told; the operator must free space.
      ctx.log.warn({ path: req.path }, "storage: no space left for an upload");
    }
    const answer = e ?? new StorageError(500, "InternalError", "internal", "Internal Server Error");
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // An upload refused before its bytes were read: the client is told, and the connection is not reused.
    if (!req.complete) res.setHeader("connection", "close");
    res.status(answer.httpStatus).json(answer.body);
  });
  return router;
}

/** A thrown error as the client's answer, or undefined for a server fault. */
function refusalOf(e: unknown): StorageError | undefined {
  if (e instanceof StorageError) return e;
  // The client went away in the middle of its upload: nothing was stored, and nobody is left to answer.
  if ((e as Error).message === "aborted" || (e as { code?: unknown }).code === "ECONNRESET") {
    return invalidRequest("The upload was cut off before its end");
  }
  if (e instanceof GateError) return fromGate(e);
  if (e instanceof PoolTimeout) {
    return new StorageError(429, "SlowDown", "too_many_connections", e.message, 429);
  }
  // Before the check below, which takes any error with a system code (ENOSPC too) for an unreachable database.
  if (isOutOfSpace(e)) return insufficientStorage();
  if (isDatabaseUnreachable(e)) {
    return new StorageError(
      503,
      "DatabaseUnavailable",
      "DatabaseUnavailable",
      "The database is out of reach",
      503,
    );
  }
  const status = (e as { status?: unknown; type?: unknown }).status;
  // express.json: a malformed or oversized body.
  if (typeof status === "number" && status >= 400 && status < 500)
    return invalidRequest((e as Error).message);
  return undefined;
}

async function signedDownloadPath(
  secret: string,
  bucketId: string,
  name: string,
  expiresIn: number,
  transformations: Transformations = {},
) {
  const transformed = hasTransformations(transformations);
  const grant: DownloadGrant = { url: `${bucketId}/${name}`, scope: "download" };
  if (transformed) grant.transformations = { ...transformations };
  const token = await signGrant(secret, grant, expiresIn);
  return `/${transformed ? "render/image" : "object"}/sign/${bucketId}/${name}?token=${token}`;
}

/** The headers every served object or image carries; `?download[=name]` makes it an attachment. */
function setServedHeaders(
  req: Request,
  res: Response,
  contentType: string,
  cacheControl: string | undefined,
) {
  res.setHeader("content-type", contentType);
  res.setHeader("cache-control", cacheControl ?? "no-cache");
  res.setHeader("x-robots-tag", "none");
  const download = req.query.download;
  if (typeof download === "string") {
    const encoded = encodeURIComponent(download);
    res.setHeader(
      "content-disposition",
      download ? `attachment; filename=${encoded}; filename*=UTF-8''${encoded}` : "attachment;",
    );
  }
}

/** Streams a transformed image; an object that is not an image, or does not decode, is a 400. */
async function serveImage(
  service: StorageService,
  req: Request,
  res: Response,
  project: ProjectRuntime,
  row: store.ObjectRow,
  t: Transformations,
) {
  const meta = row.metadata;
  if (!meta?.mimetype.startsWith("image/")) throw notAnImage();
  const { stream, contentType } = transform(await service.bytesOf(project, row), meta.mimetype, t);
  // Headers go out once the image decoded: a broken image is still an answer, not a cut connection.
  await new Promise<void>((resolve, reject) => {
    stream.once("readable", resolve);
    stream.once("error", () => reject(notAnImage()));
  });
  setServedHeaders(req, res, contentType, meta.cacheControl);
  stream.on("error", () => res.destroy());
  stream.pipe(res);
}

function objectBody(req: Request): Record<string, unknown> {
  const body: unknown = req.body;
  if (body === undefined) return {};
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw invalidRequest("body must be a JSON object");
  return body as Record<string, unknown>;
}

/** A list-v2 cursor as this server issued it: the last key (by name) or the next offset (by date). */
function cursorOf(value: unknown): { after?: string; offset?: number } {
  if (value === undefined || value === null || value === "") return {};
  try {
    const parsed: unknown = JSON.parse(Buffer.from(String(value), "base64url").toString("utf8"));
    const { after, offset } = parsed as { after?: unknown; offset?: unknown };
    if (typeof after === "string") return { after };
    if (typeof offset === "number" && Number.isInteger(offset) && offset >= 0) return { offset };
  } catch {
    // answered below
  }
  throw invalidRequest("cursor is not one this server issued");
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined || value === null || value === "") return fallback;
  if (typeof value === "string" && (allowed as readonly string[]).includes(value)) return value as T;
  throw invalidRequest(`must be one of ${allowed.join(", ")}: ${String(value)}`);
}

function optionalCount(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0)
    throw invalidRequest(`${name} must be a whole number`);
  return n;
}

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** A bucket's settings from the client's body: `file_size_limit` as bytes or a size such as `20MB`. */
function bucketSettingsOf(body: Record<string, unknown>): store.BucketSettings {
  const settings: store.BucketSettings = {};
  if (body.public !== undefined) {
    if (typeof body.public !== "boolean") throw invalidRequest("public must be true or false");
    settings.public = body.public;
  }
  const limit = body.file_size_limit;
  if (limit !== undefined) {
    if (limit === null) settings.fileSizeLimit = null;
    else if (typeof limit === "number" && Number.isInteger(limit) && limit >= 0)
      settings.fileSizeLimit = limit;
    else if (typeof limit === "string" && /^\s*\d+(\.\d+)?\s*(b|kb|mb|gb)?\s*$/i.test(limit)) {
      const [, amount, unit] = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(limit)!;
      settings.fileSizeLimit = Math.floor(Number(amount) * SIZE_UNITS[(unit ?? "b").toLowerCase()]);
    } else throw invalidRequest("file_size_limit must be a number of bytes or a size such as 20MB");
  }
  const types = body.allowed_mime_types;
  if (types !== undefined) {
    if (types === null) settings.allowedMimeTypes = null;
    else if (
      Array.isArray(types) &&
      types.every((t) => typeof t === "string" && /^[\w.+-]+\/[\w.+*-]+$/.test(t))
    ) {
      settings.allowedMimeTypes = types as string[];
    } else throw invalidRequest("allowed_mime_types must be a list of media types such as image/png");
  }
  return settings;
}

function bucketJson(b: store.BucketRow) {
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

function objectJson(o: store.ObjectRow) {
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

function infoJson(o: store.ObjectRow) {
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

function declaredLengthOf(req: Request): number | undefined {
  // A multipart body's length includes the form around the file: only a raw body's length is the file's.
  if (/^multipart\//i.test(req.headers["content-type"] ?? "")) return undefined;
  const n = Number(req.headers["content-length"]);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** `Range: bytes=a-b` (one range) within `size`; undefined for the whole object; 416 when unsatisfiable. */
function rangeOf(header: string | undefined, size: number): ByteRange | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  let start: number;
  let end: number;
  if (m[1] === "") {
    start = Math.max(size - Number(m[2]), 0);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start > end || start >= size) {
    throw new StorageError(
      416,
      "InvalidRange",
      "InvalidRange",
      "The requested range is not satisfiable",
      416,
    );
  }
  return { start, end };
}

/** Streams an object with its stored headers; `?download[=name]` makes it an attachment. */
async function serveObject(
  service: StorageService,
  req: Request,
  res: Response,
  project: ProjectRuntime,
  row: store.ObjectRow,
) {
  const meta = row.metadata;
  const size = meta?.size ?? 0;
  const range = rangeOf(req.headers.range, size);
  setServedHeaders(req, res, meta?.mimetype ?? "application/octet-stream", meta?.cacheControl);
  if (meta?.eTag) res.setHeader("etag", meta.eTag);
  if (meta?.lastModified) res.setHeader("last-modified", new Date(meta.lastModified).toUTCString());
  res.setHeader("accept-ranges", "bytes");
  if (meta?.eTag && req.headers["if-none-match"] === meta.eTag) {
    res.status(304).end();
    return;
  }
  if (range) {
    res.status(206);
    res.setHeader("content-range", `bytes ${range.start}-${range.end}/${size}`);
  }
  res.setHeader("content-length", String(range ? range.end - range.start + 1 : size));
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  const bytes = await service.bytesOf(project, row, range);
  bytes.on("error", () => res.destroy());
  bytes.pipe(res);
}
