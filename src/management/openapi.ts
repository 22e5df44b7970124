import { Router } from "express";
import { z } from "zod";
import { managementRoutes, type RouteSpec } from "./route";

function jsonSchema(schema: z.ZodType, io: "input" | "output"): unknown {
  return z.toJSONSchema(schema, { io, unrepresentable: "any" });
}

/** The spec's permission rule as OpenAPI extension text, e.g. `project_admin_read and database_read`. */
function permissionText(spec: RouteSpec): string | undefined {
  const rule = spec.access.permission;
  if (rule === undefined || typeof rule === "string") return rule;
  return "and" in rule ? rule.and.join(" and ") : rule.or.join(" or ");
}

function operation(spec: RouteSpec): Record<string, unknown> {
  const params = [...spec.path.matchAll(/:(\w+)/g)].map((m) => ({
    name: m[1],
    in: "path",
    required: true,
    schema: { type: "string" },
  }));
  if (spec.query) {
    const query = jsonSchema(spec.query, "input") as {
      properties?: Record<string, unknown>;
      required?: string[];
    };
    for (const [name, schema] of Object.entries(query.properties ?? {}))
      params.push({ name, in: "query", required: query.required?.includes(name) ?? false, schema } as never);
  }
  const success = spec.response
    ? {
        description: "Success",
        content: { "application/json": { schema: jsonSchema(spec.response, "output") } },
      }
    : { description: "Success" };
  const error = { $ref: "#/components/responses/Error" };
  return {
    summary: spec.summary,
    parameters: params,
    ...(spec.body
      ? {
          requestBody: {
            required: true,
            content: { "application/json": { schema: jsonSchema(spec.body, "input") } },
          },
        }
      : {}),
    security: [{ bearer: spec.access.scope ? [spec.access.scope] : [] }],
    ...(permissionText(spec) ? { "x-permission": permissionText(spec) } : {}),
    responses: { [spec.status]: success, 400: error, 401: error, 403: error, 404: error, 429: error },
  };
}

/** Strata's OpenAPI document for the Management API, derived from the registered routes' own schemas. */
export function managementOpenApi(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of managementRoutes) {
    const path = spec.path.replace(/:(\w+)/g, "{$1}");
    (paths[path] ??= {})[spec.method] = operation(spec);
  }
  return {
    openapi: "3.1.0",
    info: { title: "Strata Management API", version: "1.0.0" },
    paths,
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      responses: {
        Error: {
          description: "Error",
          content: {
            "application/json": {
              schema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
            },
          },
        },
      },
    },
  };
}

/** GET /v1/openapi.json: public, like any API description; built once the routers are registered. */
export function openApiRoute(): Router {
  const router = Router({ caseSensitive: true });
  let document: Record<string, unknown> | undefined;
  router.get("/v1/openapi.json", (_req, res) => {
    document ??= managementOpenApi();
    res.json(document);
  });
  return router;
}
