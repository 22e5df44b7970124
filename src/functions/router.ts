import { createHash } from "node:crypto";
import type { ClientRequest, IncomingMessage } from "node:http";
import { Router, type Request, type Response } from "express";
import type { AppContext } from "../context";
import { GateError } from "../http/gate";
import { withTenantContentPolicy } from "../http/tenantContent";
import { functionDir, materialise } from "./files";
import {
  checkJwt,
  defaultEnv,
  deployedFiles,
  InvalidJwt,
  projectOf,
  type Deployed,
  type DeployedFunction,
} from "./gate";
import { PoolExhausted } from "./pool";
import { functionRuntimeOf, type FunctionRuntime } from "./runtime";
import type { Worker } from "./worker";

/**
 * /functions/v1/<slug>[/sub/path]: finds the project (Host) and the deployed function, checks the JWT
 * when the function asks for it, then proxies the request to a warm worker of the function's current
 * version, streaming both bodies. The function sees `/<slug>/sub/path?query`, as on the platform.
 */

/** Answers in the platform's error shapes: `{code, message}` and the code in `sb-error-code`. */
function refuse(res: Response, status: number, code: string | number, message: string) {
  if (res.headersSent) return res.destroy();
  if (typeof code === "string") res.setHeader("sb-error-code", code);
  res.status(status).json({ code, message });
}

/**
 * How long a broken connection to a worker waits for the worker's end and its reason (a limit, a crash): on a
 * busy machine the CPU watch and the exit report can trail the broken socket by more than a second.
 */
const WORKER_EXIT_GRACE_MS = 3000;

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
]);

/** Request headers the worker never gets from the client: hop-by-hop ones, and those Strata sets itself. */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, "x-forwarded-proto", "x-forwarded-for"]);

/**
 * What the worker gets: the client's headers less hop-by-hop ones, with where the request came from, as a
 * raw list (node:http sends it as it is, without a setHeader per header). From `headers`, not `rawHeaders`:
 * the API channel pins a function's calls to its project's Host there (channel.ts).
 */
function requestHeaders(req: Request): string[] {
  const given = req.headers;
  const headers: string[] = [];
  for (const name in given) {
    const value = given[name];
    if (value === undefined || NOT_FORWARDED.has(name)) continue;
    if (typeof value === "string") headers.push(name, value);
    else for (const v of value) headers.push(name, v);
  }
  // node:http adds a Host of its own only to headers it is given as an object.
  if (given.host === undefined) headers.push("host", "localhost");
  headers.push("x-forwarded-proto", req.protocol, "x-forwarded-for", req.ip ?? "");
  return headers;
}

/** The worker's answer headers as a raw list (duplicates kept), less hop-by-hop ones. */
function answerHeaders(answer: IncomingMessage): string[] {
  const raw = answer.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!HOP_BY_HOP.has(raw[i].toLowerCase())) headers.push(raw[i], raw[i + 1]);
  }
  return withTenantContentPolicy(headers);
}

/** The slug: the first segment of the path under /functions/v1. */
function slugOf(req: Request): string | undefined {
  const first = req.path.split("/")[1];
  try {
    return first ? decodeURIComponent(first) : undefined;
  } catch {
    return undefined;
  }
}

/** Plan: the function, its environment and the key of the worker that runs them. */
async function plan(ctx: AppContext, runtime: FunctionRuntime, req: Request, res: Response) {
  const slug = slugOf(req);
  const project = await projectOf(ctx, req);
  const deployed = slug ? await runtime.deployed.get(project, slug) : undefined;
  if (!deployed) {
    refuse(res, 404, "NOT_FOUND", "Requested function was not found");
    return undefined;
  }
  // A CORS preflight carries no Authorization: it reaches the function's own handler.
  const { fn } = deployed;
  if (fn.verifyJwt && req.method !== "OPTIONS") await checkJwt(project, req.headers.authorization);
  const { env, key } = workerEnv(project.ref, deployed, await defaultEnv(ctx, project));
  return { project, fn, env, key };
}

/**
 * The environment of a deployed function and the key of its worker (the version and a digest of the
 * environment), made once per kept deployment and default environment (both cached), not per invocation.
 */
function workerEnv(ref: string, deployed: Deployed, defaults: Record<string, string>) {
  const made = workerEnvs.get(deployed);
  if (made?.defaults === defaults) return made;
  const { fn, secrets } = deployed;
  const env = { ...secrets, ...defaults };
  const envHash = createHash("sha256").update(JSON.stringify(env)).digest("hex");
  const fresh = { defaults, env, key: `${ref}/${fn.slug}/${fn.version}/${envHash}` };
  workerEnvs.set(deployed, fresh);
  return fresh;
}

const workerEnvs = new WeakMap<
  Deployed,
  { defaults: Record<string, string>; env: Record<string, string>; key: string }
>();

