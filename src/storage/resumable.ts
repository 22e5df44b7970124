import { readdir, readFile, rm, stat } from "node:fs/promises";
import type { IncomingHttpHeaders } from "node:http";
import path from "node:path";
import { randomUUID } from "node:crypto";
import type { ServerOptions } from "@tus/server" with { "resolution-mode": "import" };
import type { Upload } from "@tus/utils" with { "resolution-mode": "import" };
import type { Request, Response } from "express";
import type { AppContext } from "../context";
import { GateError, openDataRequest } from "../http/gate";
import { roleSettingsOf } from "../catalog/roleSettings";
import { fromGate, insufficientStorage, invalidRequest, isOutOfSpace, StorageError } from "./errors";
import { checkBucketId, checkObjectName } from "./names";
import { subjectOf, type Caller, type StorageService } from "./service";

/**
 * Resumable uploads (`/storage/v1/upload/resumable`), the TUS protocol the platform documents for large files
 * (tus-js-client, Uppy). `@tus/server` speaks the protocol and keeps the parts in the data directory; when
 * the last byte arrives, the finished file goes through the same upload path as any other (limits, the
 * caller's RLS, bytes then row) and the parts are removed. Every request of an upload is authenticated and
 * must come from the project and the user that created it. A paused upload resumes on the node that holds
 * its parts.
 */

type TusRequest = Parameters<NonNullable<ServerOptions["onUploadCreate"]>>[0];
const ROUTE = "/storage/v1/upload/resumable";
/** An upload not finished a day after it began is given up (its parts removed, its URL answered 404). */
const EXPIRY_MS = 24 * 60 * 60 * 1000;
/** An upload's id, `<project ref>.<uuid>`: its parts are the file of that name, its info `<id>.json`. */
const UPLOAD_ID = /^([a-z]{20}\.[0-9a-f-]{36})(\.json)?$/;

const partsDirOf = (dataDir: string) => path.join(dataDir, "storage-resumable");

/**
 * Removes the uploads begun over a day before `now` (their expiry): abandoned ones, and any a crash left
 * behind, with or without their info file. Returns how many.
 */
export async function removeExpiredUploads(dataDir: string, now = Date.now()): Promise<number> {
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

/** A refusal as TUS hooks throw it: the status and storage's JSON error as the body. */
function tusError(e: unknown): { status_code: number; body: string } {
  const refusal =
    e instanceof StorageError
      ? e
      : e instanceof GateError
        ? fromGate(e)
        : isOutOfSpace(e)
          ? insufficientStorage()
          : undefined;
  if (!refusal) throw e;
  return {
    status_code: refusal.httpStatus === 400 ? refusal.status : refusal.httpStatus,
    body: JSON.stringify(refusal.body),
  };
}

function headersOf(req: TusRequest): IncomingHttpHeaders {
  return Object.fromEntries(req.headers.entries());
}

/** What the client put in `Upload-Metadata` (tus-js-client's `metadata`), checked. */
function targetOf(upload: Upload) {
  const meta = upload.metadata ?? {};
  return {
    bucketId: checkBucketId(meta.bucketName),
    name: checkObjectName(meta.objectName),
    contentType: meta.contentType || "application/octet-stream",
    cacheControl: meta.cacheControl
      ? /^\d+$/.test(meta.cacheControl)
        ? `max-age=${meta.cacheControl}`
        : meta.cacheControl
      : "no-cache",
  };
}

export function resumableUploads(ctx: AppContext, service: StorageService) {
  // The TUS packages are ES modules: loaded on the first resumable request.
  let handler: Promise<(req: Request, res: Response) => Promise<void>> | undefined;
  return async (req: Request, res: Response) => {
    handler ??= makeHandler(ctx, service);
    await (
      await handler
    )(req, res);
  };
}

async function makeHandler(ctx: AppContext, service: StorageService) {
  const { FileStore } = await import("@tus/file-store");
  const { Server } = await import("@tus/server");
  const store = new FileStore({
    directory: partsDirOf(ctx.config.dataDir),
    // Parts of an upload left unfinished for a day are removed by the storage sweep (removeExpiredUploads).
    expirationPeriodInMilliseconds: EXPIRY_MS,
  });

  async function callerOf(req: TusRequest): Promise<Caller> {
    const { project, auth } = await openDataRequest(ctx, { headers: headersOf(req) });
    const settings = await roleSettingsOf(project, auth.role);
    return { project, auth, settings };
  }

  const tus = new Server({
    path: ROUTE,
    datastore: store,
    relativeLocation: true,
    // `<project ref>.<uuid>`: the project an upload belongs to is part of its id.
    namingFunction: async (req) => `${(await callerOf(req)).project.ref}.${randomUUID()}`,
    async onUploadCreate(req, upload) {
      try {
        const caller = await callerOf(req);
        const target = targetOf(upload);
        if (upload.size === undefined) throw invalidRequest("Upload-Length is required");
        const upsert = req.headers.get("x-upsert") === "true";
        await service.checkResumableUpload(caller, target, upload.size, upsert);
        return {
          metadata: { ...upload.metadata, owner: subjectOf(caller.auth) ?? "", upsert: String(upsert) },
        };
      } catch (e) {
        throw tusError(e);
      }
    },
    async onIncomingRequest(req, id) {
      if (req.method === "POST" || req.method === "OPTIONS") return;
      try {
        const caller = await callerOf(req);
        const upload = await store.getUpload(id).catch(() => undefined);
        // Another project's or another user's upload is answered as if it did not exist.
        if (
          !id.startsWith(`${caller.project.ref}.`) ||
          !upload ||
          (upload.metadata?.owner ?? "") !== (subjectOf(caller.auth) ?? "")
        ) {
          throw new StorageError(404, "NoSuchUpload", "not_found", "Upload not found");
        }
      } catch (e) {
        throw tusError(e);
      }
    },
    async onUploadFinish(req, upload) {
      try {
        const caller = await callerOf(req);
        const target = targetOf(upload);
        await service.upload(
          caller,
          { bucketId: target.bucketId, name: target.name },
          {
            stream: store.read(upload.id),
            contentType: target.contentType,
            cacheControl: target.cacheControl,
            userMetadata: undefined,
          },
          { mode: "create", upsert: upload.metadata?.upsert === "true" },
        );
        return {};
      } catch (e) {
        throw tusError(e);
      } finally {
        await store.remove(upload.id).catch(() => {});
      }
    },
  });

  return async (req: Request, res: Response) => {
    // The TUS server matches the full path: undo Express' mount-point rewrite.
    req.url = req.originalUrl;
    await tus.handle(req, res);
  };
}
