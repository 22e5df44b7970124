import type { ProjectRuntime } from "../projects/runtime";
import { schemaCacheOf, type Column } from "./schemaCache";

/** OpenAPI 2.0 description of the REST layer for one schema, as PostgREST serves it at `/`. */

function columnSchema(c: Column): Record<string, unknown> {
  const t = c.typname;
  const base: Record<string, unknown> = { format: c.type };
  if (["int2", "int4", "int8"].includes(t)) base.type = "integer";
  else if (["float4", "float8", "numeric"].includes(t)) base.type = "number";
  else if (t === "bool") base.type = "boolean";
  else if (t.startsWith("_")) base.type = "array";
  else if (t === "json" || t === "jsonb") base.type = undefined;
  else base.type = "string";
  if (base.type === undefined) delete base.type;
  if (c.enumValues) base.enum = c.enumValues;
  if (c.defaultExpr) base.default = c.defaultExpr;
  if (c.description) base.description = c.description;
  return base;
}

/** What `role` may do in `schema`: privileges per relation and the functions it may execute. */
interface RolePrivileges {
  relations: Map<string, { select: boolean; insert: boolean; update: boolean; delete: boolean }>;
  functions: Set<string>;
}

async function privilegesOf(project: ProjectRuntime, role: string, schema: string): Promise<RolePrivileges> {
  const { rows } = await project.adminPool.query(
    `select 'r' as kind, c.relname as name, has_table_privilege($1, c.oid, 'select') as s,
            has_table_privilege($1, c.oid, 'insert') as i, has_table_privilege($1, c.oid, 'update') as u,
            has_table_privilege($1, c.oid, 'delete') as d
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $2 and c.relkind in ('r', 'p', 'v', 'm', 'f') and has_schema_privilege($1, n.oid, 'usage')
     union all
     select 'f', p.proname, has_function_privilege($1, p.oid, 'execute'), false, false, false
       from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = $2 and has_schema_privilege($1, n.oid, 'usage')`,
    [role, schema],
  );
  const relations: RolePrivileges["relations"] = new Map();
  const functions = new Set<string>();
  for (const r of rows) {
    if (r.kind === "f") {
      if (r.s) functions.add(r.name);
    } else if (r.s || r.i || r.u || r.d) {
      relations.set(r.name, { select: r.s, insert: r.i, update: r.u, delete: r.d });
    }
  }
  return { relations, functions };
}

/**
 * The REST layer's OpenAPI document for `schema`. With `role` (a data request), it lists only what that role
 * may use, as PostgREST's default `follow-privileges` mode does; without, everything (the Management API).
 */
export async function buildRestOpenApi(
  project: ProjectRuntime,
  schema: string,
  role?: string,
): Promise<Record<string, unknown>> {
  const cache = await schemaCacheOf(project, [schema]);
  const allowed = role === undefined ? undefined : await privilegesOf(project, role, schema);
  const paths: Record<string, unknown> = {
    "/": {
      get: {
        tags: ["Introspection"],
        summary: "OpenAPI description (this document)",
        responses: { 200: { description: "OK" } },
      },
    },
  };
  const definitions: Record<string, unknown> = {};
  for (const rel of cache.relations.values()) {
    if (rel.schema !== schema) continue;
    const may = allowed
      ? allowed.relations.get(rel.name)
      : { select: true, insert: true, update: true, delete: true };
    if (!may) continue;
    const fks = cache.foreignKeys.filter((fk) => fk.schema === rel.schema && fk.table === rel.name);
    const properties: Record<string, unknown> = {};
    for (const c of rel.columns) {
      const prop = columnSchema(c);
      const notes: string[] = [];
      if (rel.primaryKey.includes(c.name)) notes.push("Note:\nThis is a Primary Key.<pk/>");
      const fk = fks.find((f) => f.columns.includes(c.name));
      if (fk)
        notes.push(
          `Note:\nThis is a Foreign Key to \`${fk.refTable}.${fk.refColumns[fk.columns.indexOf(c.name)]}\`.<fk table='${fk.refTable}' column='${fk.refColumns[fk.columns.indexOf(c.name)]}'/>`,
        );
      if (notes.length) prop.description = [c.description, ...notes].filter(Boolean).join("\n\n");
      properties[c.name] = prop;
    }
    definitions[rel.name] = {
      type: "object",
      required: rel.columns.filter((c) => !c.nullable && !c.hasDefault && !c.generated).map((c) => c.name),
      properties,
      ...(rel.description ? { description: rel.description } : {}),
    };
    const ref = { $ref: `#/definitions/${rel.name}` };
    const ops: Record<string, unknown> = {};
    if (may.select)
      ops.get = {
        tags: [rel.name],
        responses: {
          200: { description: "OK", schema: { type: "array", items: ref } },
          206: { description: "Partial Content" },
        },
      };
    if (rel.insertable && may.insert)
      ops.post = {
        tags: [rel.name],
        parameters: [{ name: "body", in: "body", schema: ref }],
        responses: { 201: { description: "Created" } },
      };
    if (rel.updatable && may.update)
      ops.patch = {
        tags: [rel.name],
        parameters: [{ name: "body", in: "body", schema: ref }],
        responses: { 204: { description: "No Content" } },
      };
    if (rel.deletable && may.delete)
      ops.delete = { tags: [rel.name], responses: { 204: { description: "No Content" } } };
    paths[`/${rel.name}`] = ops;
  }
  for (const fns of cache.functions.values()) {
    for (const fn of fns) {
      if (fn.schema !== schema || (allowed && !allowed.functions.has(fn.name))) continue;
      const args = Object.fromEntries(
        fn.args.filter((a) => a.name).map((a) => [a.name, { format: a.type, type: "string" }]),
      );
      paths[`/rpc/${fn.name}`] = {
        post: {
          tags: ["(rpc) " + fn.name],
          ...(fn.description ? { summary: fn.description } : {}),
          parameters: [
            {
              name: "args",
              in: "body",
              required: true,
              schema: {
                type: "object",
                properties: args,
                required: fn.args.filter((a) => a.name && !a.hasDefault).map((a) => a.name),
              },
            },
          ],
          responses: { 200: { description: "OK" } },
        },
      };
    }
  }
  return {
    swagger: "2.0",
    info: {
      title: "Strata REST API",
      description: `REST layer of project ${project.ref}`,
      version: "12.2.0",
    },
    host: "",
    basePath: "/rest/v1",
    schemes: ["http", "https"],
    consumes: ["application/json", "application/vnd.pgrst.object+json", "text/csv"],
    produces: ["application/json", "application/vnd.pgrst.object+json", "text/csv"],
    paths,
    definitions,
  };
}
