import type { IncomingHttpHeaders } from "node:http";
import type { AppContext } from "../context";
import {
  authenticateBearer,
  authenticateDataRequest,
  bearerOf,
  credentialsOf,
  DataAuthError,
  type DataAuthCode,
  type RequestAuth,
} from "../auth/dataAuth";
import type { ProjectRuntime } from "../projects/runtime";

/**
 * The one data gate: every data route (GraphQL, REST, /auth/v1 and the services beside them) finds its
 * project and checks its credentials here, and maps a refusal (a GateError) to its own error format in one
 * place, by `code`.
 */

export type GateErrorCode = "project_not_found" | "project_paused" | "project_not_ready" | DataAuthCode;

/** A data request the gate refuses: which check failed (`code`), its HTTP status and a message. */
export class GateError extends Error {
  constructor(
    readonly status: 401 | 404 | 503,
    readonly code: GateErrorCode,
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

/** What the gate reads of a request: Express' and node:http's requests both fit. */
export interface GateRequest {
  headers: IncomingHttpHeaders;
}

export interface DataRequest {
  project: ProjectRuntime;
  auth: RequestAuth;
}

export interface GateOptions {
  /** The query string, where a route also accepts the key as an `apikey` parameter (REST, websockets). */
  query?: URLSearchParams;
  /** `key`: only the API key decides the role (the auth endpoints read the bearer themselves). */
  credentials?: "key" | "key-and-bearer";
}

/**
 * The project ref a Host header names (`<ref>.<STRATA_DOMAIN>`, an activated custom hostname or a vanity
 * subdomain), or undefined for the default project.
 */
export function refOfHost(ctx: AppContext, hostHeader: string | undefined): string | undefined {
  const host = (hostHeader ?? "").split(":")[0].toLowerCase();
  const suffix = "." + ctx.config.domain;
  const ref = host.endsWith(suffix) ? host.slice(0, -suffix.length) : undefined;
  if (ref && /^[a-z]{20}$/.test(ref)) return ref;
  return ctx.registry.hostnames.refOf(host);
}

/**
 * The project a data request addresses: `<ref>.<STRATA_DOMAIN>` picks that project, any other host the
 * default one. A paused project answers 503. For routes that need no API key (published JWKS).
 */
export async function openProject(ctx: AppContext, req: GateRequest): Promise<ProjectRuntime> {
  const ref = refOfHost(ctx, req.headers.host);
  const project = ref ? await ctx.registry.get(ref) : undefined;
  if (ref && !project) throw new GateError(404, "project_not_found", `Project ${ref} not found`);
  const runtime = project ?? (await ctx.registry.getDefault());
  const status = runtime.record.status;
  if (status === "INACTIVE" || status === "PAUSING") {
    throw new GateError(503, "project_paused", "Project is paused; restore it to use its APIs");
  }
  if (status !== "ACTIVE_HEALTHY") {
    throw new GateError(503, "project_not_ready", `Project is not ready (status ${status})`);
  }
  return runtime;
}

/** A refused credential as the gate's error. */
function gateErrorOf(e: unknown): unknown {
  return e instanceof DataAuthError ? new GateError(401, e.code, e.message, e.hint) : e;
}

/**
 * Opens a data request: its project (from Host) and who it runs as (API key, then a bearer JWT when present
 * and not the key itself). Throws GateError.
 */
export async function openDataRequest(
  ctx: AppContext,
  req: GateRequest,
  options: GateOptions = {},
): Promise<DataRequest> {
  const project = await openProject(ctx, req);
  const creds = credentialsOf(req.headers, options.query);
  if (options.credentials === "key") creds.authorization = undefined;
  const auth = await authenticateDataRequest(project, creds).catch((e: unknown) => {
    throw gateErrorOf(e);
  });
  return { project, auth };
}

/**
 * The verified bearer JWT of a request (not the API key itself), or undefined when there is none; its role
 * defaults to `defaultRole`. Throws GateError for a token that does not verify.
 */
export async function bearerAuthOf(
  project: ProjectRuntime,
  req: GateRequest,
  defaultRole: string,
  options: { thirdParty?: boolean } = {},
): Promise<RequestAuth | undefined> {
  const creds = credentialsOf(req.headers);
  const token = bearerOf(creds);
  if (!token || token === creds.apikey) return undefined;
  return authenticateBearer(project, token, defaultRole, options).catch((e: unknown) => {
    throw gateErrorOf(e);
  });
}
