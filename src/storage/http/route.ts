import express, { type Request, type RequestHandler, type Response, type Router } from "express";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import type { StorageSettings } from "../config";
import type { Caller, StorageService } from "../service";
import { storageContext, storageContextOf, type ContextNeed, type StorageContext } from "./context";
import { objectOf, type Fields, type Schema } from "./schema";

/**
 * A /storage/v1 route as the route table declares it: method and path, the context it needs (`caller` or
 * `project`), the checks that run before it, and the schemas of its path parameters, query and JSON body.
 * Mounted, a request passes the JSON parser (routes with a body schema), the context hook, the checks, the
 * schemas, then the handler.
 */

type Method = "get" | "head" | "post" | "put" | "delete" | "all";

/** What every handler receives; `P`, `Q`, `B`: its parameters, query and body as the schemas read them. */
export interface ProjectInput<P = undefined, Q = undefined, B = undefined> {
  req: Request;
  res: Response;
  service: StorageService;
  project: ProjectRuntime;
  settings: () => Promise<StorageSettings>;
  params: P;
  query: Q;
  body: B;
}

/** A keyed route's input: the caller besides. */
export interface CallerInput<P = undefined, Q = undefined, B = undefined> extends ProjectInput<P, Q, B> {
  caller: Caller;
}

/** A cross-cutting check named in the table, run after the context hook (a refusal is thrown). */
export type Check = (context: StorageContext) => Promise<void>;

/** The schemas of a route's inputs and the checks before it, as the table names them. */
export interface Inputs<P, Q, B> {
  checks?: Check[];
  params?: Schema<P>;
  query?: Schema<Q>;
  body?: Schema<B>;
}

/** A route of the table, its types checked where it was declared. */
export interface StorageRoute {
  mount(router: Router, ctx: AppContext, service: StorageService): void;
}

const json = express.json({ limit: "5mb" });

type InputOf<N extends ContextNeed, P, Q, B> = N extends "caller"
  ? CallerInput<P, Q, B>
  : ProjectInput<P, Q, B>;

/**
 * Declares the routes of one context need. The input's types come from the schemas named, never from the
 * handler: a handler that wants a body needs a body schema, and one that wants a caller a `caller` route.
 */
function routesFor<N extends ContextNeed>(need: N) {
  return <P = undefined, Q = undefined, B = undefined>(
    method: Method | Method[],
    path: string | string[],
    handler: (input: NoInfer<InputOf<N, P, Q, B>>) => Promise<void>,
    inputs: Inputs<P, Q, B> = {},
  ): StorageRoute => ({
    mount(router, ctx, service) {
      const stages: RequestHandler[] = [];
      if (inputs.body) stages.push(json);
      stages.push(storageContext(ctx, need));
      if (inputs.checks?.length) stages.push(checking(inputs.checks));
      stages.push(async (req, res) => {
        const input: ProjectInput<P, Q, B> & Partial<CallerInput<P, Q, B>> = {
          ...storageContextOf(req),
          req,
          res,
          service,
          params: read(inputs.params, () => req.params),
          query: read(inputs.query, () => req.query),
          body: read(inputs.body, () => objectOf(req.body)),
        };
        // The hook of a `caller` route put the caller there.
        await handler(input as InputOf<N, P, Q, B>);
      });
      for (const m of [method].flat()) router[m](path, ...stages);
    },
  });
}

/** A keyed route: the hook opens the request through the data gate and the handler works as its caller. */
export const caller = routesFor("caller");
/** A route that needs no key (public and signed URLs): the hook finds the project only. */
export const project = routesFor("project");

/** An input the route declares a schema for, read by it; undefined otherwise. */
function read<T>(schema: Schema<T> | undefined, raw: () => Fields): T {
  return (schema ? schema(raw()) : undefined) as T;
}

function checking(checks: Check[]): RequestHandler {
  return async (req, _res, next) => {
    for (const check of checks) await check(storageContextOf(req));
    next();
  };
}
