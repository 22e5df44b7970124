import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { found, HttpError } from "../http";
import { routeTable } from "../route";
import { deleteSnippet, getSnippet, insertSnippet, listSnippets, type SnippetRow } from "./store";

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

const ProjectRef = z.string().regex(/^[a-z]{20}$/, "must be a project ref");

/** A snippet to save: Studio's SQL editor writes them, the spec's GET endpoints read them. */
const NewSnippet = z.object({
  name: z.string().trim().min(1).max(256),
  description: z.string().max(4096).optional(),
  project_ref: ProjectRef.optional(),
  sql: z.string().max(1_000_000),
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
  // Beyond the spec, which only reads snippets: whoever may run SQL may save it (and delete their own).
  const write = { permission: "database_write", scope: "database:write" };
  routes.post(
    "/v1/snippets",
    "Saves a new SQL snippet of the caller",
    { access: write, body: NewSnippet, status: 201 },
    async ({ req, body }) => {
      const owner = req.principal!;
      const id = await insertSnippet(ctx.platformPool, owner, {
        name: body.name,
        description: body.description ?? null,
        projectRef: body.project_ref ?? null,
        sql: body.sql,
      });
      if (!id) throw new HttpError(404, `Project ${body.project_ref} not found`);
      const snippet = (await getSnippet(ctx.platformPool, owner, id))!;
      return { ...snippetJson(snippet), content: snippet.content };
    },
  );
  routes.delete(
    "/v1/snippets/:id",
    "Deletes one SQL snippet of the caller",
    { access: write, status: 200 },
    async ({ req, params }) => {
      if (!(await deleteSnippet(ctx.platformPool, req.principal!, params.id)))
        throw new HttpError(404, `Snippet ${params.id} not found`);
      return { id: params.id };
    },
  );
  return routes.router;
}
