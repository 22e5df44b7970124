import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { found, HttpError } from "../http";
import { routeTable } from "../route";
import { getSnippet, listSnippets, type SnippetRow } from "./store";

/** SQL snippets of the caller, with the platform's cursor pagination (`cursor`, `limit`, `sort_by`, `sort_order`). */

const ListQuery = z.object({
  project_ref: z
    .string()
    .regex(/^[a-z]{20}$/, "must be a project ref")
    .optional(),
  cursor: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(100).default(100),
  sort_by: z.enum(["name", "inserted_at"]).default("inserted_at"),
  sort_order: z.enum(["asc", "desc"]).default("desc"),
});

function snippetJson(r: SnippetRow) {
  return {
    id: r.id,
    inserted_at: new Date(r.inserted_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
    type: "sql",
    visibility: r.visibility,
    name: r.name,
    description: r.description ?? "",
    project: { id: r.project_id ?? 0, name: r.project_name ?? "" },
    owner: { id: 0, username: r.username },
    updated_by: { id: 0, username: r.username },
    favorite: r.favorite,
  };
}

export function snippetRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const access = { permission: "snippets_read", scope: "database:read" };
  routes.get(
    "/v1/snippets",
    "Lists the caller's SQL snippets",
    { access, query: ListQuery, status: 200 },
    async ({ req, query }) => {
      // The cursor is the offset of the next page, opaque to clients.
      const offset = query.cursor ? Number(Buffer.from(query.cursor, "base64url").toString()) : 0;
      if (!Number.isInteger(offset) || offset < 0)
        throw new HttpError(400, "Invalid query: cursor: unknown cursor");
      const rows = await listSnippets(ctx.platformPool, req.principal!, {
        projectRef: query.project_ref ?? null,
        sortBy: query.sort_by,
        ascending: query.sort_order === "asc",
        limit: query.limit + 1,
        offset,
      });
      const page = rows.slice(0, query.limit).map(snippetJson);
      return {
        data: page,
        ...(rows.length > query.limit
          ? { cursor: Buffer.from(String(offset + query.limit)).toString("base64url") }
          : {}),
      };
    },
  );
  routes.get(
    "/v1/snippets/:id",
    "Gets one SQL snippet with its content",
    { access, status: 200 },
    async ({ req, params }) => {
      const snippet = found(
        await getSnippet(ctx.platformPool, req.principal!, params.id),
        "Snippet",
        params.id,
      );
      return { ...snippetJson(snippet), content: snippet.content };
    },
  );
  return routes.router;
}
