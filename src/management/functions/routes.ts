import { rm } from "node:fs/promises";
import express, { Router, type Request } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import {
  functionDir,
  InvalidDeployment,
  publishVersion,
  pruneVersions,
  relativeFilePath,
  removeFunctionFiles,
  stageDeployment,
} from "../../functions/files";
import { functionRuntimeOf } from "../../functions/runtime";
import { HttpError } from "../http";
import type { ProjectRuntime } from "../../projects/runtime";
import { route } from "../route";

/**
 * Edge functions: metadata and files in the control plane; each version's files are also written
 * under the data directory, where workers run them (src/functions). A deployment that does not parse
 * is refused and the previous version keeps serving.
 */

const Slug = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]*$/, "must start with a letter and hold letters, digits, - or _")
  .max(100);
const read = { permission: "edge_functions_read", scope: "edge_functions:read" };
const write = { permission: "edge_functions_write", scope: "edge_functions:write" };

function functionJson(r: any) {
  return {
    id: r.id,
    slug: r.slug,
    name: r.name,
    status: r.status,
    version: r.version,
    created_at: new Date(r.created_at).getTime(),
    updated_at: new Date(r.updated_at).getTime(),
    verify_jwt: r.verify_jwt,
    import_map: r.import_map,
    entrypoint_path: r.entrypoint_path ?? undefined,
    import_map_path: r.import_map_path ?? undefined,
  };
}

/** Reads `metadata` and `file` parts of a multipart deploy with the platform's Fetch implementation. */
async function readDeploy(req: Request) {
  const type = req.headers["content-type"] ?? "";
  if (!type.startsWith("multipart/form-data") || !Buffer.isBuffer(req.body))
    throw new HttpError(400, "Invalid body: expected multipart/form-data with metadata and file parts");
  const form = await new Response(req.body, { headers: { "content-type": type } }).formData();
  let metadata: Record<string, unknown>;
  try {
    metadata = JSON.parse(String(form.get("metadata") ?? "{}"));
  } catch {
    throw new HttpError(400, "Invalid body: metadata: must be JSON");
  }
  const files = await Promise.all(
    form
      .getAll("file")
      .map(async (f) =>
        typeof f === "string" ? { name: "index.ts", content: f } : { name: f.name, content: await f.text() },
      ),
  );
  if (!files.length) throw new HttpError(400, "Invalid body: file: at least one file is required");
  return { metadata, files };
}

export function functionRoutes(ctx: AppContext): Router {
  const router = Router();
  const base = "/v1/projects/:ref/functions";
  router.post(`${base}/deploy`, express.raw({ type: "multipart/form-data", limit: "20mb" }));

  route(
    ctx,
    router,
    { method: "get", project: "any", path: base, summary: "Lists edge functions", access: read, status: 200 },
    async ({ project }) => {
      const { rows } = await ctx.platformPool.query(
        "select * from platform.edge_functions where project_ref = $1 order by slug",
        [project.ref],
      );
      return rows.map(functionJson);
    },
  );

  route(
    ctx,
    router,
    {
      method: "post",
      project: "any",
      path: `${base}/deploy`,
      summary: "Deploys (creates or updates) a function from its files",
      access: write,
      query: z.object({ slug: Slug.optional(), bundleOnly: z.string().optional() }),
      status: 201,
    },
    async ({ project, req, query }) => {
      const { metadata, files } = await readDeploy(req);
      const slug = Slug.safeParse(query.slug ?? metadata.name);
      if (!slug.success) throw new HttpError(400, `Invalid query: slug: ${slug.error.issues[0].message}`);
      const entrypoint = String(metadata.entrypoint_path ?? "index.ts");
      const importMap = metadata.import_map_path ? String(metadata.import_map_path) : undefined;
      const staging = await stageDeployment(
        ctx.config.dataDir,
        project.ref,
        files,
        entrypoint,
        importMap,
      ).catch((e) => {
        if (e instanceof InvalidDeployment) throw new HttpError(400, `Invalid deployment: ${e.message}`);
        throw e;
      });
      const stored = await ctx.platformPool
        .query(
          `insert into platform.edge_functions (project_ref, slug, name, verify_jwt, entrypoint_path, import_map_path, files)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (project_ref, slug) do update set name = excluded.name, verify_jwt = excluded.verify_jwt,
           entrypoint_path = excluded.entrypoint_path, import_map_path = excluded.import_map_path, files = excluded.files,
           version = edge_functions.version + 1, updated_at = now()
         returning *`,
          [
            project.ref,
            slug.data,
            String(metadata.name ?? slug.data),
            metadata.verify_jwt !== false,
            relativeFilePath(entrypoint),
            importMap === undefined ? null : relativeFilePath(importMap),
            JSON.stringify(files),
          ],
        )
        .catch(async (e) => {
          await rm(staging, { recursive: true, force: true });
          throw e;
        });
      const fn = stored.rows[0];
      await publishVersion(staging, functionDir(ctx.config.dataDir, project.ref, fn.slug, fn.version));
      await pruneVersions(ctx.config.dataDir, project.ref, fn.slug, fn.version);
      return functionJson(fn);
    },
  );

  route(
    ctx,
    router,
    {
      method: "put",
      project: "any",
      path: base,
      summary: "Bulk-updates functions' metadata",
      access: write,
      body: z.array(
        z.object({
          id: z.string(),
          slug: Slug,
          name: z.string(),
          status: z.enum(["ACTIVE", "REMOVED", "THROTTLED"]),
          version: z.number().int().min(1),
          verify_jwt: z.boolean().optional(),
          entrypoint_path: z.string().optional(),
        }),
      ),
      status: 200,
    },
    async ({ project, body }) => {
      const updated = [];
      for (const f of body) {
        const { rows } = await ctx.platformPool.query(
          `update platform.edge_functions set name = $3, status = $4, version = $5, verify_jwt = coalesce($6, verify_jwt),
             entrypoint_path = coalesce($7, entrypoint_path), updated_at = now()
           where project_ref = $1 and slug = $2 returning *`,
          [project.ref, f.slug, f.name, f.status, f.version, f.verify_jwt ?? null, f.entrypoint_path ?? null],
        );
        if (!rows.length) throw new HttpError(404, `Function ${f.slug} not found`);
        updated.push(functionJson(rows[0]));
      }
      return { functions: updated };
    },
  );

  const one = async (project: ProjectRuntime, slug: string) => {
    const { rows } = await ctx.platformPool.query(
      "select * from platform.edge_functions where project_ref = $1 and slug = $2",
      [project.ref, slug],
    );
    if (!rows.length) throw new HttpError(404, `Function ${slug} not found`);
    return rows[0];
  };
  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path: `${base}/:slug`,
      summary: "Gets a function",
      access: read,
      status: 200,
    },
    async ({ project, params }) => functionJson(await one(project, params.slug)),
  );
  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path: `${base}/:slug/body`,
      summary: "Gets a function's files",
      access: read,
      status: 200,
    },
    async ({ project, params }) => (await one(project, params.slug)).files,
  );
  route(
    ctx,
    router,
    {
      method: "delete",
      project: "any",
      path: `${base}/:slug`,
      summary: "Deletes a function",
      access: write,
      status: 200,
    },
    async ({ project, params }) => {
      const fn = await one(project, params.slug);
      await ctx.platformPool.query("delete from platform.edge_functions where id = $1", [fn.id]);
      functionRuntimeOf(ctx).pool.stopFunction(`${fn.project_ref}/${fn.slug}`);
      await removeFunctionFiles(ctx.config.dataDir, fn.project_ref, fn.slug);
      return {};
    },
  );
  return router;
}
