import type { z } from "zod";
import type { AppContext } from "../context";
import { readSettings, writeSettings } from "../projects/settings";
import type { Access } from "./http";
import type { ProjectNeed, RouteInput, RouteOptions, RouteTable } from "./route";

/** Where a project's configuration document is kept: read whole, changed by merging fields into it. */
export interface DocumentStore<T> {
  read(ref: string): Promise<T>;
  /** Merges `changes` into the stored document and answers the whole result. */
  write(ref: string, changes: Partial<T>): Promise<T>;
}

/** The family's settings document of `kind` (`platform.project_settings`) as a store. */
export function settingsDocument<T extends object>(
  ctx: AppContext,
  kind: string,
  defaults: T,
): DocumentStore<T> {
  return {
    read: (ref) => readSettings(ctx, ref, kind, defaults),
    write: (ref, changes) => writeSettings(ctx, ref, kind, defaults, changes),
  };
}

type Input<B extends z.ZodType> = RouteInput<B, z.ZodType, ProjectNeed>;

interface Operation<T, B extends z.ZodType> {
  summary: string;
  access: Access;
  response?: z.ZodType;
  /** The project the operation needs (default `any`). */
  project?: ProjectNeed;
  feature?: RouteOptions["feature"];
  /** What the spec answers (default: the document); the update's runs once the document is written. */
  answer?: (doc: T, input: Input<B>) => unknown;
}

/** A configuration document of a project, read by GET and changed by the spec's PATCH, PUT or POST. */
export interface ConfigDocument<T extends object, B extends z.ZodType> {
  path: string;
  store: DocumentStore<T>;
  read: Operation<T, z.ZodUnknown>;
  update: Operation<T, B> & {
    method: "patch" | "put" | "post";
    body: B;
    status: number;
    /** The fields the body changes, checked (default: the body as is). */
    changes?: (body: z.infer<B>, input: Input<B>) => Partial<T> | Promise<Partial<T>>;
  };
}

/** Declares a configuration document's GET and its update in `routes`, both on the `:ref` project. */
export function configDocumentRoutes<
  T extends object,
  B extends z.ZodType,
  F extends ProjectNeed | undefined,
>(routes: RouteTable<F>, document: ConfigDocument<T, B>): void {
  const { path, store, read, update } = document;
  routes.get(
    path,
    read.summary,
    {
      project: read.project ?? "any",
      feature: read.feature,
      access: read.access,
      response: read.response,
      status: 200,
    },
    async (input) => {
      const doc = await store.read(input.project.ref);
      return read.answer ? read.answer(doc, input) : doc;
    },
  );
  routes[update.method](
    path,
    update.summary,
    {
      project: update.project ?? "any",
      feature: update.feature,
      access: update.access,
      body: update.body,
      response: update.response,
      status: update.status,
    },
    async (input) => {
      const changes = update.changes ? await update.changes(input.body, input) : (input.body as Partial<T>);
      const doc = await store.write(input.project.ref, changes);
      return update.answer ? update.answer(doc, input) : doc;
    },
  );
}
