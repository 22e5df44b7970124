import { rm } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import express, { Router, type Request, type Response } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import {
  type DeployedFile,
  functionDir,
  InvalidDeployment,
  publishVersion,
  pruneVersions,
  relativeFilePath,
  removeFunctionFiles,
  stageDeployment,
} from "../../functions/files";
import { functionRuntimeOf } from "../../functions/runtime";
import { withAdminTransaction } from "../../db/transaction";
import { found, HttpError } from "../http";
import type { ProjectRuntime } from "../../projects/runtime";
import { requireFunctionRoom } from "../billing/plans";
import { routeTable } from "../route";
import {
  activateOrUpdate,
  deleteFunctionRow,
  type Deployment,
  functionExists,
  type FunctionRow,
  getFunction,
  listFunctions,
  storeBundle,
  storeFunction,
} from "./store";

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

/** The platform's runtime path, as its clients expect it: not a path of this machine (nothing is kept there). */
const PLATFORM_BUNDLE_ROOT = "/tmp/user_fn";
/**
 * Where the platform's runtime keeps a deployment's files, `<root>_<ref>_<id>_<version>/source/`: its API
 * answers entry points as `file://` URLs there and names a body's files relative to it, and its clients (the
 * CLI's `functions download`, the MCP server) strip that prefix to get the paths as deployed.
 */
const bundleSource = (ref: string, r: Pick<FunctionRow, "id" | "version">) =>
  `${PLATFORM_BUNDLE_ROOT}_${ref}_${r.id}_${r.version}/source/`;
const bundleUrl = (ref: string, r: FunctionRow, file: string | null) =>
  file ? `file://${bundleSource(ref, r)}${file}` : undefined;

/** A path as deployed from one a client sends back: a bundle URL answered by this API, or a path as it is. */
function deployedPath(value: string): string {
  const prefix = `file://${PLATFORM_BUNDLE_ROOT}_`;
  const m = value.startsWith(prefix) ? /^[^/]+\/source\/(.+)$/.exec(value.slice(prefix.length)) : null;
  return m ? m[1] : value;
}

function functionJson(r: FunctionRow) {
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
    entrypoint_path: bundleUrl(r.project_ref, r, r.entrypoint_path),
    import_map_path: bundleUrl(r.project_ref, r, r.import_map_path),
  };
}

/**
 * A function's files as the platform answers `Accept: multipart/form-data`: a `metadata` field naming the entry
 * point, then one file part per file named relative to the bundle (`source/<path>`).
 */
function sendBody(res: Response, r: FunctionRow): void {
  const boundary = `strata-${randomUUID()}`;
  const part = (disposition: string, type: string, content: string) =>
    `--${boundary}\r\nContent-Disposition: form-data; ${disposition}\r\nContent-Type: ${type}\r\n\r\n${content}\r\n`;
  const quoted = (s: string) => JSON.stringify(s);
  const metadata = JSON.stringify({ deno2_entrypoint_path: `source/${r.entrypoint_path ?? "index.ts"}` });
  const body =
    part('name="metadata"', "application/json", metadata) +
    r.files
      .map((f: DeployedFile) =>
        part(`name="file"; filename=${quoted(`source/${f.name}`)}`, "text/plain", f.content),
      )
      .join("") +
    `--${boundary}--\r\n`;
  res.status(200).type(`multipart/form-data; boundary=${boundary}`).send(Buffer.from(body));
}

