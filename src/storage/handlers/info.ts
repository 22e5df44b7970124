import type { CallerInput, ProjectInput } from "../http/route";
import type { ObjectParams } from "../http/schema";
import { infoJson } from "../http/shapes";

/** `GET /object/info/...`: an object's stored details, as the caller sees it or from a public bucket. */

export async function objectInfo({ res, service, caller, params }: CallerInput<ObjectParams>) {
  res.json(infoJson(await service.visibleObject(caller, params.bucketId, params.name)));
}

export async function publicObjectInfo({ res, service, project, params }: ProjectInput<ObjectParams>) {
  res.json(infoJson(await service.publicObject(project, params.bucketId, params.name)));
}
