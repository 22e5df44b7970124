import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { route } from "../route";
import { readSettings } from "../settings";

/** Custom hostname and vanity subdomain (stored; availability is checked against every project's choice). */
export function domainRoutes(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path: "/v1/projects/:ref/custom-hostname",
      summary: "Gets the custom hostname",
      access: { permission: "custom_domain_read", scope: "domains:read" },
      status: 200,
    },
    async ({ project }) => {
      const h = await readSettings(ctx, project.ref, "custom_hostname", { hostname: "" });
      return {
        status: h.hostname ? "2_initiated" : "1_not_started",
        custom_hostname: h.hostname,
        data: {
          success: true,
          errors: [],
          messages: [],
          result: {
            id: project.ref,
            hostname: h.hostname,
            ssl: { status: "pending_validation", validation_records: [] },
            ownership_verification: { type: "txt", name: "", value: "" },
            custom_origin_server: `${project.ref}.${ctx.config.domain}`,
            status: "pending",
          },
        },
      };
    },
  );
  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path: "/v1/projects/:ref/vanity-subdomain",
      rateLimits: [{ name: "GET vanity-subdomain", points: 10, seconds: 60 }],
      summary: "Gets the vanity subdomain",
      access: { permission: "vanity_subdomain_read", scope: "domains:read" },
      status: 200,
    },
    async ({ project }) => {
      const v = await readSettings(ctx, project.ref, "vanity_subdomain", {
        subdomain: "",
      });
      return v.subdomain
        ? { status: "active", custom_domain: `${v.subdomain}.${ctx.config.domain}` }
        : { status: "not-used" };
    },
  );
  route(
    ctx,
    router,
    {
      method: "post",
      project: "any",
      path: "/v1/projects/:ref/vanity-subdomain/check-availability",
      summary: "Checks whether a vanity subdomain is free",
      access: { permission: "vanity_subdomain_write", scope: "domains:write" },
      body: z.object({
        vanity_subdomain: z
          .string()
          .regex(/^[a-z0-9][a-z0-9-]{2,62}$/, "must be 3-63 lowercase letters, digits or dashes"),
      }),
      status: 201,
    },
    async ({ body }) => {
      const { rows } = await ctx.platformPool.query(
        "select 1 from platform.project_settings where kind = 'vanity_subdomain' and value ->> 'subdomain' = $1 union all select 1 from platform.projects where ref = $1",
        [body.vanity_subdomain],
      );
      return { available: rows.length === 0 };
    },
  );
  return router;
}
