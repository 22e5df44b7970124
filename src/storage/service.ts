import { randomUUID } from "node:crypto";
import type { Readable, Writable } from "node:stream";
import type pg from "pg";
import type { RequestAuth } from "../auth/dataAuth";
import type { AppContext } from "../context";
import { queryInOneRoundTrip, withTransaction, type TransactionScope } from "../db/transaction";
import type { ProjectRuntime } from "../projects/runtime";
import { ObjectMissing, type ObjectBackend } from "./backend";
import type { ByteRange } from "./backend/types";
import { bucketNotFound, fromDatabase, objectNotFound, tooLarge } from "./errors";
import * as store from "./store";
import { checkMimeType, limitedTo, type UploadBody } from "./upload";

/**
 * Storage operations, between the routes (HTTP) and the store (SQL) and backend (bytes). Metadata is read
 * and written as the caller's role, so the project's RLS policies on storage.buckets and storage.objects
 * decide; the bytes are written before their row and removed when the row cannot be written, so no row
 * points at missing bytes and failed uploads leave no bytes behind.
 */

/** Who asks: the project, the role and claims the gate found, and the request settings RLS may read. */
export interface Caller {
  project: ProjectRuntime;
  auth: RequestAuth;
  settings: Record<string, string>;
}

/** Thrown out of a transaction to roll it back after a permission test. */
class Probe {}

/**
 * An upload declared at most this long is not tested against the policies before its bytes are read: they are
 * already on their way, and the row written after them is refused (and the bytes removed) just as the test
 * would refuse it. Longer or undeclared uploads are tested first, so a refused one is not read at all.
 */
const UNTESTED_UPLOAD_BYTES = 1024 * 1024;

/** A single statement in one round trip (settings and statement in one pipeline: its own transaction). */
function oneRoundTrip(pool: pg.Pool, scope: TransactionScope): store.Sql {
  return {
    query: <R extends pg.QueryResultRow>(text: string, values: unknown[]) =>
      queryInOneRoundTrip(pool, scope, { text, values }) as Promise<pg.QueryResult<R>>,
  };
}

export class StorageService {
  constructor(
    private readonly ctx: AppContext,
    private readonly backend: ObjectBackend,
  ) {}

  /** Runs `work` as the caller's role; database refusals become storage errors (`duplicate`: a taken name's code). */
  async asRole<T>(caller: Caller, work: (c: pg.PoolClient) => Promise<T>, duplicate?: string): Promise<T> {
    const { role, claims } = caller.auth;
    try {
      return await withTransaction(
        caller.project.dataPool,
        { role, claims, settings: caller.settings },
        work,
      );
    } catch (e) {
      throw fromDatabase(e, duplicate);
    }
  }

  /**
   * Runs `work`, ONE statement, as the caller's role in a single round trip (a statement of its own commits
   * alone: `work` must not need a second one to be atomic with it).
   */
  async oneAsRole<T>(caller: Caller, work: (c: store.Sql) => Promise<T>, duplicate?: string): Promise<T> {
    const { role, claims } = caller.auth;
    try {
      return await work(oneRoundTrip(caller.project.dataPool, { role, claims, settings: caller.settings }));
    } catch (e) {
      throw fromDatabase(e, duplicate);
    }
  }

  /** Runs `work`, ONE statement, as the project's owner in a single round trip (as oneAsRole). */
  async oneAsOwner<T>(project: ProjectRuntime, work: (c: store.Sql) => Promise<T>): Promise<T> {
    try {
      return await work(oneRoundTrip(project.ownerPool, project.asOwnerScope));
    } catch (e) {
      throw fromDatabase(e);
    }
  }

  /**
   * Runs `work` as the project's owner, past RLS (the owner owns the storage tables): public buckets, signed
   * URLs, bookkeeping. Never as the superuser: the owner may have put triggers or views there.
   */
  async asOwner<T>(project: ProjectRuntime, work: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    try {
      return await withTransaction(project.ownerPool, project.asOwnerScope, work);
    } catch (e) {
      throw fromDatabase(e);
    }
  }

