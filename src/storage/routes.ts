import { Router } from "express";
import type { AppContext } from "../context";
import { backendOf } from "./backend";
import * as buckets from "./handlers/buckets";
import * as download from "./handlers/download";
import * as info from "./handlers/info";
import * as list from "./handlers/list";
import * as moveCopy from "./handlers/moveCopy";
import * as remove from "./handlers/remove";
import * as render from "./handlers/render";
import { resumableUploads } from "./handlers/resumable";
import * as signed from "./handlers/signedUrls";
import * as upload from "./handlers/upload";
import { version } from "./handlers/version";
import { answerError, noRoute } from "./http/answer";
import { caller, project } from "./http/route";
import { bucketParams as bucket, objectParams as object, tokenQuery as token } from "./http/schema";
import { StorageService } from "./service";

/**
 * /storage/v1 as the platform's storage server answers `@supabase/storage-js`: buckets, objects, signed
 * URLs, public URLs, resumable uploads and image transformation. The table below is every route: the
 * context its hook opens (`caller`: through the data gate, API key then bearer JWT, and the handler works as
 * that role; `project`: no key, for public and signed URLs), method, path, handler (in `handlers/`, one file
 * per family), and the checks before it and the schemas of its parameters, query and JSON body.
 * Errors are `{statusCode, code, error, message}` (`errors.ts`), HTTP 400 with the real status in
 * `statusCode` as the platform answers.
 */
export function storageRouter(ctx: AppContext): Router {
  const service = new StorageService(ctx, (ctx.storage ??= backendOf(ctx.config)));
  const OBJECT = "/object/:bucket/*name";
  const SIGNED = "/object/sign/:bucket/*name";
  const SIGNED_UPLOAD = "/object/upload/sign/:bucket/*name";
  const INFO = ["/object/info/authenticated/:bucket/*name", "/object/info/:bucket/*name"];
  const RENDER = "/render/image";
  const imagesOn = [render.imageTransformationOn];
  const transformed = { checks: imagesOn, params: object, query: render.transformQuery };

  // Express tries them in this order: fixed paths before `/object/:bucket/*name`.
  const table = [
    caller("all", ["/upload/resumable", "/upload/resumable/*id"], resumableUploads(ctx, service)),

    project("get", "/version", version),

    caller("get", "/bucket", buckets.listBuckets, { query: buckets.listQuery }),
    caller("get", "/bucket/:bucket", buckets.getBucket, { params: bucket }),
    caller("post", "/bucket", buckets.createBucket, { body: buckets.createBody }),
    caller("put", "/bucket/:bucket", buckets.updateBucket, { params: bucket, body: buckets.updateBody }),
    caller("post", "/bucket/:bucket/empty", buckets.emptyBucket, { params: bucket }),
    caller("delete", "/bucket/:bucket", buckets.deleteBucket, { params: bucket }),

    caller("post", "/object/list/:bucket", list.listObjects, { params: bucket, body: list.listBody }),
    caller("post", "/object/list-v2/:bucket", list.listObjectsV2, { params: bucket, body: list.listV2Body }),
    caller("post", "/object/move", moveCopy.moveObject, { body: moveCopy.transferBody }),
    caller("post", "/object/copy", moveCopy.copyObject, { body: moveCopy.transferBody }),

    caller("post", "/object/sign/:bucket", signed.signDownloads, {
      params: bucket,
      body: signed.signManyBody,
    }),
    caller("post", SIGNED, signed.signDownload, { params: object, body: signed.signOneBody }),
    project(["get", "head"], SIGNED, download.downloadSigned, { params: object, query: token }),
    caller("post", SIGNED_UPLOAD, signed.signUpload, { params: object }),
    project("put", SIGNED_UPLOAD, upload.uploadToSignedUrl, { params: object, query: token }),

    project(["get", "head"], "/object/public/:bucket/*name", download.downloadPublic, { params: object }),
    project("get", "/object/info/public/:bucket/*name", info.publicObjectInfo, { params: object }),
    caller("get", INFO, info.objectInfo, { params: object }),

    caller("get", `${RENDER}/authenticated/:bucket/*name`, render.renderAuthenticated, transformed),
    project("get", `${RENDER}/public/:bucket/*name`, render.renderPublic, transformed),
    project("get", `${RENDER}/sign/:bucket/*name`, render.renderSigned, {
      checks: imagesOn,
      params: object,
      query: token,
    }),

    caller(["get", "head"], ["/object/authenticated/:bucket/*name", OBJECT], download.downloadAuthenticated, {
      params: object,
    }),
    caller("post", OBJECT, upload.createObject, { params: object }),
    caller("put", OBJECT, upload.updateObject, { params: object }),
    caller("delete", OBJECT, remove.removeObject, { params: object }),
    caller("delete", "/object/:bucket", remove.removeObjects, { params: bucket, body: remove.removeBody }),
  ];

  const router = Router({ strict: false, caseSensitive: true });
  for (const r of table) r.mount(router, ctx, service);
  router.use(noRoute);
  router.use(answerError(ctx));
  return router;
}