/** Reads `metadata` and `file` parts of a multipart deploy with the platform's Fetch implementation. */
async function readDeploy(req: Request) {
  const type = req.headers["content-type"] ?? "";
  if (!type.startsWith("multipart/form-data") || !Buffer.isBuffer(req.body))
    throw new HttpError(400, "Invalid body: expected multipart/form-data with metadata and file parts");
  // A copy as a plain Uint8Array: a BodyInit under both the DOM and the Node typings (SAML libraries load the DOM lib).
  const form = await new Response(Uint8Array.from(req.body), {
    headers: { "content-type": type },
  }).formData();
  let metadata: Record<string, unknown>;
  try {
    // A plain field, or a JSON blob part (the MCP server sends one).
    const part = form.get("metadata") ?? "{}";
    metadata = JSON.parse(typeof part === "string" ? part : await part.text());
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

/**
 * Checks and stores a deployment's files (paths as sent), then publishes them as the function's next version (served at once,
 * or kept as a bundle). A deployment that does not parse is refused and leaves nothing behind.
 */
async function deployFiles(
  ctx: AppContext,
  ref: string,
  files: DeployedFile[],
  meta: Omit<Deployment, "ref" | "files"> & { bundleOnly: boolean },
) {
  await requireFunctionRoom(ctx.platformPool, ref, meta.slug);
  const staging = await stageDeployment(
    ctx.config.dataDir,
    ref,
    files,
    meta.entrypoint,
    meta.importMap ?? undefined,
  ).catch((e) => {
    if (e instanceof InvalidDeployment) throw new HttpError(400, `Invalid deployment: ${e.message}`);
    throw e;
  });
  // Staging checked the paths: stored relative to the function's root.
  const entrypoint = relativeFilePath(meta.entrypoint);
  const importMap = meta.importMap === null ? null : relativeFilePath(meta.importMap);
  const store = meta.bundleOnly ? storeBundle : storeFunction;
  const fn = await store(ctx.platformPool, { ...meta, entrypoint, importMap, ref, files }).catch(
    async (e) => {
      await rm(staging, { recursive: true, force: true });
      throw e;
    },
  );
  await publishVersion(staging, functionDir(ctx.config.dataDir, ref, fn.slug, fn.version));
  functionRuntimeOf(ctx).deployed.forget(ref);
  if (!meta.bundleOnly) await pruneVersions(ctx.config.dataDir, ref, fn.slug, fn.version);
  return functionJson(fn);
}

export function functionRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/functions";
  routes.router.post(`${base}/deploy`, express.raw({ type: "multipart/form-data", limit: "20mb" }));

  routes.get(base, "Lists edge functions", { access: read, status: 200 }, async ({ project }) =>
    (await listFunctions(ctx.platformPool, project.ref)).map(functionJson),
  );

  // The deprecated create: one source file as the raw body, the rest in the query string.
  routes.router.post(base, express.text({ type: () => true, limit: "20mb" }));
  routes.post(
    base,
    "Creates a function from one source file (deprecated: use deploy)",
    {
      access: write,
      query: z.object({
        slug: Slug,
        name: z.string().optional(),
        entrypoint_path: z.string().optional(),
        import_map_path: z.string().optional(),
        verify_jwt: z.enum(["true", "false"]).optional(),
      }),
      status: 201,
    },
    async ({ project, req, query }) => {
      if (typeof req.body !== "string" || !req.body.trim())
        throw new HttpError(400, "Invalid body: the function's source is required");
      const entrypoint = query.entrypoint_path ?? "index.ts";
      if (await functionExists(ctx.platformPool, project.ref, query.slug))
        throw new HttpError(400, `Function ${query.slug} already exists: deploy updates it`);
      return deployFiles(ctx, project.ref, [{ name: entrypoint, content: req.body }], {
        slug: query.slug,
        name: query.name ?? query.slug,
        verifyJwt: query.verify_jwt !== "false",
        entrypoint,
        importMap: query.import_map_path ?? null,
        bundleOnly: false,
      });
    },
  );

  routes.post(
    `${base}/deploy`,
    "Deploys (creates or updates) a function from its files",
    {
      access: write,
      query: z.object({ slug: Slug.optional(), bundleOnly: z.string().optional() }),
      status: 201,
    },
    async ({ project, req, query }) => {
      const { metadata, files } = await readDeploy(req);
      const slug = Slug.safeParse(query.slug ?? metadata.name);
      if (!slug.success) throw new HttpError(400, `Invalid query: slug: ${slug.error.issues[0].message}`);
      const entrypoint = deployedPath(String(metadata.entrypoint_path ?? "index.ts"));
      const importMap = metadata.import_map_path ? deployedPath(String(metadata.import_map_path)) : undefined;
      return deployFiles(ctx, project.ref, files, {
        slug: slug.data,
        name: String(metadata.name ?? slug.data),
        verifyJwt: metadata.verify_jwt !== false,
        entrypoint,
        importMap: importMap ?? null,
        bundleOnly: query.bundleOnly === "true",
      });
    },
  );

  routes.put(
    base,
    "Bulk-updates functions' metadata",
    {
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
      const updated = await withAdminTransaction(ctx.platformPool, async (client) => {
        const rows = [];
        for (const f of body) {
          const entrypoint = f.entrypoint_path && deployedPath(f.entrypoint_path);
          const row = await activateOrUpdate(client, project.ref, { ...f, entrypoint_path: entrypoint });
          if (!row) throw new HttpError(404, `Function ${f.slug} not found: deploy it first`);
          rows.push(row);
        }
        return rows;
      });
      functionRuntimeOf(ctx).deployed.forget(project.ref);
      for (const fn of updated) await pruneVersions(ctx.config.dataDir, project.ref, fn.slug, fn.version);
      return { functions: updated.map(functionJson) };
    },
  );

  const one = async (project: ProjectRuntime, slug: string) =>
    found(await getFunction(ctx.platformPool, project.ref, slug), "Function", slug);
  routes.get(`${base}/:slug`, "Gets a function", { access: read, status: 200 }, async ({ project, params }) =>
    functionJson(await one(project, params.slug)),
  );
  routes.get(
    `${base}/:slug/body`,
    "Gets a function's files",
    { access: read, status: 200 },
    async ({ req, res, project, params }) => {
      const fn = await one(project, params.slug);
      if (req.accepts(["json", "multipart/form-data"]) === "multipart/form-data") sendBody(res, fn);
      else return fn.files;
    },
  );
  routes.delete(
    `${base}/:slug`,
    "Deletes a function",
    { access: write, status: 200 },
    async ({ project, params }) => {
      const fn = await one(project, params.slug);
      await deleteFunctionRow(ctx.platformPool, fn.id);
      functionRuntimeOf(ctx).deployed.forget(fn.project_ref);
      functionRuntimeOf(ctx).pool.stopFunction(`${fn.project_ref}/${fn.slug}`);
      await removeFunctionFiles(ctx.config.dataDir, fn.project_ref, fn.slug);
      return {};
    },
  );
  return routes.router;
}
