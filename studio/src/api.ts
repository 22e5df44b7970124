/**
 * Studio talks to Strata's public APIs only: the Management API through Studio's same-origin forwarder
 * (/studio/api/v1/... carries the session cookie; the server swaps it for the session's bearer token), and each
 * project's data APIs at the project's own host with a key read through the Management API.
 */

/** An API's refusal: its status and the message of its own error body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
}

/** Every call to Studio's own endpoints carries this header: the server refuses calls without it (CSRF). */
const STUDIO_HEADERS = { "x-strata-studio": "1" };

/** Listeners told when the session is gone (a 401 from the forwarder). */
const signedOutListeners = new Set<() => void>();
export function onSignedOut(listener: () => void): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

/** The message of an error body in any of Strata's formats (Management API, PostgREST, auth, storage). */
function messageOf(body: unknown, status: number): string {
  if (body && typeof body === "object") {
    const b = body as Record<string, unknown>;
    for (const key of ["message", "msg", "error_description", "error"]) {
      if (typeof b[key] === "string" && b[key]) {
        const detail = typeof b.details === "string" && b.details ? ` (${b.details})` : "";
        const hint = typeof b.hint === "string" && b.hint ? ` Hint: ${b.hint}` : "";
        return `${b[key] as string}${detail}${hint}`;
      }
    }
  }
  if (typeof body === "string" && body) return body;
  return `Request failed with status ${status}`;
}

async function bodyOf(res: Response): Promise<unknown> {
  const text = await res.text();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** One JSON request; answers the parsed body and the response (for headers), or throws an ApiError. */
export async function request<T>(
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ data: T; response: Response }> {
  const headers: Record<string, string> = { accept: "application/json", ...init.headers };
  // A form goes as multipart (the browser writes its boundary); anything else as JSON.
  const form = init.body instanceof FormData;
  if (init.body !== undefined && !form) headers["content-type"] = "application/json";
  const response = await fetch(url, {
    method: init.method ?? "GET",
    headers,
    body: init.body === undefined ? undefined : form ? (init.body as FormData) : JSON.stringify(init.body),
    credentials: "same-origin",
  });
  const body = await bodyOf(response);
  if (!response.ok) throw new ApiError(response.status, messageOf(body, response.status), body);
  return { data: body as T, response };
}

async function studio<T>(path: string, method = "GET", body?: unknown): Promise<T> {
  try {
    return (await request<T>(path, { method, body, headers: STUDIO_HEADERS })).data;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) for (const listener of signedOutListeners) listener();
    throw e;
  }
}

/** The Management API, as the signed-in user. */
export const mgmt = {
  get: <T>(path: string) => studio<T>(`/studio/api${path}`),
  post: <T>(path: string, body?: unknown) => studio<T>(`/studio/api${path}`, "POST", body ?? {}),
  patch: <T>(path: string, body: unknown) => studio<T>(`/studio/api${path}`, "PATCH", body),
  put: <T>(path: string, body: unknown) => studio<T>(`/studio/api${path}`, "PUT", body),
  delete: <T>(path: string) => studio<T>(`/studio/api${path}`, "DELETE"),
};

export interface Session {
  signed_in: true;
  profile: { username: string; primary_email: string };
  project_domain: string;
}

export const session = {
  get: () => studio<Session>("/studio/session"),
  signIn: (accessToken: string) => studio<unknown>("/studio/session", "POST", { access_token: accessToken }),
  signOut: () => studio<unknown>("/studio/session", "DELETE"),
};

/**
 * The Management API's own account endpoints, called straight from the browser (they need no bearer): their
 * limits per address then count the user's address.
 */
export const account = {
  signIn: (email: string, password: string) =>
    request<{ access_token: string }>("/v1/account/sign-in", {
      method: "POST",
      body: { email, password },
    }).then((r) => r.data),
  acceptInvitation: (token: string, password: string, username?: string) =>
    request<{ user: { email: string }; organization: { slug: string; name: string } }>(
      "/v1/account/invitations/accept",
      { method: "POST", body: { token, password, ...(username ? { username } : {}) } },
    ).then((r) => r.data),
};

/** Runs SQL on a project through the Management API (as the project's owner): the result rows. */
export function runSql<Row = Record<string, unknown>>(ref: string, query: string): Promise<Row[]> {
  return mgmt.post<Row[]>(`/v1/projects/${ref}/database/query`, { query });
}

/** A literal for SQL text Studio composes: 'it''s'. */
export const literal = (value: string) => `'${value.replace(/'/g, "''")}'`;

/** An identifier for SQL text Studio composes: "My Table". */
export const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;
