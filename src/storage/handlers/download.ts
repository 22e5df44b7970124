import type { CallerInput, ProjectInput } from "../http/route";
import type { ObjectParams } from "../http/schema";
import { serveObject } from "../http/serve";
import { verifyGrant, type DownloadGrant } from "../signing";

/**
 * Downloads (GET and HEAD; ranges, ETags, `?download`): as the caller (its role must see the row), from a
 * public bucket, or through a signed URL (the token proves the right to read; read as the owner).
 */

export async function downloadAuthenticated(input: CallerInput<ObjectParams>) {
  const { service, caller, params } = input;
  await serveObject(input, await service.visibleObject(caller, params.bucketId, params.name));
}

export async function downloadPublic(input: ProjectInput<ObjectParams>) {
  const { service, project, params } = input;
  await serveObject(input, await service.publicObject(project, params.bucketId, params.name));
}

export async function downloadSigned(input: ProjectInput<ObjectParams, { token: string }>) {
  const { res, service, project, params, query } = input;
  const grant = await verifyGrant<DownloadGrant>(
    project.record.jwtSecret,
    query.token,
    `${params.bucketId}/${params.name}`,
    "download",
  );
  if (grant.exp) res.setHeader("expires", new Date(grant.exp * 1000).toUTCString());
  await serveObject(input, await service.anyObject(project, params.bucketId, params.name));
}
