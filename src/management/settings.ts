import type { AppContext } from "../context";
import type { DocumentStore } from "./configDocument";

/**
 * Document-style configuration of a project (`platform.project_settings`): each family keeps its own kind,
 * read merged over the family's defaults so a fresh project answers the full shape.
 */
export async function readSettings<T extends object>(
  ctx: AppContext,
  ref: string,
  kind: string,
  defaults: T,
): Promise<T> {
  const { rows } = await ctx.platformPool.query(
    "select value from platform.project_settings where project_ref = $1 and kind = $2",
    [ref, kind],
  );
  return { ...defaults, ...(rows[0]?.value ?? {}) };
}

/** Merges `patch` into the stored document and answers the whole result. */
export async function writeSettings<T extends object>(
  ctx: AppContext,
  ref: string,
  kind: string,
  defaults: T,
  patch: Partial<T>,
): Promise<T> {
  const { rows } = await ctx.platformPool.query(
    `insert into platform.project_settings (project_ref, kind, value) values ($1, $2, $3::jsonb)
     on conflict (project_ref, kind) do update set value = project_settings.value || excluded.value, updated_at = now()
     returning value`,
    [ref, kind, JSON.stringify(patch)],
  );
  return { ...defaults, ...rows[0].value };
}

/** The family's document of `kind` as a store of configDocument.ts. */
export function settingsDocument<T extends object>(
  ctx: AppContext,
  kind: string,
  defaults: T,
): DocumentStore<T> {
  return {
    read: (ref) => readSettings(ctx, ref, kind, defaults),
    write: (ref, changes) => writeSettings(ctx, ref, kind, defaults, changes),
  };
}
