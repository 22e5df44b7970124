import { Router, type Request, type Response } from "express";
import { z } from "zod";
import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";
import { checkAccess, found, HttpError, type Access } from "./http";
import { requireFeature, type Feature } from "./billing/plans";
import { organizationOf } from "./membership";
import type { OrganizationRow } from "./organizations/store";

type Method = "get" | "post" | "put" | "patch" | "delete";

/**
 * The project a `/v1/projects/:ref/...` operation works on, loaded before its handler runs: `any` status, or
 * `database` for operations inside the project's database (a paused or unfinished project answers 400).
 */
export type ProjectNeed = "any" | "database";

/** A limit stricter than the standard one (or with a longer window), as the spec sets on some endpoints. */
export interface RouteLimit {
  /** Names the counter, unique among the routes' limits. */
  name: string;
  points: number;
  seconds: number;
}

/** What one Management API operation declares besides its method, path and summary. */
export interface RouteOptions<
  B extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  P extends ProjectNeed | undefined = ProjectNeed | undefined,
  O extends boolean | undefined = boolean | undefined,
> {
  access: Access;
  body?: B;
  query?: Q;
  /** Success status, exactly as the spec lists it. */
  status: number;
  /** Shape of the success body, for the OpenAPI document. */
  response?: z.ZodType;
  /** The project the handler receives (`:ref`). */
  project?: P;
  /** The handler receives the organization `:slug` (one of the caller's, else 404). */
  organization?: O;
  /** Limits besides the standard one (see rateLimit.ts). */
  rateLimits?: RouteLimit[];
  /** A feature the `:ref` project's plan or add-ons must give (402, or the spec's 400), checked before the handler. */
  feature?: { name: Feature; status?: 400 };
}

/** One Management API operation: its path, access rule, validated inputs and success status. */
export interface RouteSpec extends RouteOptions {
  method: Method;
  /** Express path, e.g. `/v1/projects/:ref/api-keys/:id`. */
  path: string;
  summary: string;
}

export interface RouteInput<
  B extends z.ZodType,
  Q extends z.ZodType,
  P extends ProjectNeed | undefined,
  O extends boolean | undefined = undefined,
> {
  req: Request;
  res: Response;
  params: Record<string, string>;
  body: z.infer<B>;
  query: z.infer<Q>;
  /** The `:ref` project, when the spec asks for it. */
  project: P extends ProjectNeed ? ProjectRuntime : undefined;
  /** The `:slug` organization, when the spec asks for it. */
  organization: O extends true ? OrganizationRow : undefined;
}

/** Every registered operation; GET /v1/openapi.json is derived from this list. */
export const managementRoutes: RouteSpec[] = [];

function firstIssue(error: z.ZodError, where: string): string {
  const issue = error.issues[0];
  const field = issue.path.length ? issue.path.join(".") : where;
  return `Invalid ${where}: ${field}: ${issue.message}`;
}

/** The project a route addresses, or 404; with `database`, 400 when its database is not available. */
async function loadProject(ctx: AppContext, ref: string, need: ProjectNeed): Promise<ProjectRuntime> {
  const project = found(/^[a-z]{20}$/.test(ref) ? await ctx.registry.get(ref) : undefined, "Project", ref);
  if (need === "database" && project.record.status !== "ACTIVE_HEALTHY") {
    throw new HttpError(
      400,
      `Project ${ref} is ${project.record.status}; its database is not available (restore the project first)`,
    );
  }
  return project;
}

/**
 * The membership check ran on the path as sent; the route's own parameters must name what it checked, so that
 * no spelling of a path (case, encoding) reaches a project or organization that was not checked.
 */
function refuseUncheckedMembership(req: Request, path: string, params: Record<string, string>) {
  if (path.startsWith("/v1/projects/:ref") || path.startsWith("/v2/projects/:ref")) {
    if (req.membership?.project !== params.ref) throw new HttpError(404, `Project ${params.ref} not found`);
  } else if (path.startsWith("/v1/organizations/:slug")) {
    if (req.membership?.organization !== params.slug) {
      throw new HttpError(404, `Organization ${params.slug} not found`);
    }
  }
}

/** A handler as `mount` sees it: the route table's `Register` gives handlers their inputs' types. */
type AnyHandler = (
  input: RouteInput<z.ZodType, z.ZodType, ProjectNeed | undefined, boolean | undefined>,
) => Promise<unknown>;

/**
 * Mounts an operation on `router`: checks the token's access, validates body and query (400 naming the
 * field), loads the project the spec asks for, runs the handler and answers its result with the spec's
 * status. A handler that already answered (e.g. 204 with no body) returns undefined after doing so.
 */
function mount(ctx: AppContext, router: Router, spec: RouteSpec, handler: AnyHandler): void {
  managementRoutes.push(spec);
  router[spec.method](spec.path, async (req: Request, res: Response, next) => {
    try {
      checkAccess(req.principal!, spec.access, req.membership);
      let body: unknown = req.body;
      if (spec.body) {
        const parsed = spec.body.safeParse(req.body ?? {});
        if (!parsed.success) throw new HttpError(400, firstIssue(parsed.error, "body"));
        body = parsed.data;
      }
      let query: unknown = req.query;
      if (spec.query) {
        const parsed = spec.query.safeParse(req.query ?? {});
        if (!parsed.success) throw new HttpError(400, firstIssue(parsed.error, "query"));
        query = parsed.data;
      }
      const params = req.params as Record<string, string>;
      refuseUncheckedMembership(req, spec.path, params);
      const project = spec.project ? await loadProject(ctx, params.ref, spec.project) : undefined;
      const organization = spec.organization
        ? await organizationOf(ctx, req.principal!, params.slug)
        : undefined;
      if (spec.feature)
        await requireFeature(ctx.platformPool, params.ref, spec.feature.name, spec.feature.status);
      const result = await handler({ req, res, params, body, query, project, organization });
      if (!res.headersSent) {
        if (result === undefined) res.status(spec.status).end();
        else res.status(spec.status).json(result);
      }
    } catch (e) {
      next(e);
    }
  });
}

type Register<F extends ProjectNeed | undefined> = <
  B extends z.ZodType = z.ZodUnknown,
  Q extends z.ZodType = z.ZodUnknown,
  P extends ProjectNeed | undefined = F,
  O extends boolean | undefined = undefined,
>(
  path: string,
  summary: string,
  options: RouteOptions<B, Q, P, O>,
  handler: (input: RouteInput<B, Q, P, O>) => Promise<unknown>,
) => void;

/** A resource family's operations, one line of the table each: `routes.get(path, summary, options, handler)`. */
export type RouteTable<F extends ProjectNeed | undefined> = { router: Router } & Record<Method, Register<F>>;

/**
 * The route table of one resource family, on a router of its own. `project` is what the family's operations
 * load as `:ref` unless one declares its own (most of a family's operations address the project alike).
 */
export function routeTable<F extends ProjectNeed | undefined = undefined>(
  ctx: AppContext,
  family: { project?: F } = {},
): RouteTable<F> {
  const router = Router({ caseSensitive: true });
  const register =
    (method: Method): Register<F> =>
    (path, summary, options, handler) =>
      mount(
        ctx,
        router,
        { project: family.project, ...options, method, path, summary } as RouteSpec,
        handler as AnyHandler,
      );
  return {
    router,
    get: register("get"),
    post: register("post"),
    put: register("put"),
    patch: register("patch"),
    delete: register("delete"),
  };
}
