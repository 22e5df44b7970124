import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { HttpError } from "../http";

/** The project a per-project route acts on; 404 when the ref names none. */
export async function projectOf(ctx: AppContext, ref: string): Promise<ProjectRuntime> {
  const project = await ctx.registry.get(ref);
  if (!project) throw new HttpError(404, `Project ${ref} not found`);
  return project;
}
