import { transformationsOf, transformationsOff, type Transformations } from "../images";
import type { Check, CallerInput, ProjectInput } from "../http/route";
import type { ObjectParams, Schema } from "../http/schema";
import { serveImage } from "../http/serve";
import { verifyGrant, type DownloadGrant } from "../signing";

/**
 * `/render/image/{authenticated,public,sign}/...`: an object as a transformed image, read as the caller, from
 * a public bucket, or through a signed URL (whose token carries the transformations the signer chose).
 */

/** Transformations are the project's to turn on (`features.imageTransformation.enabled`). */
export const imageTransformationOn: Check = async ({ settings }) => {
  if (!(await settings()).features.imageTransformation?.enabled) throw transformationsOff();
};

export const transformQuery: Schema<Transformations> = transformationsOf;

export async function renderAuthenticated(input: CallerInput<ObjectParams, Transformations>) {
  const { service, caller, params, query } = input;
  await serveImage(input, await service.visibleObject(caller, params.bucketId, params.name), query);
}

export async function renderPublic(input: ProjectInput<ObjectParams, Transformations>) {
  const { service, project, params, query } = input;
  await serveImage(input, await service.publicObject(project, params.bucketId, params.name), query);
}

export async function renderSigned(input: ProjectInput<ObjectParams, { token: string }>) {
  const { service, project, params, query } = input;
  const grant = await verifyGrant<DownloadGrant>(
    project.record.jwtSecret,
    query.token,
    `${params.bucketId}/${params.name}`,
    "download",
  );
  const row = await service.anyObject(project, params.bucketId, params.name);
  await serveImage(input, row, transformationsOf(grant.transformations ?? {}));
}