/** Act: proxies to the worker; resolves with the status the client got. */
function proxy(req: Request, res: Response, worker: Worker, wallMs: number): Promise<number> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (status: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(wall);
      stopWatching();
      resolve(status);
    };
    const stopped = (status: number, code: string, why: string) => {
      upstream.destroy();
      refuse(res, status, code, why);
      finish(status);
    };
    const headers = requestHeaders(req);
    const bodyless = hasNoBody(req);
    const send = (retry: boolean): ClientRequest => {
      const sent = worker.request({ method: req.method, path: req.url, headers }, { reuse: bodyless });
      sent.on("response", (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, answerHeaders(answer));
        answer.pipe(res);
        answer.on("end", () => finish(answer.statusCode ?? 502));
        answer.on("error", () => finish(answer.statusCode ?? 502));
      });
      sent.on("error", () => {
        // A kept-alive connection the worker closed just as the request went out: nothing reached the
        // function (no answer, no body), so it is sent once more on a new connection.
        if (retry && sent.reusedSocket && !res.headersSent && !settled && !worker.ended) {
          upstream = send(false);
          return;
        }
        // The connection breaks first when the worker dies: give its exit (and its reason) a moment.
        setTimeout(() => {
          if (settled) return;
          refuse(res, 502, "WORKER_ERROR", "Function did not answer");
          finish(502);
        }, WORKER_EXIT_GRACE_MS).unref();
      });
      if (bodyless) sent.end();
      else req.pipe(sent);
      return sent;
    };
    let upstream = send(bodyless);
    const wall = setTimeout(
      () => stopped(504, "IDLE_TIMEOUT", "Function did not answer within the request time limit"),
      wallMs,
    );
    const stopWatching = worker.onEnd((why) => {
      if (why === "limit")
        stopped(546, "WORKER_RESOURCE_LIMIT", "Function exceeded a resource limit (CPU time or memory)");
      else stopped(500, "WORKER_ERROR", "Function exited before it answered (please check logs)");
    });
    // The client went away: stop the function's side of the request too.
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
      finish(res.statusCode);
    });
  });
}

/** A request that carries no body (a GET, a POST with `content-length: 0`): it can be sent again. */
function hasNoBody(req: Request): boolean {
  return req.headers["transfer-encoding"] === undefined && (Number(req.headers["content-length"]) || 0) === 0;
}

async function invoke(ctx: AppContext, runtime: FunctionRuntime, req: Request, res: Response) {
  const started = Date.now();
  const planned = await plan(ctx, runtime, req, res);
  if (!planned) return;
  const { project, fn, env, key } = planned;
  const log = (status: number) =>
    runtime.logs.add({
      ref: project.ref,
      functionId: fn.id,
      slug: fn.slug,
      version: fn.version,
      kind: "invocation",
      method: req.method,
      path: req.path,
      status,
      durationMs: Date.now() - started,
    });
  const worker = runtime.pool.running(key) ?? (await startWorker(ctx, runtime, project.ref, fn, env, key));
  try {
    await worker.booted();
  } catch {
    refuse(res, 503, "BOOT_ERROR", "Worker failed to boot (please check logs)");
    log(503);
    return;
  }
  log(await proxy(req, res, worker, ctx.config.functions.wallMs));
}

/** A new worker for the function, its files written first where this node has none (a new node, a cleaned disk). */
async function startWorker(
  ctx: AppContext,
  runtime: FunctionRuntime,
  ref: string,
  fn: DeployedFunction,
  env: Record<string, string>,
  key: string,
): Promise<Worker> {
  const dir = functionDir(ctx.config.dataDir, ref, fn.slug, fn.version);
  await materialise(dir, () => deployedFiles(ctx, fn.id, fn.version));
  return runtime.pool.workerFor(
    `${ref}/${fn.slug}`,
    key,
    { dir, entrypoint: fn.entrypoint, importMap: fn.importMap, env, api: runtime.apiChannel(ref) },
    (level, message) => runtime.logs.add(consoleRow(ref, fn, level, message)),
  );
}

function consoleRow(ref: string, fn: DeployedFunction, level: string, message: string) {
  return {
    ref,
    functionId: fn.id,
    slug: fn.slug,
    version: fn.version,
    kind: "console" as const,
    level,
    message,
  };
}

/**
 * One invocation, below the /functions/v1 mount (the data path serves it ahead of Express, dataPath.ts; the
 * Express route is for request targets the data path leaves to Express). Every error is answered here.
 */
export async function handleFunctions(ctx: AppContext, req: Request, res: Response): Promise<void> {
  try {
    await invoke(ctx, functionRuntimeOf(ctx), req, res);
  } catch (e) {
    if (e instanceof InvalidJwt) refuse(res, 401, 401, e.message);
    else if (e instanceof GateError) refuse(res, e.status, e.status, e.message);
    else if (e instanceof PoolExhausted) refuse(res, 503, "WORKER_RESOURCE_LIMIT", e.message);
    else {
      ctx.log.error({ err: e }, "function invocation failed");
      refuse(res, 500, "INTERNAL_ERROR", "Internal server error");
    }
  }
}

export function functionsRouter(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  router.use((req, res) => void handleFunctions(ctx, req, res));
  return router;
}
