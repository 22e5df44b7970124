import type { AppContext } from "../context";
import { withTransaction } from "../db/transaction";
import { claimDuty } from "../platform/duties";
import type { ObjectBackend } from "./backend";
import { DiskBackend } from "./backend/disk";
import { removeExpiredUploads } from "./resumable";
import { versionsWithoutRow } from "./store";

/**
 * The storage sweep: what a crash (or a failed clean-up) left behind, removed at start and then daily.
 *
 * - Partial files of cut-off writes: at once when their writer was a process of this host that is gone (a
 *   killed Strata), otherwise once untouched for a day (another node's write touches its file with every
 *   chunk). S3: multipart uploads begun over a day ago are aborted.
 * - Object files no `storage.objects` row points at (a crash between the bytes and their row, a removal
 *   that failed), once last written over a day ago: an upload writes its row right after its bytes, so a
 *   day-old file without a row will never get one. Only on disk: an S3 bucket also holds the backups, under
 *   keys of the same shape. A directory of a project unknown to the control plane is left alone (the data
 *   directory may have been pointed at another database).
 * - Resumable uploads past their expiry (a day after they began).
 */

export const SWEEP_AGE_MS = 24 * 60 * 60 * 1000;
const SWEEP_EVERY_MS = 24 * 60 * 60 * 1000;
/** Versions checked against the rows per statement. */
const BATCH = 10_000;

export interface SweepResult {
  unfinished: number;
  withoutRow: number;
  expiredUploads: number;
}

/** One sweep; `signal` (the server stopping) ends it between two projects. */
export async function sweepStorage(
  ctx: AppContext,
  backend: ObjectBackend,
  { now = Date.now(), signal }: { now?: number; signal?: AbortSignal } = {},
): Promise<SweepResult> {
  const staleBefore = new Date(now - SWEEP_AGE_MS);
  const unfinished = await backend.removeUnfinished(staleBefore);
  let withoutRow = 0;
  if (backend instanceof DiskBackend) {
    for await (const { ref, keys } of backend.keysWrittenBefore(staleBefore)) {
      if (signal?.aborted) break;
      withoutRow += await removeRowless(ctx, backend, ref, keys).catch((e: unknown) => {
        ctx.log.warn({ ref, err: (e as Error).message }, "storage sweep: a project's files were not checked");
        return 0;
      });
    }
  }
  const expiredUploads = await removeExpiredUploads(ctx.config, now);
  return { unfinished, withoutRow, expiredUploads };
}

/** Removes the keys of `ref` whose version no row holds; a project that cannot be asked keeps its files. */
async function removeRowless(
  ctx: AppContext,
  backend: ObjectBackend,
  ref: string,
  keys: string[],
): Promise<number> {
  const project = await ctx.registry.get(ref);
  if (!project || project.record.status !== "ACTIVE_HEALTHY") return 0;
  let removed = 0;
  for (let i = 0; i < keys.length; i += BATCH) {
    const versions = keys.slice(i, i + BATCH).map((key) => key.slice(ref.length + 1));
    // As the owner, who owns storage.objects (a view of its own there would run as whoever reads it).
    const orphans = await withTransaction(project.ownerPool, project.asOwnerScope, (c) =>
      versionsWithoutRow(c, versions),
    );
    await backend.remove(orphans.map((version) => `${ref}/${version}`));
    removed += orphans.length;
  }
  return removed;
}

/**
 * Sweeps the server's storage now (in the background: start-up does not wait) and then daily; an S3 bucket
 * only when this node claims the day's sweep. Returns what
 * stops it; a failed sweep is logged and tried again at the next turn.
 */
export function startStorageSweeper(ctx: AppContext): () => Promise<void> {
  const backend = ctx.storage;
  if (!backend) return async () => {};
  const stopping = new AbortController();
  let running: Promise<void> = Promise.resolve();
  // A bucket is every node's: one node sweeps it a day. A data directory is this node's own.
  const sweepOnce = async () =>
    backend instanceof DiskBackend || (await claimDuty(ctx.platformPool, "storage-sweep", SWEEP_EVERY_MS))
      ? sweepStorage(ctx, backend, { signal: stopping.signal })
      : undefined;
  const run = () => {
    running = sweepOnce().then(
      (result) => {
        if (result && Object.values(result).some((n) => n > 0))
          ctx.log.info(result, "storage sweep removed leftovers");
      },
      (e: unknown) => ctx.log.warn({ err: (e as Error).message }, "storage sweep failed"),
    );
  };
  run();
  const timer = setInterval(run, SWEEP_EVERY_MS);
  timer.unref();
  // Stopping waits for a sweep under way, which opens projects the server is about to close.
  return () => {
    stopping.abort();
    clearInterval(timer);
    return running;
  };
}
