import { isIP } from "node:net";
import type { Request, Response } from "express";
import type { AppContext } from "../../context";
import { openDataRequest, openProject } from "../../http/gate";
import type { ProjectRuntime } from "../../projects/runtime";
import { authSettings, type AuthSettings } from "../authConfig";
import type { AuthLogLocals } from "../authLogs";
import type { AuthCall, LimitBucket } from "../call";
import type { RequestAuth } from "../dataAuth";
import type { RateLimits } from "./limits";

/**
 * The request-context hook of /auth/v1, run first on every route: finds the project (from the Host
 * header), checks the API key where the route takes one, reads the project's auth settings and applies
 * Sb-Forwarded-For; the handler and the middleware after this one read all of it from the AuthCall.
 */
export async function openCall(
  ctx: AppContext,
  limits: RateLimits,
  req: Request,
  res: Response,
  options: { apiKey: boolean },
): Promise<AuthCall> {
  let project: ProjectRuntime;
  let key: RequestAuth = { role: "anon", claims: {} };
  if (options.apiKey) ({ project, auth: key } = await openDataRequest(ctx, req, { credentials: "key" }));
  else project = await openProject(ctx, req);
  (res.locals as AuthLogLocals).authRef = project.ref;
  const settings = await authSettings(project.platformPool, project.ref);
  applySbForwardedFor(req, settings);
  const call: AuthCall = {
    ctx,
    req,
    res,
    project,
    key,
    settings,
    apiUrl: `${req.protocol}://${req.get("host")}/auth/v1`,
    consume: (bucket: LimitBucket) => limits.consume(bucket, { ref: project.ref, ip: req.ip, settings }),
  };
  return call;
}

const SBFF_HEADER = "sb-forwarded-for";

/**
 * security_sb_forwarded_for_enabled: the leftmost address of `Sb-Forwarded-For`, when it is a valid IP, is
 * the client's address for everything that uses it (rate limits per address, CAPTCHA's remoteip, hook
 * metadata), as the platform's sbff middleware; an invalid value is ignored.
 */
function applySbForwardedFor(req: Request, settings: AuthSettings): void {
  if (settings.security_sb_forwarded_for_enabled !== true || !req.get(SBFF_HEADER)) return;
  const first = String(req.get(SBFF_HEADER) ?? "")
    .split(",")[0]
    .trim();
  if (!isIP(first)) return;
  Object.defineProperty(req, "ip", { value: first, configurable: true });
}
