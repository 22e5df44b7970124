import { createHash } from "node:crypto";
import { createReadStream, type Dirent } from "node:fs";
import { copyFile, mkdir, open, readdir, rename, rm, stat, type FileHandle } from "node:fs/promises";
import os from "node:os";
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
import { processAlive } from "../../processAlive";

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
 * Who writes a partial file: this host (a short hash of its name) and process. A later start on the same host
 * knows a partial file whose writer is no longer running as a crash's leftover, whatever its age.
 */
const HOST = createHash("sha256").update(os.hostname()).digest("hex").slice(0, 12);
const WRITER = `${HOST}-${process.pid}`;
/** `<version>.<host>-<pid>.part`, or `<version>.<uuid>.part` as writes named them before. */
const PARTIAL = /^[0-9a-f-]{36}\.(?:([0-9a-f]{12})-(\d+)|[0-9a-f-]{36})\.part$/;
const OBJECT = /^[0-9a-f-]{36}$/;

/** Whether a partial file's writer is known to be gone: another process of this host that no longer runs. */
function writerGone(name: string): boolean {
  const [, host, pid] = PARTIAL.exec(name) ?? [];
  return host === HOST && Number(pid) !== process.pid && !processAlive(Number(pid));
}

/**
 * Creates a partial file (it must not exist yet), and the project's directory first when it has none: the
 * directory is only made when the file cannot be (a stat and a mkdir less on every write into one that exists).
 */
async function createPartial(partial: string): Promise<FileHandle> {
  const create = () => open(partial, "wx", 0o600);
  try {
    return await create();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    await mkdir(path.dirname(partial), { recursive: true });
    return create();
  }
}

/**
 * Bytes as files under a directory (the data directory's `storage/` by default). A write goes to a
 * temporary file (`<key>.<writer>.part`) renamed into place once complete, so a reader never sees half an
 * object.
 */
export class DiskBackend implements ObjectBackend {
  constructor(private readonly root: string) {}

  private fileOf(key: string): string {
    return path.join(this.root, ...checkKey(key).split("/"));
  }

  async write(key: string, body: Readable): Promise<StoredBytes> {
    const file = this.fileOf(key);
    const partial = `${file}.${WRITER}.part`;
    const handle = await createPartial(partial);
    const measure = measuring();
    try {
      await pipeline(body, measure.stream, handle.createWriteStream());
      await rename(partial, file);
    } catch (e) {
      await rm(partial, { force: true });
      throw e;
    }
    return measure.result();
  }

  async read(key: string, range?: ByteRange, size?: number): Promise<Readable> {
    // The whole object up to its known size: the stream ends with its last byte, without a read that finds EOF.
    // (A row's metadata is the tenant's to edit: a size that is no byte count reads to the end.)
    const whole = Number.isSafeInteger(size) && size! > 0 ? { start: 0, end: size! - 1 } : {};
    const stream = createReadStream(this.fileOf(key), range ?? whole);
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

  /** The files named like `shape` in each project's directory, with when each was last written. */
  private async *files(
    shape: RegExp,
  ): AsyncGenerator<{ ref: string; entries: { name: string; mtime: Date }[] }> {
    const refs = await readdir(this.root, { withFileTypes: true }).catch(() => [] as Dirent[]);
    for (const dir of refs) {
      if (!dir.isDirectory() || !/^[a-z]{20}$/.test(dir.name)) continue;
      const names = await readdir(path.join(this.root, dir.name)).catch(() => [] as string[]);
      const entries = [];
      for (const name of names.filter((n) => shape.test(n))) {
        // A file removed meanwhile (a finished write's partial, a deleted object) is no longer there to sweep.
        const info = await stat(path.join(this.root, dir.name, name)).catch(() => undefined);
        if (info?.isFile()) entries.push({ name, mtime: info.mtime });
      }
      yield { ref: dir.name, entries };
    }
  }

  /**
   * Removes the partial files of cut-off writes: those whose writer on this host is gone, and any other
   * untouched since `staleBefore` (a live write touches its file with every chunk). Returns how many.
   */
  async removeUnfinished(staleBefore: Date): Promise<number> {
    let removed = 0;
    for await (const { ref, entries } of this.files(PARTIAL)) {
      for (const { name, mtime } of entries) {
        if (!writerGone(name) && mtime >= staleBefore) continue;
        await rm(path.join(this.root, ref, name), { force: true });
        removed++;
      }
    }
    return removed;
  }

  /** Each project's object keys last written before `before`. */
  async *keysWrittenBefore(before: Date): AsyncGenerator<{ ref: string; keys: string[] }> {
    for await (const { ref, entries } of this.files(OBJECT)) {
      const keys = entries.filter(({ mtime }) => mtime < before).map(({ name }) => `${ref}/${name}`);
      if (keys.length) yield { ref, keys };
    }
  }
}
