import type { Readable } from "node:stream";

/** What a backend reports of bytes it stored. */
export interface StoredBytes {
  size: number;
  /** The MD5 of the bytes, hex, as S3 reports an ETag of a single-part upload. */
  md5: string;
}

/** An inclusive byte range of a read (`Range: bytes=start-end`). */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Where object bytes live. Keys are opaque (`<project ref>/<version id>`): names, moves and permissions are
 * the metadata's business, so a rename never moves bytes. A write is all or nothing: a failed or cut-off
 * stream leaves no object under the key.
 */
export interface ObjectBackend {
  write(key: string, body: Readable): Promise<StoredBytes>;
  /**
   * The bytes (or a range of them); rejects with ObjectMissing when the key holds nothing. `size`: the object's
   * size as its row records it, when known (a reader may stop there instead of reading on to find the end).
   */
  read(key: string, range?: ByteRange, size?: number): Promise<Readable>;
  copy(from: string, to: string): Promise<void>;
  /** Removes the keys; a key that holds nothing is not an error. */
  remove(keys: string[]): Promise<void>;
  /** Removes every object of a project (its keys start with `<ref>/`), when the project is deleted. */
  removeProject(ref: string): Promise<void>;
  /**
   * Removes what writes cut off by a crash left behind (partial files, unfinished multipart uploads): those
   * known to be abandoned, and any not written to since `staleBefore`. Returns how many.
   */
  removeUnfinished(staleBefore: Date): Promise<number>;
  close?(): Promise<void>;
}

/** A project ref as it starts every storage key. */
export function checkRef(ref: string): string {
  if (!/^[a-z]{20}$/.test(ref)) throw new Error(`invalid project ref ${JSON.stringify(ref)}`);
  return ref;
}

export class ObjectMissing extends Error {
  constructor(key: string) {
    super(`no stored bytes under ${key}`);
  }
}

/** Whether a key has the shape of Strata's keys, `<project ref>/<version id>`. */
export function isKey(key: string): boolean {
  return /^[a-z]{20}\/[0-9a-f-]{36}$/.test(key);
}

/** Object keys are generated, never user input; still, a backend refuses any other shape. */
export function checkKey(key: string): string {
  if (!isKey(key)) throw new Error(`invalid storage key ${JSON.stringify(key)}`);
  return key;
}
