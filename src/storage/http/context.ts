import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { AppContext } from "../../context";
import { openDataRequest, openProject } from "../../http/gate";
import { requestSettingsOf } from "../../http/requestSettings";
import { roleSettingsOf } from "../../catalog/roleSettings";
import type { ProjectRuntime } from "../../projects/runtime";
import { storageSettingsOf, type StorageSettings } from "../config";
import type { Caller } from "../service";

/**
 * The request context of /storage/v1: one hook opens the request through the data gate before any handler
 * runs and puts what the handlers work with on the request. Handlers never call the gate.
 */

/**
 * What a route needs: `caller`, a keyed request (the API key, then the bearer JWT) that works as that role;
 * `project`, a request that needs no key (public and signed URLs) and works as the project's owner.
 */
export type ContextNeed = "caller" | "project";

export interface StorageContext {
  project: ProjectRuntime;
  /** Who asks, on `caller` routes: role and claims, and the settings RLS may read. */
  caller?: Caller;
  /**
   * The project's storage configuration, read on the first call (one indexed row of the control plane, so a
   * PATCH of the config applies to the next request); most routes never need it.
   */
  settings: () => Promise<StorageSettings>;
}

declare module "express-serve-static-core" {
  interface Request {
    /** Set by `storageContext` on every /storage/v1 route. */
    storage?: StorageContext;
  }
}

async function callerOf(ctx: AppContext, req: Request): Promise<{ project: ProjectRuntime; caller: Caller }> {
  const { project, auth } = await openDataRequest(ctx, req);
  const settings = { ...(await roleSettingsOf(project, auth.role)), ...requestSettingsOf(req) };
  return { project, caller: { project, auth, settings } };
}

function onFirstCall<T>(read: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => (value ??= read());
}

/** The hook: opens the request as the route needs and puts its context on `req.storage`. */
export function storageContext(ctx: AppContext, need: ContextNeed): RequestHandler {
  return async (req: Request, _res: Response, next: NextFunction) => {
    const opened =
      need === "caller"
        ? await callerOf(ctx, req)
        : { project: await openProject(ctx, req), caller: undefined };
    const settings = onFirstCall(() => storageSettingsOf(ctx.platformPool, opened.project.ref));
    req.storage = { ...opened, settings };
    next();
  };
}

/** The context the hook put on a request (a route mounted without it is a programming error). */
export function storageContextOf(req: Request): StorageContext {
  if (!req.storage) throw new Error(`${req.method} ${req.originalUrl}: no storage context on the request`);
  return req.storage;
}
