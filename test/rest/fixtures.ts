import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { SignJWT } from "jose";
import type { TestServer } from "../helpers/server";

/** The platform's JavaScript client pointed at a test server, as an app would create it. */
export function clientFor(server: TestServer, key = server.anonKey, accessToken?: string): SupabaseClient {
  return createClient(server.url, key, {
    auth: { persistSession: false, autoRefreshToken: false },
    ...(accessToken ? { global: { headers: { Authorization: `Bearer ${accessToken}` } } } : {}),
  });
}

/** An access token for a signed-in user, signed with the project's JWT secret. */
export function userToken(server: TestServer, sub: string): Promise<string> {
  return new SignJWT({ role: "authenticated", sub, aud: "authenticated" })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuedAt()
    .setExpirationTime("1h")
    .sign(new TextEncoder().encode(server.jwtSecret));
}

/** Raw HTTP against /rest/v1 with the anon key. */
export function rest(server: TestServer, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${server.url}/rest/v1${path}`, {
    ...init,
    headers: { apikey: server.anonKey, ...(init.headers as Record<string, string>) },
  });
}

/** Waits until the REST schema cache has seen a DDL change (the DDL watch is asynchronous). */
export async function waitForTable(server: TestServer, table: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const res = await rest(server, `/${table}?limit=0`);
    if (res.status !== 404) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`table ${table} never appeared in the REST schema cache`);
}
