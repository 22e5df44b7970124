import type { Request } from "express";

/**
 * The request's method, path and headers as PostgREST hands them to SQL (`request.method`,
 * `request.path`, `request.headers`, read with `current_setting`), credentials left out. On the
 * platform GraphQL travels through PostgREST too, so both data interfaces set them.
 */
export function requestSettingsOf(req: Request): Record<string, string> {
  const headers = Object.fromEntries(
    Object.entries(req.headers)
      .filter(([k]) => k !== "authorization" && k !== "apikey" && k !== "cookie")
      .map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : (v ?? "")]),
  );
  return {
    "request.method": req.method,
    "request.path": req.path,
    "request.headers": JSON.stringify(headers),
  };
}
