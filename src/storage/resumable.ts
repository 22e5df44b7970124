import { readdir, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";

/**
 * Where resumable uploads (`handlers/resumable.ts`) keep their parts until the last byte arrives: a file per
 * upload in the data directory, named by the upload's id, and its info file beside it.
 */

/** An upload not finished a day after it began is given up (its parts removed, its URL answered 404). */
export const EXPIRY_MS = 24 * 60 * 60 * 1000;
/** An upload's id, `<project ref>.<uuid>`: its parts are the file of that name, its info `<id>.json`. */
const UPLOAD_ID = /^([a-z]{20}\.[0-9a-f-]{36})(\.json)?$/;

export const partsDirOf = (dataDir: string) => path.join(dataDir, "storage-resumable");

/**
 * Removes the uploads begun over a day before `now` (their expiry): abandoned ones, and any a crash left
 * behind, with or without their info file. Returns how many.
 */
export async function removeExpiredUploads(dataDir: string, now = Date.now()): Promise<number> {
  const dir = partsDirOf(dataDir);
  const ids = new Set<string>();
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const id = UPLOAD_ID.exec(name)?.[1];
    if (id) ids.add(id);
  }
  let removed = 0;
  for (const id of ids) {
    const files = [path.join(dir, id), path.join(dir, `${id}.json`)];
    const info = await readFile(files[1], "utf8")
      .then((text) => JSON.parse(text) as { creation_date?: string })
      .catch(() => undefined);
    // Without its info file (written right after the parts' file), the parts' file tells when it began.
    const began = info?.creation_date
      ? Date.parse(info.creation_date)
      : (await stat(files[0]).catch(() => undefined))?.mtimeMs;
    if (began === undefined || !(now - began > EXPIRY_MS)) continue;
    await Promise.all(files.map((f) => rm(f, { force: true })));
    removed++;
  }
  return removed;
}
