import type { CallerInput } from "../http/route";
import type { ObjectParams, Schema } from "../http/schema";
import { objectJson } from "../http/shapes";
import { checkBucketId, checkObjectName } from "../names";

/** `POST /object/move` and `/object/copy`: within a bucket or to another (`destinationBucket`). */

interface Transfer {
  from: ObjectParams;
  to: ObjectParams;
}

export const transferBody: Schema<Transfer> = (b) => {
  const from = { bucketId: checkBucketId(b.bucketId), name: checkObjectName(b.sourceKey) };
  const toBucket = b.destinationBucket ?? from.bucketId;
  return { from, to: { bucketId: checkBucketId(toBucket), name: checkObjectName(b.destinationKey) } };
};

type TransferInput = CallerInput<undefined, undefined, Transfer>;

export async function moveObject({ res, service, caller, body }: TransferInput) {
  const moved = await service.move(caller, body.from, body.to);
  res.json({ message: "Successfully moved", Id: moved.id, Key: moved.name });
}

/** The copy belongs to the caller; `x-upsert: true` replaces an object already at the destination. */
export async function copyObject({ req, res, service, caller, body }: TransferInput) {
  const copied = await service.copy(caller, body.from, body.to, req.headers["x-upsert"] === "true");
  res.json({ ...objectJson(copied), Id: copied.id, Key: `${body.to.bucketId}/${body.to.name}` });
}
