import { objectNotFound } from "../errors";
import type { CallerInput } from "../http/route";
import { objectNamesOf, type BucketParams, type ObjectParams, type Schema } from "../http/schema";
import { objectJson } from "../http/shapes";

/** Removals as the caller's role (its delete policies decide); the bytes go once their rows are gone. */

export async function removeObject({ res, service, caller, params }: CallerInput<ObjectParams>) {
  const deleted = await service.remove(caller, params.bucketId, [params.name]);
  if (!deleted.length) throw objectNotFound();
  res.json({ message: "Successfully deleted" });
}

export const removeBody: Schema<{ prefixes: string[] }> = (b) => ({
  prefixes: objectNamesOf(b.prefixes, "prefixes"),
});

/** `DELETE /object/:bucket` with the names in `prefixes`: answers the rows removed. */
export async function removeObjects({
  res,
  service,
  caller,
  params,
  body,
}: CallerInput<BucketParams, undefined, { prefixes: string[] }>) {
  const deleted = await service.remove(caller, params.bucketId, body.prefixes);
  res.json(deleted.map(objectJson));
}
