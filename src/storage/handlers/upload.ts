import type { Request } from "express";
import type { CallerInput, ProjectInput } from "../http/route";
import type { ObjectParams } from "../http/schema";
import type { StorageSettings } from "../config";
import type { Caller } from "../service";
import { verifyGrant, type UploadGrant } from "../signing";
import { readUpload } from "../upload";

/** Uploads: a new object (`POST`, `x-upsert` to replace), a new version of one (`PUT`), a signed upload URL's. */

function upload(mode: "create" | "update") {
  return async ({ req, res, service, caller, settings, params }: CallerInput<ObjectParams>) => {
    const projectSizeLimit = sizeLimitOf(settings);
    const body = await readUpload(req);
    const row = await service.upload(caller, params, body, {
      mode,
      upsert: mode === "create" && req.headers["x-upsert"] === "true",
      declaredLength: declaredLengthOf(req),
      projectSizeLimit,
    });
    res.json({ Id: row.id, Key: `${params.bucketId}/${params.name}` });
  };
}

export const createObject = upload("create");
export const updateObject = upload("update");

/** `PUT /object/upload/sign/...?token=`: the token names the object, whether to upsert, and the signer. */
export async function uploadToSignedUrl(input: ProjectInput<ObjectParams, { token: string }>) {
  const { req, res, service, project, settings, params, query } = input;
  const { bucketId, name } = params;
  const grant = await verifyGrant<UploadGrant>(
    project.record.jwtSecret,
    query.token,
    `${bucketId}/${name}`,
    "upload",
  );
  const caller: Caller = { project, auth: { role: "service_role", claims: {} }, settings: {} };
  const projectSizeLimit = sizeLimitOf(settings);
  const body = await readUpload(req);
  await service.upload(caller, params, body, {
    mode: "create",
    upsert: grant.upsert,
    declaredLength: declaredLengthOf(req),
    projectSizeLimit,
    signedFor: { owner: grant.owner },
  });
  res.json({ Key: `${bucketId}/${name}` });
}

/** The project's `fileSizeLimit`, read while the upload starts (a refusal is the upload's answer). */
function sizeLimitOf(settings: () => Promise<StorageSettings>): Promise<number> {
  const limit = settings().then((s) => s.fileSizeLimit);
  limit.catch(() => {});
  return limit;
}

function declaredLengthOf(req: Request): number | undefined {
  // A multipart body's length includes the form around the file: only a raw body's length is the file's.
  if (/^multipart\//i.test(req.headers["content-type"] ?? "")) return undefined;
  const n = Number(req.headers["content-length"]);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}
