import { randomUUID } from "node:crypto";
import type { ServerOptions } from "@tus/server" with { "resolution-mode": "import" };
import type { Upload } from "@tus/utils" with { "resolution-mode": "import" };
import type { Request, Response } from "express";
import type { AppContext } from "../../context";
import { invalidRequest, refusalOf, uploadNotFound } from "../errors";
import { storageContextOf, type StorageContext } from "../http/context";
import type { CallerInput } from "../http/route";
import { checkBucketId, checkObjectName } from "../names";
import { resumablePartsOf } from "../resumable";
import { subjectOf, type Caller, type StorageService } from "../service";
import { cacheControlOf } from "../upload";

/**
 * Resumable uploads (`/storage/v1/upload/resumable`), the TUS protocol the platform documents for large files
 * (tus-js-client, Uppy). `@tus/server` speaks the protocol and keeps the parts in the data directory; when
 * the last byte arrives, the finished file goes through the same upload path as any other (limits, the
 * caller's RLS, bytes then row) and the parts are removed. Every request of an upload is keyed (the route's
 * context hook opened it) and must come from the project and the user that created it. With an S3 bucket
 * the parts are in it and any node takes an upload's next chunk; on disk a paused upload resumes on the node
 * that holds its parts (`../resumable.ts`).
 */

type TusRequest = Parameters<NonNullable<ServerOptions["onUploadCreate"]>>[0];
const ROUTE = "/storage/v1/upload/resumable";

/** A refusal as TUS hooks throw it: the status and storage's JSON error as the body. */
function tusError(e: unknown): { status_code: number; body: string } {
  const refusal = refusalOf(e);
  if (!refusal) throw e;
  return {
    status_code: refusal.httpStatus === 400 ? refusal.status : refusal.httpStatus,
    body: JSON.stringify(refusal.body),
  };
}

/** The context the route's hook put on the request TUS wraps (srvx keeps Node's request beside it). */
function contextOf(req: TusRequest): StorageContext & { caller: Caller } {
  const node = req.runtime?.node?.req as Request | undefined;
  const context = node && storageContextOf(node);
  if (!context?.caller) throw new Error("resumable upload request without its caller");
  return { ...context, caller: context.caller };
}

/** What the client put in `Upload-Metadata` (tus-js-client's `metadata`), checked. */
function targetOf(upload: Upload) {
  const meta = upload.metadata ?? {};
  return {
    bucketId: checkBucketId(meta.bucketName),
    name: checkObjectName(meta.objectName),
    contentType: meta.contentType || "application/octet-stream",
    cacheControl: cacheControlOf(meta.cacheControl ?? undefined),
  };
}

/** The route's handler: the TUS server, made on the first resumable request (the TUS packages are ES modules). */
export function resumableUploads(ctx: AppContext, service: StorageService) {
  let handler: Promise<(req: Request, res: Response) => Promise<void>> | undefined;
  return async ({ req, res }: CallerInput) => {
    handler ??= makeHandler(ctx, service);
    await (
      await handler
    )(req, res);
  };
}

async function makeHandler(ctx: AppContext, service: StorageService) {
  const { Server } = await import("@tus/server");
  const parts = await resumablePartsOf(ctx.config);
  const { store } = parts;

  const tus = new Server({
    path: ROUTE,
    datastore: store,
    relativeLocation: true,
    // `<project ref>.<uuid>`: the project an upload belongs to is part of its id.
    namingFunction: (req) => `${contextOf(req).project.ref}.${randomUUID()}`,
    async onUploadCreate(req, upload) {
      try {
        const { caller, settings } = contextOf(req);
        const target = targetOf(upload);
        if (upload.size === undefined) throw invalidRequest("Upload-Length is required");
        const upsert = req.headers.get("x-upsert") === "true";
        const projectSizeLimit = (await settings()).fileSizeLimit;
        await service.checkResumableUpload(caller, target, { size: upload.size, upsert, projectSizeLimit });
        return {
          metadata: { ...upload.metadata, owner: subjectOf(caller.auth) ?? "", upsert: String(upsert) },
        };
      } catch (e) {
        throw tusError(e);
      }
    },
    async onIncomingRequest(req, id) {
      if (req.method === "POST") return;
      try {
        const { caller } = contextOf(req);
        const upload = await store.getUpload(id).catch(() => undefined);
        // Another project's or another user's upload is answered as if it did not exist.
        if (
          !id.startsWith(`${caller.project.ref}.`) ||
          !upload ||
          (upload.metadata?.owner ?? "") !== (subjectOf(caller.auth) ?? "")
        ) {
          throw uploadNotFound();
        }
      } catch (e) {
        throw tusError(e);
      }
    },
    async onUploadFinish(req, upload) {
      try {
        const { caller, settings } = contextOf(req);
        const { contentType, cacheControl, ...target } = targetOf(upload);
        await service.upload(
          caller,
          target,
          { stream: await parts.read(upload.id), contentType, cacheControl, userMetadata: undefined },
          {
            mode: "create",
            upsert: upload.metadata?.upsert === "true",
            projectSizeLimit: (await settings()).fileSizeLimit,
          },
        );
        return {};
      } catch (e) {
        throw tusError(e);
      } finally {
        await parts.remove(upload.id).catch(() => {});
      }
    },
  });

  return async (req: Request, res: Response) => {
    // The TUS server matches the full path: undo Express' mount-point rewrite.
    req.url = req.originalUrl;
    await tus.handle(req, res);
  };
}
