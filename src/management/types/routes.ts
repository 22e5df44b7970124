import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { routeTable } from "../route";
import { generateTypescript } from "./typescript";

export function typeRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  routes.get(
    "/v1/projects/:ref/types/typescript",
    "Generates TypeScript types of the database for the platform's JavaScript client",
    {
      access: { permission: "database_read", scope: "database:read" },
      query: z.object({
        included_schemas: z
          .string()
          .regex(
            /^[A-Za-z_][A-Za-z0-9_$]*(,[A-Za-z_][A-Za-z0-9_$]*)*$/,
            "must be a comma-separated list of schema names",
          )
          .optional(),
      }),
      status: 200,
    },
    async ({ project, query }) => {
      const schemas = (query.included_schemas ?? "public").split(",");
      return { types: await generateTypescript(project, schemas) };
    },
  );
  return routes.router;
}
