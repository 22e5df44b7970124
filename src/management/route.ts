import type { Request, Response, Router } from "express";
import { z } from "zod";
import { checkAccess, HttpError, type Access } from "./http";

type Method = "get" | "post" | "put" | "patch" | "delete";

/** One Management API operation: its path, access rule, validated inputs and success status. */
export interface RouteSpec<B extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType> {
  method: Method;
  /** Express path, e.g. `/v1/projects/:ref/api-keys/:id`. */
  path: string;
  summary: string;
  access: Access;
  body?: B;
  query?: Q;
  /** Success status, exactly as the spec lists it. */
  status: number;
  /** Shape of the success body, for the OpenAPI document. */
  response?: z.ZodType;
}

export interface RouteInput<B extends z.ZodType, Q extends z.ZodType> {
  req: Request;
  res: Response;
  params: Record<string, string>;
  body: z.infer<B>;
  query: z.infer<Q>;
}

/** Every registered operation; GET /v1/openapi.json is derived from this list. */
export const managementRoutes: RouteSpec[] = [];

function firstIssue(error: z.ZodError, where: string): string {
  const issue = error.issues[0];
  const field = issue.path.length ? issue.path.join(".") : where;
  return `Invalid ${where}: ${field}: ${issue.message}`;
}

/**
 * Registers an operation on `router`: checks the token's access, validates body and query (400 naming the
 * field), runs the handler and answers its result with the spec's status. A handler that already answered
 * (e.g. 204 with no body) returns undefined after doing so.
 */
export function route<B extends z.ZodType = z.ZodUnknown, Q extends z.ZodType = z.ZodUnknown>(
  router: Router,
  spec: RouteSpec<B, Q>,
  handler: (input: RouteInput<B, Q>) => Promise<unknown>,
): void {
  managementRoutes.push(spec as RouteSpec);
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
      const result = await handler({
        req,
        res,
        params: req.params as Record<string, string>,
        body: body as z.infer<B>,
        query: query as z.infer<Q>,
      });
      if (!res.headersSent) {
        if (result === undefined) res.status(spec.status).end();
        else res.status(spec.status).json(result);
      }
    } catch (e) {
      next(e);
    }
  });
}
