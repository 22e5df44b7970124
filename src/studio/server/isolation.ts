import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { RequestHandler } from "express";
import type { AppContext } from "../../context";
import { refOfHost } from "../../http/gate";

/**
 * The dashboard shares its origin with the default project's edge functions and storage objects, whose bodies
 * a tenant writes. A page of theirs running as that origin could call the dashboard's forwarder with the
 * visitor's session. At the dashboard's origin (any host that names no project), such responses therefore
 * carry `Content-Security-Policy: sandbox`: a page still renders and runs its scripts, but as an opaque origin
 * that the dashboard's endpoints (same-origin only, with a custom header) do not answer. Added after the
 * response's own headers, so a policy the tenant sends cannot lift it.
 */
const SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads";

function setAll(res: ServerResponse, headers: OutgoingHttpHeaders | unknown[]) {
  if (Array.isArray(headers)) {
    // The raw form: [name, value, name, value, ...] or [[name, value], ...].
    const pairs = Array.isArray(headers[0]) ? (headers as [string, string][]) : [];
    if (!pairs.length)
      for (let i = 0; i + 1 < headers.length; i += 2)
        pairs.push([String(headers[i]), String(headers[i + 1])]);
    for (const [name, value] of pairs) res.appendHeader(name, value);
  } else {
    for (const [name, value] of Object.entries(headers)) if (value !== undefined) res.setHeader(name, value);
  }
}

function sandboxed(res: ServerResponse) {
  // The headers are set on the response first, so the original is called with status and message only.
  const writeHead = res.writeHead.bind(res) as (status: number, message?: string) => ServerResponse;
  res.writeHead = function (this: ServerResponse, status: number, ...rest: unknown[]) {
    const message = typeof rest[0] === "string" ? rest[0] : undefined;
    const headers = (message === undefined ? rest[0] : rest[1]) as
      OutgoingHttpHeaders | unknown[] | undefined;
    if (headers) setAll(this, headers);
    this.appendHeader("content-security-policy", SANDBOX);
    return message === undefined ? writeHead(status) : writeHead(status, message);
  } as ServerResponse["writeHead"];
}

/** Mounted ahead of the routes that serve tenant-written bodies (edge functions, storage objects). */
export function sandboxTenantContent(ctx: AppContext): RequestHandler {
  return (req, res, next) => {
    if (refOfHost(ctx, req.headers.host) === undefined) sandboxed(res);
    next();
  };
}
