import { Readable } from "node:stream";
import type { S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import { measuring } from "./disk";
import {
  checkKey,
  checkRef,
  isKey,
  ObjectMissing,
  type ByteRange,
  type ObjectBackend,
  type StoredBytes,
} from "./types";

/** The AWS SDK, loaded when a server stores its objects in S3: one that does not never holds it in memory. */
const sdk = () => import("@aws-sdk/client-s3");

export interface S3Settings {
  bucket: string;
  endpoint?: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Path-style addressing (`endpoint/bucket/key`), which most S3-compatible servers need. */
  forcePathStyle: boolean;
}

/** The client settings of the bucket's server (also resumable uploads' store). */
export function s3ClientConfigOf(settings: S3Settings): S3ClientConfig {
  return {
    region: settings.region,
    endpoint: settings.endpoint,
    forcePathStyle: settings.forcePathStyle,
    credentials:
      settings.accessKeyId && settings.secretAccessKey
        ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
        : undefined,
  };
}

/**
 * Bytes in an S3-compatible bucket, so several Strata nodes share one set of files. Uploads stream in parts
 * (lib-storage's Upload): a cut-off upload is aborted and leaves no object.
 */
export class S3Backend implements ObjectBackend {
  private clientPromise: Promise<S3Client> | undefined;

  constructor(private readonly settings: S3Settings) {}

  private client(): Promise<S3Client> {
    this.clientPromise ??= sdk().then(({ S3Client }) => new S3Client(s3ClientConfigOf(this.settings)));
    return this.clientPromise;
  }

  async write(key: string, body: Readable): Promise<StoredBytes> {
    const measure = measuring();
    const { Upload } = await import("@aws-sdk/lib-storage");
    const upload = new Upload({
      client: await this.client(),
      params: { Bucket: this.settings.bucket, Key: checkKey(key), Body: body.pipe(measure.stream) },
    });
    // The source's own error (a size limit, a cut-off request) is the answer, not the upload's wrapper of it.
    let sourceError: unknown;
    body.once("error", (e) => {
      sourceError = e;
      measure.stream.destroy(e);
    });
    try {
      await upload.done();
    } catch (e) {
      await upload.abort().catch(() => {});
      throw sourceError ?? e;
    }
    return measure.result();
  }

  async read(key: string, range?: ByteRange): Promise<Readable> {
    const { GetObjectCommand, NoSuchKey } = await sdk();
    const client = await this.client();
    try {
      const out = await client.send(
        new GetObjectCommand({
          Bucket: this.settings.bucket,
          Key: checkKey(key),
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      return out.Body as Readable;
    } catch (e) {
      if (e instanceof NoSuchKey || (e as { name?: string }).name === "NoSuchKey")
        throw new ObjectMissing(key);
      throw e;
    }
  }

  async copy(from: string, to: string): Promise<void> {
    const { CopyObjectCommand } = await sdk();
    const client = await this.client();
    try {
      await client.send(
        new CopyObjectCommand({
          Bucket: this.settings.bucket,
          Key: checkKey(to),
          CopySource: `${this.settings.bucket}/${checkKey(from)}`,
        }),
      );
    } catch (e) {
      if ((e as { name?: string }).name === "NoSuchKey") throw new ObjectMissing(from);
      throw e;
    }
  }

  async remove(keys: string[]): Promise<void> {
    const { DeleteObjectsCommand } = await sdk();
    const client = await this.client();
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000).map((key) => ({ Key: checkKey(key) }));
      await client.send(
        new DeleteObjectsCommand({ Bucket: this.settings.bucket, Delete: { Objects: batch, Quiet: true } }),
      );
    }
  }

  async removeProject(ref: string): Promise<void> {
    const prefix = `${checkRef(ref)}/`;
    const { ListObjectsV2Command } = await sdk();
    const client = await this.client();
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: this.settings.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      const keys = (page.Contents ?? []).map((o) => o.Key!).filter(Boolean);
      if (keys.length) await this.remove(keys);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /**
   * Aborts the multipart uploads of Strata's keys begun before `staleBefore` (a node that died mid-write
   * leaves its parts stored, and billed, until they are). A store that cannot list them has nothing to abort.
   */
  async removeUnfinished(staleBefore: Date): Promise<number> {
    const { ListMultipartUploadsCommand, AbortMultipartUploadCommand } = await sdk();
    const client = await this.client();
    const Bucket = this.settings.bucket;
    let aborted = 0;
    let marker: { KeyMarker?: string; UploadIdMarker?: string } = {};
    for (;;) {
      const page = await client
        .send(new ListMultipartUploadsCommand({ Bucket, ...marker }))
        .catch((e: unknown) => {
          if ((e as { name?: string }).name === "NotImplemented") return undefined;
          throw e;
        });
      for (const { Key, UploadId, Initiated } of page?.Uploads ?? []) {
        if (!Key || !UploadId || !Initiated || Initiated >= staleBefore || !isKey(Key)) continue;
        await client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }));
        aborted++;
      }
      if (!page?.IsTruncated) return aborted;
      marker = { KeyMarker: page.NextKeyMarker, UploadIdMarker: page.NextUploadIdMarker };
    }
  }

  async close(): Promise<void> {
    if (this.clientPromise) (await this.clientPromise).destroy();
  }
}
