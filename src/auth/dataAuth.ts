import { errors as joseErrors, jwtVerify, decodeProtectedHeader } from "jose";
import type { ProjectRuntime } from "../projects/runtime";

/** Who a data request runs as: the Postgres role and the claims RLS policies read. */
export interface RequestAuth {
  role: string;
  claims: Record<string, unknown>;
}

/** A refused data request: always 401, with a message that says which check failed. */
export class DataAuthError extends Error {
  readonly status = 401;
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

export interface DataCredentials {
  /** `apikey` header or query parameter. */
  apikey: string | undefined;
  /** `Authorization` header. */
  authorization: string | undefined;
}

const API_KEY_ROLES = new Set(["anon", "service_role"]);

function secretKey(project: ProjectRuntime): Uint8Array {
  return new TextEncoder().encode(project.record.jwtSecret);
}

/** Verifies an HS256 JWT with the project's secret; every failure becomes a DataAuthError. */
async function verifyProjectJwt(project: ProjectRuntime, token: string, what: string) {
  try {
    const header = decodeProtectedHeader(token);
    if (header.alg !== "HS256")
      throw new DataAuthError(`Invalid ${what}: unsupported algorithm ${header.alg}`);
    const { payload } = await jwtVerify(token, secretKey(project), { algorithms: ["HS256"] });
    return payload as Record<string, unknown>;
  } catch (e) {
    if (e instanceof DataAuthError) throw e;
    if (e instanceof joseErrors.JWTExpired) throw new DataAuthError(`Invalid ${what}: JWT expired`);
    throw new DataAuthError(`Invalid ${what}: ${(e as Error).message}`);
  }
}

/** Checks the API key and returns the role it stands for. */
async function authenticateApiKey(project: ProjectRuntime, apikey: string | undefined): Promise<RequestAuth> {
  if (!apikey) {
    throw new DataAuthError(
      "No API key found in request",
      "No `apikey` request header or url param was found.",
    );
  }
  let claims: Record<string, unknown>;
  try {
    claims = await verifyProjectJwt(project, apikey, "API key");
  } catch {
    throw new DataAuthError("Invalid API key", "Double check your project's anon or service_role API key.");
  }
  const role = claims.role;
  if (typeof role !== "string" || !API_KEY_ROLES.has(role) || !project.record.legacyKeysEnabled) {
    throw new DataAuthError("Invalid API key", "Double check your project's anon or service_role API key.");
  }
  return { role, claims };
}

/**
 * The request flow of DESIGN.md: the API key must be valid; a bearer JWT, when present and not the key
 * itself, decides the role and claims.
 */
export async function authenticateDataRequest(
  project: ProjectRuntime,
  creds: DataCredentials,
): Promise<RequestAuth> {
  const keyAuth = await authenticateApiKey(project, creds.apikey);
  const bearer = /^bearer\s+(.+)$/i.exec(creds.authorization ?? "")?.[1]?.trim();
  if (!bearer || bearer === creds.apikey) return keyAuth;
  const claims = await verifyProjectJwt(project, bearer, "JWT");
  const role = typeof claims.role === "string" && claims.role !== "" ? claims.role : keyAuth.role;
  return { role, claims: { ...claims, role } };
}

/** Reads the credentials of a data request from its headers (any case) and, for REST, its query. */
export function credentialsOf(
  headers: Record<string, string | string[] | undefined>,
  query?: URLSearchParams,
): DataCredentials {
  const header = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  return {
    apikey: header("apikey") ?? query?.get("apikey") ?? undefined,
    authorization: header("authorization"),
  };
}
