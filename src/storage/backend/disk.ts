import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { copyFile, mkdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  checkKey,
  checkRef,
  ObjectMissing,
  type ByteRange,
  type ObjectBackend,
  type StoredBytes,
} from "./types";

/** A Transform that hashes and counts what passes through it. */
export function measuring(): { stream: Transform; result: () => StoredBytes } {
  const hash = createHash("md5");
  let size = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  return { stream, result: () => ({ size, md5: hash.digest("hex") }) };
}

/**
 * Bytes as files under a directory (the data directory's `storage/` by default). A write goes to a
 * temporary file renamed into place once complete, so a reader never sees half an object.
 */
export class DiskBackend implements ObjectBackend {
  constructor(private readonly root: string) {}

  private fileOf(key: string): string {
    return path.join(this.root, ...checkKey(key).split("/"));
  }

  async write(key: string, body: Readable): Promise<StoredBytes> {
    const file = this.fileOf(key);
    await mkdir(path.dirname(file), { recursive: true });
    const partial = `${file}.${randomUUID()}.part`;
    const measure = measuring();
    try {
      await pipeline(body, measure.stream, createWriteStream(partial, { flags: "wx", mode: 0o600 }));
      await rename(partial, file);
    } catch (e) {
      await rm(partial, { force: true });
      throw e;
    }
    return measure.result();
  }

  async read(key: string, range?: ByteRange): Promise<Readable> {
    const stream = createReadStream(this.fileOf(key), range ?? {});
    // Opening is asynchronous: wait for it so a missing file is an answer (404), not a broken response.
    await new Promise<void>((resolve, reject) => {
      stream.once("open", () => resolve());
      stream.once("error", (e: NodeJS.ErrnoException) =>
        reject(e.code === "ENOENT" ? new ObjectMissing(key) : e),
      );
    });
    return stream;
  }

  async copy(from: string, to: string): Promise<void> {
    const target = this.fileOf(to);
    await mkdir(path.dirname(target), { recursive: true });
    await copyFile(this.fileOf(from), target).catch((e: NodeJS.ErrnoException) => {
      throw e.code === "ENOENT" ? new ObjectMissing(from) : e;
    });
  }

  async remove(keys: string[]): Promise<void> {
    await Promise.all(keys.map((key) => rm(this.fileOf(key), { force: true })));
  }

  async removeProject(ref: string): Promise<void> {
    await rm(path.join(this.root, checkRef(ref)), { recursive: true, force: true });
  }
}
