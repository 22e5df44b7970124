import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";
import { HttpError } from "./http";

/**
 * The project a `/v1/projects/{ref}/...` route addresses, or 404. Routes that work inside the project's
 * database pass `{ database: true }`: a paused or unfinished project answers 400 instead of failing to connect.
 */
export async function projectOf(
  ctx: AppContext,
  ref: string,
  options: { database?: boolean } = {},
): Promise<ProjectRuntime> {
  const project = /^[a-z]{20}$/.test(ref) ? await ctx.registry.get(ref) : undefined;
  if (!project) throw new HttpError(404, `Project ${ref} not found`);
  if (options.database && project.record.status !== "ACTIVE_HEALTHY") {
    throw new HttpError(
      400,
      `Project ${ref} is ${project.record.status}; its database is not available (restore the project first)`,
    );
  }
  return project;
}
