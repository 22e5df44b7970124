import { createHash } from "node:crypto";
import { Router, type Request, type Response } from "express";
import type { Dispatcher } from "undici";
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

/**
 * Request headers the worker never gets from the client: hop-by-hop ones, `expect` (node:http has answered
 * a `100-continue` already), and those Strata sets itself.
 */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, "expect", "x-forwarded-proto", "x-forwarded-for"]);

/**
 * What the worker gets: the client's headers less hop-by-hop ones, with where the request came from, as a
 * raw list (undici sends it as it is). From `headers`, not `rawHeaders`: the API channel pins a function's
 * calls to its project's Host there (channel.ts).
 */
function requestHeaders(req: Request, proto: string): string[] {
  const given = req.headers;
  const headers: string[] = [];
  for (const name in given) {
    const value = given[name];
    if (value === undefined || NOT_FORWARDED.has(name)) continue;
    if (typeof value === "string") headers.push(name, value);
    else for (const v of value) headers.push(name, v);
  }
  if (given.host === undefined) headers.push("host", "localhost");
  headers.push("x-forwarded-proto", proto, "x-forwarded-for", req.ip ?? "");
  return headers;
}

/** A Host that is a name or address and a port, nothing else (no user, path or spaces). */
const AUTHORITY = /^(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d+)?$/i;

/**
 * The request target the worker gets: the URL the client called (`http://<host>/<slug>/path?query`, absolute
 * form), which Deno then gives the function as the request's URL, so the bootstrap need not copy the request
 * (bootstrap.ts). Below the mount otherwise (a Host that is no plain authority): the bootstrap rebuilds it.
 */
function targetOf(req: Request, proto: string): string {
  const host = req.headers.host ?? "localhost";
  return AUTHORITY.test(host) ? `${proto}://${host}${req.url}` : req.url;
}

/**
 * The worker's answer headers as a raw list (duplicates kept, names as sent), less hop-by-hop ones. Bytes as
 * latin1, as node:http reads and writes them, so a value passes on byte for byte.
 */
function answerHeaders(raw: Dispatcher.DispatchController["rawHeaders"]): string[] {
  const headers: string[] = [];
  if (!Array.isArray(raw)) return withTenantContentPolicy(headers);
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toString("latin1");
    if (!HOP_BY_HOP.has(name.toLowerCase())) headers.push(name, raw[i + 1].toString("latin1"));
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
  return new Promise((resolve) => new Proxied(req, res, worker, wallMs, resolve).send());
}

/**
 * One request proxied to a worker, as undici's dispatch handler: the answer's head and body go to the client
 * as they are read from the worker's connection, the client's body to the worker as it comes. Ends once,
 * with the status the client got: the answer's end, a limit, the worker's end, or the client going away.
 */
class Proxied implements Dispatcher.DispatchHandler {
  private readonly target: string;
  private readonly headers: string[];
  private readonly bodyless: boolean;
  private controller: Dispatcher.DispatchController | undefined;
  private settled = false;
  private retried = false;
  /** The worker's answer has begun: the request reached the function, and is not sent again. */
  private answering = false;
  private readonly wall: NodeJS.Timeout;
  /** Set once the worker's end is watched (a worker that has ended already stops the request at once). */
  private stopWatching: (() => void) | undefined;

  constructor(
    private readonly req: Request,
    private readonly res: Response,
    private readonly worker: Worker,
    wallMs: number,
    private readonly resolve: (status: number) => void,
  ) {
    const proto = req.protocol;
    this.target = targetOf(req, proto);
    this.headers = requestHeaders(req, proto);
    this.bodyless = hasNoBody(req);
    this.wall = setTimeout(
      () => this.stop(504, "IDLE_TIMEOUT", "Function did not answer within the request time limit"),
      wallMs,
    );
    this.stopWatching = worker.onEnd((why) => {
      if (why === "limit")
        this.stop(546, "WORKER_RESOURCE_LIMIT", "Function exceeded a resource limit (CPU time or memory)");
      else this.stop(500, "WORKER_ERROR", "Function exited before it answered (please check logs)");
    });
    // The client went away: stop the function's side of the request too.
    res.on("close", () => {
      const gone = !res.writableFinished;
      this.finish(res.statusCode);
      if (gone) this.controller?.abort(new Error("The client went away"));
    });
  }

  send() {
    if (this.settled) return;
    // undici takes an async iterable body (its Dispatcher docs), which its types do not list.
    const body = this.bodyless ? null : (bodyOf(this.req) as unknown as Dispatcher.DispatchOptions["body"]);
    this.worker.request({ method: this.req.method, path: this.target, headers: this.headers, body }, this);
  }

  onRequestStart(controller: Dispatcher.DispatchController) {
    this.controller = controller;
    // Ended while the request waited for a connection.
    if (this.settled) controller.abort(new Error("The invocation ended"));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number) {
    this.answering = true;
    this.res.writeHead(statusCode, answerHeaders(controller.rawHeaders));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer) {
    if (this.res.write(chunk)) return;
    controller.pause();
    this.res.once("drain", () => controller.resume());
  }

  onResponseEnd() {
    this.res.end();
    this.finish(this.res.statusCode);
  }

  onResponseError() {
    if (this.settled) return;
    // Broken mid-answer (the worker died): the client sees its answer end early.
    if (this.answering) return this.stop(this.res.statusCode, "WORKER_ERROR", "Function did not answer");
    // A kept-alive connection the worker closed just as the request went out: nothing reached the function
    // but a request without a body, which is sent once more.
    if (this.bodyless && !this.retried && !this.worker.ended) {
      this.retried = true;
      this.send();
      return;
    }
    // The connection breaks first when the worker dies: give its exit (and its reason) a moment.
    setTimeout(() => this.stop(502, "WORKER_ERROR", "Function did not answer"), WORKER_EXIT_GRACE_MS).unref();
  }

  /** Answers with an error (or ends a started answer) and stops the function's side of the request. */
  private stop(status: number, code: string, why: string) {
    if (this.settled) return;
    refuse(this.res, status, code, why);
    this.finish(status);
    this.controller?.abort(new Error(why));
  }

  private finish(status: number) {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.wall);
    this.stopWatching?.();
    this.resolve(status);
  }
}

/**
 * The client's body as it comes, for undici to send. Never destroyed from the worker's side (undici destroys a
 * stream body it stops sending, which for the client's request would drop the client's connection before its
 * answer): what the worker does not take is read and dropped, as node:http does with a body nobody reads.
 */
async function* bodyOf(req: Request): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of req.iterator({ destroyOnReturn: false })) yield chunk as Buffer;
  } finally {
    if (!req.complete) req.resume();
  }
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
