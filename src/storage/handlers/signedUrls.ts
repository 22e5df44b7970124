import type { CallerInput } from "../http/route";
import {
  expiresInOf,
  objectNamesOf,
  type BucketParams,
  type Fields,
  type ObjectParams,
  type Schema,
} from "../http/schema";
import { hasTransformations, transformationsOf, type Transformations } from "../images";
import { subjectOf } from "../service";
import * as store from "../store";
import { signGrant, type DownloadGrant, type UploadGrant } from "../signing";

/**
 * Signed URLs, made for a caller whose role may read (download) or write (upload) the object now; signed
 * with the project's JWT secret. Their use is served by `download.ts`, `render.ts` and `upload.ts`.
 */

interface SignMany {
  expiresIn: number;
  paths: string[];
}

export const signManyBody: Schema<SignMany> = (b) => ({
  expiresIn: expiresInOf(b.expiresIn),
  paths: objectNamesOf(b.paths, "paths", { min: 1 }),
});

/** `POST /object/sign/:bucket`: a URL for each name the caller sees, an error for the others. */
export async function signDownloads({
  res,
  service,
  caller,
  params,
  body,
}: CallerInput<BucketParams, undefined, SignMany>) {
  const { bucketId } = params;
  const visible = await service.asRole(caller, async (c) => {
    const found = new Set<string>();
    for (const name of body.paths) if (await store.findObject(c, bucketId, name)) found.add(name);
    return found;
  });
  const secret = caller.project.record.jwtSecret;
  const signed = body.paths.map(async (name) =>
    visible.has(name)
      ? { error: null, path: name, signedURL: await downloadPath(secret, bucketId, name, body.expiresIn) }
      : {
          error: "Either the object does not exist or you do not have access to it",
          path: name,
          signedURL: null,
        },
  );
  res.json(await Promise.all(signed));
}

interface SignOne {
  expiresIn: number;
  transformations: Transformations;
}

export const signOneBody: Schema<SignOne> = (b) => ({
  expiresIn: expiresInOf(b.expiresIn),
  transformations:
    b.transform && typeof b.transform === "object" ? transformationsOf(b.transform as Fields) : {},
});

/** `POST /object/sign/:bucket/*name`; with `transform`, a signed URL of the transformed image. */
export async function signDownload({
  res,
  service,
  caller,
  params,
  body,
}: CallerInput<ObjectParams, undefined, SignOne>) {
  const { bucketId, name } = params;
  await service.visibleObject(caller, bucketId, name);
  const secret = caller.project.record.jwtSecret;
  res.json({ signedURL: await downloadPath(secret, bucketId, name, body.expiresIn, body.transformations) });
}

/** `POST /object/upload/sign/...`: for a caller who may upload there now (`x-upsert`: or replace). */
export async function signUpload({ req, res, service, caller, params }: CallerInput<ObjectParams>) {
  const { bucketId, name } = params;
  const upsert = req.headers["x-upsert"] === "true";
  await service.checkUploadAllowed(caller, params, upsert);
  const grant: UploadGrant = {
    url: `${bucketId}/${name}`,
    scope: "upload",
    owner: subjectOf(caller.auth),
    upsert,
  };
  // Valid for two hours, as the platform documents signed upload URLs.
  const token = await signGrant(caller.project.record.jwtSecret, grant, 2 * 60 * 60);
  res.json({ url: `/object/upload/sign/${bucketId}/${name}?token=${token}`, token });
}

async function downloadPath(
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
