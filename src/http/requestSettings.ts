import type { Request } from "express";

/**
 * The request's method, path and headers as PostgREST hands them to SQL (`request.method`,
 * `request.path`, `request.headers`, read with `current_setting`), credentials left out. On the
 * platform GraphQL travels through PostgREST too, so both data interfaces set them.
 */
export function requestSettingsOf(req: Request): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name in req.headers) {
    if (name === "authorization" || name === "apikey" || name === "cookie") continue;
    const value = req.headers[name];
    headers[name] = Array.isArray(value) ? value.join(", ") : (value ?? "");
  }
  return {
    "request.method": req.method,
    "request.path": req.path,
    "request.headers": JSON.stringify(headers),
  };
}
