import type { Request } from "express";
import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";

/** Why a data request has no project to run against. */
export class ProjectUnavailable extends Error {
  constructor(
    readonly status: 404 | 503,
    message: string,
  ) {
    super(message);
  }
}

/** The project ref a Host header names (`<ref>.<STRATA_DOMAIN>`), or undefined for the default project. */
export function refOfHost(ctx: AppContext, hostHeader: string | undefined): string | undefined {
  const host = (hostHeader ?? "").split(":")[0].toLowerCase();
  const suffix = "." + ctx.config.domain;
  const ref = host.endsWith(suffix) ? host.slice(0, -suffix.length) : undefined;
  return ref && /^[a-z]{20}$/.test(ref) ? ref : undefined;
}

/**
 * The project a data request addresses: `<ref>.<STRATA_DOMAIN>` picks that project, any other host the
 * default one. A paused project answers 503.
 */
export async function projectOfRequest(ctx: AppContext, req: Request): Promise<ProjectRuntime> {
  const ref = refOfHost(ctx, req.headers.host);
  const project = ref ? await ctx.registry.get(ref) : undefined;
  if (ref && !project) throw new ProjectUnavailable(404, `Project ${ref} not found`);
  const runtime = project ?? (await ctx.registry.getDefault());
  if (runtime.record.status === "INACTIVE" || runtime.record.status === "PAUSING") {
    throw new ProjectUnavailable(503, "Project is paused; restore it to use its APIs");
  }
  if (runtime.record.status !== "ACTIVE_HEALTHY") {
    throw new ProjectUnavailable(503, `Project is not ready (status ${runtime.record.status})`);
  }
  return runtime;
}