  /** Whether the caller's role may do `work` (rolled back either way); throws the refusal. */
  private async test(caller: Caller, work: (c: pg.PoolClient) => Promise<unknown>): Promise<void> {
    await this.asRole(
      caller,
      async (c) => {
        await work(c);
        throw new Probe();
      },
      "KeyAlreadyExists",
    ).catch((e: unknown) => {
      if (!(e instanceof Probe)) throw e;
    });
  }

  /** A signed upload URL is only made for a caller who may upload there now (insert, or upsert). */
  async checkUploadAllowed(caller: Caller, target: { bucketId: string; name: string }, upsert: boolean) {
    const bucket = await this.asOwner(caller.project, (c) => store.findBucket(c, target.bucketId));
    if (!bucket) throw bucketNotFound();
    const probe: store.NewObject = {
      bucketId: target.bucketId,
      name: target.name,
      owner: subjectOf(caller.auth),
      version: randomUUID(),
      metadata: placeholderMetadata({ contentType: "application/octet-stream", cacheControl: "no-cache" }),
      userMetadata: undefined,
    };
    await this.test(caller, (c) => store.writeObject(c, probe, upsert));
  }

  /**
   * Before a resumable upload's first byte: the bucket, its media types, the size (`projectSizeLimit`: the
   * project's `fileSizeLimit`) and the caller's policies.
   */
  async checkResumableUpload(
    caller: Caller,
    target: { bucketId: string; name: string; contentType: string },
    options: { size: number; upsert: boolean; projectSizeLimit: number },
  ) {
    const bucket = await this.asOwner(caller.project, (c) => store.findBucket(c, target.bucketId));
    if (!bucket) throw bucketNotFound();
    checkMimeType(target.contentType, bucket.allowed_mime_types);
    if (options.size > sizeLimitOf(bucket, options.projectSizeLimit)) throw tooLarge();
    await this.checkUploadAllowed(caller, target, options.upsert);
  }

  private keyOf(project: ProjectRuntime, version: string): string {
    return `${project.ref}/${version}`;
  }

  /** Removes bytes no row points at any more; a failure leaves an orphan file, never a broken object. */
  private async discard(project: ProjectRuntime, versions: (string | null)[]): Promise<void> {
    const keys = versions.filter((v): v is string => !!v).map((v) => this.keyOf(project, v));
    if (!keys.length) return;
    await this.backend.remove(keys).catch((e: unknown) => {
      this.ctx.log.warn({ ref: project.ref, err: (e as Error).message }, "storage: removing bytes failed");
    });
  }

  // ------------------------------------------------------------------------------------------ buckets

  async emptyBucket(caller: Caller, bucketId: string): Promise<void> {
    const bucket = await this.asRole(caller, (c) => store.findBucket(c, bucketId));
    if (!bucket) throw bucketNotFound();
    for (;;) {
      const deleted = await this.asRole(caller, (c) => store.deleteSomeObjects(c, bucketId, 1000));
      await this.discard(
        caller.project,
        deleted.map((o) => o.version),
      );
      if (deleted.length < 1000) return;
    }
  }

  async deleteBucket(caller: Caller, bucketId: string): Promise<void> {
    // A bucket that still holds objects (perhaps some the role cannot see) fails on their foreign key: 409.
    const deleted = await this.asRole(caller, (c) => store.deleteBucket(c, bucketId));
    if (!deleted) throw bucketNotFound();
  }

  // ------------------------------------------------------------------------------------------ uploads

