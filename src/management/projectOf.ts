import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";
import { HttpError } from "./http";

/** The project a `/v1/projects/{ref}/...` route addresses, or 404. */
export async function projectOf(ctx: AppContext, ref: string): Promise<ProjectRuntime> {
  const project = /^[a-z]{20}$/.test(ref) ? await ctx.registry.get(ref) : undefined;
  if (!project) throw new HttpError(404, `Project ${ref} not found`);
  return project;
}