  /**
   * Stores an upload at `bucketId/name`. `mode`: `create` (a taken name is 409 unless `upsert`), `update`
   * (the object must exist). `signedFor`: an upload through a signed upload URL, written as the owner
   * (the signer's permission was checked when the URL was made), owned by the signer. `projectSizeLimit`:
   * the project's `fileSizeLimit`, which the bucket's own limit may only lower.
   */
  async upload(
    caller: Caller,
    target: { bucketId: string; name: string },
    body: UploadBody,
    options: {
      mode: "create" | "update";
      upsert: boolean;
      declaredLength?: number;
      /** The project's `fileSizeLimit` (or its read under way: awaited with the bucket). */
      projectSizeLimit: number | Promise<number>;
      signedFor?: { owner?: string };
    },
  ): Promise<store.ObjectRow> {
    const { project } = caller;
    // The bucket's limits, and the version an upsert or update replaces (its bytes go once the row is written).
    const [found, projectSizeLimit] = await Promise.all([
      this.oneAsOwner(project, (c) => store.findUploadTarget(c, target.bucketId, target.name)),
      options.projectSizeLimit,
    ]);
    if (!found) throw bucketNotFound();
    const { bucket, previousVersion } = found;
    checkMimeType(body.contentType, bucket.allowed_mime_types);
    const limit = sizeLimitOf(bucket, projectSizeLimit);
    if (options.declaredLength !== undefined && options.declaredLength > limit) throw tooLarge();

    const owner = options.signedFor ? options.signedFor.owner : subjectOf(caller.auth);
    const version = randomUUID();
    const row = (metadata: store.ObjectMetadata): store.NewObject => ({
      ...target,
      owner,
      version,
      metadata,
      userMetadata: body.userMetadata,
    });
    // One statement: an insert (with `upsert`, one that updates a taken name) or an update.
    const write = (c: store.Sql, metadata: store.ObjectMetadata) =>
      options.mode === "update"
        ? store.replaceObject(c, row(metadata))
        : store.writeObject(c, row(metadata), options.upsert);
    // Refuse before the bytes travel: the role's policies, a taken name, a missing object to update.
    const small = options.declaredLength !== undefined && options.declaredLength <= UNTESTED_UPLOAD_BYTES;
    if (!options.signedFor && !small) {
      await this.test(caller, async (c) => {
        if (!(await write(c, placeholderMetadata(body)))) throw objectNotFound();
      });
    }
    const key = this.keyOf(project, version);
    // A body of a declared length within the limit cannot pass it (the HTTP parser reads that many bytes and no
    // more): only a body of unknown length (multipart, chunked) is counted on its way.
    const within = options.declaredLength !== undefined && options.declaredLength <= limit;
    const stored = await this.backend.write(key, within ? body.stream : limitStream(body.stream, limit));
    const metadata: store.ObjectMetadata = {
      eTag: `"${stored.md5}"`,
      size: stored.size,
      mimetype: body.contentType,
      cacheControl: body.cacheControl,
      lastModified: new Date().toISOString(),
      contentLength: stored.size,
      httpStatusCode: 200,
    };
    let written: store.ObjectRow | undefined;
    try {
      written = options.signedFor
        ? await this.oneAsOwner(project, (c) => write(c, metadata))
        : await this.oneAsRole(caller, (c) => write(c, metadata), "KeyAlreadyExists");
      if (!written) throw objectNotFound();
    } catch (e) {
      await this.discard(project, [version]);
      throw e;
    }
    if (previousVersion && previousVersion !== version) await this.discard(project, [previousVersion]);
    return written;
  }

  // ------------------------------------------------------------------------------------------ reads

  /** The object's row as the caller may see it, else 404. */
  async visibleObject(caller: Caller, bucketId: string, name: string): Promise<store.ObjectRow> {
    const row = await this.oneAsRole(caller, (c) => store.findObject(c, bucketId, name));
    if (!row) throw objectNotFound();
    return row;
  }

  /** An object of a public bucket, for anyone. */
  async publicObject(project: ProjectRuntime, bucketId: string, name: string): Promise<store.ObjectRow> {
    return this.asOwner(project, async (c) => {
      const bucket = await store.findBucket(c, bucketId);
      if (!bucket?.public) throw bucketNotFound();
      const row = await store.findObject(c, bucketId, name);
      if (!row) throw objectNotFound();
      return row;
    });
  }

  /** Any object of the project (a signed URL already proved the right to read it). */
  async anyObject(project: ProjectRuntime, bucketId: string, name: string): Promise<store.ObjectRow> {
    const row = await this.oneAsOwner(project, (c) => store.findObject(c, bucketId, name));
    if (!row) throw objectNotFound();
    return row;
  }

  async bytesOf(project: ProjectRuntime, row: store.ObjectRow, range?: ByteRange): Promise<Readable> {
    if (!row.version) throw objectNotFound();
    const key = this.keyOf(project, row.version);
    return this.backend.read(key, range, row.metadata?.size).catch((e: unknown) => {
      throw e instanceof ObjectMissing ? objectNotFound() : e;
    });
  }

  // ------------------------------------------------------------------------------------------ changes

  async remove(caller: Caller, bucketId: string, names: string[]): Promise<store.ObjectRow[]> {
    const deleted = await this.asRole(caller, (c) => store.deleteObjects(c, bucketId, names));
    await this.discard(
      caller.project,
      deleted.map((o) => o.version),
    );
    return deleted;
  }

  /** Moves an object (a rename of its row; the bytes stay). Needs the role's update on the object. */
  async move(
    caller: Caller,
    from: { bucketId: string; name: string },
    to: { bucketId: string; name: string },
  ): Promise<store.ObjectRow> {
    if (to.bucketId !== from.bucketId) {
      const exists = await this.asOwner(caller.project, (c) => store.findBucket(c, to.bucketId));
      if (!exists) throw bucketNotFound();
    }
    const moved = await this.asRole(caller, (c) => store.renameObject(c, from, to));
    if (!moved) throw objectNotFound();
    return moved;
  }

  /** Copies an object to a new name: the caller must see the source and may insert the copy. */
  async copy(
    caller: Caller,
    from: { bucketId: string; name: string },
    to: { bucketId: string; name: string },
    upsert: boolean,
  ): Promise<store.ObjectRow> {
    const { project } = caller;
    const source = await this.visibleObject(caller, from.bucketId, from.name);
    const target = await this.asOwner(project, (c) => store.findBucket(c, to.bucketId));
    if (!target) throw bucketNotFound();
    if (!source.version || !source.metadata) throw objectNotFound();
    const version = randomUUID();
    const copy: store.NewObject = {
      ...to,
      owner: subjectOf(caller.auth),
      version,
      metadata: { ...source.metadata, lastModified: new Date().toISOString() },
      userMetadata: source.user_metadata ?? undefined,
    };
    await this.test(caller, (c) => store.writeObject(c, copy, upsert));
    const previous = await this.asOwner(project, (c) => store.findObject(c, to.bucketId, to.name));
    await this.backend
      .copy(this.keyOf(project, source.version), this.keyOf(project, version))
      .catch((e: unknown) => {
        throw e instanceof ObjectMissing ? objectNotFound() : e;
      });
    try {
      const written = await this.asRole(
        caller,
        (c) => store.writeObject(c, copy, upsert),
        "KeyAlreadyExists",
      );
      if (previous?.version) await this.discard(project, [previous.version]);
      return written;
    } catch (e) {
      await this.discard(project, [version]);
      throw e;
    }
  }
}

/** The signed-in user a request acts for (its JWT's `sub`); the service key has none. */
export function subjectOf(auth: RequestAuth): string | undefined {
  const sub = auth.claims.sub;
  return typeof sub === "string" && sub ? sub : undefined;
}

/** The largest object a bucket takes: its own limit and the project's, whichever is less. */
function sizeLimitOf(bucket: store.BucketRow, projectSizeLimit: number): number {
  return Math.min(bucket.file_size_limit ?? Infinity, projectSizeLimit);
}

/** Metadata for a permission test: policies may read it, so it has the upload's declared type. */
function placeholderMetadata(body: Pick<UploadBody, "contentType" | "cacheControl">): store.ObjectMetadata {
  return {
    eTag: '""',
    size: 0,
    mimetype: body.contentType,
    cacheControl: body.cacheControl,
    lastModified: new Date().toISOString(),
    contentLength: 0,
    httpStatusCode: 200,
  };
}

/**
 * The upload's bytes, cut at `limit` with a 413. Past the limit the rest of the request is drained, not
 * destroyed, so the client still reads the answer.
 */
function limitStream(source: Readable, limit: number): Readable {
  const limited = limitedTo(limit);
  source.on("error", (e) => limited.destroy(e));
  limited.on("error", () => {
    source.unpipe(limited as Writable);
    source.resume();
  });
  return source.pipe(limited);
}
