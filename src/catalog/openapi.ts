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

export async function buildRestOpenApi(
  project: ProjectRuntime,
  schema: string,
): Promise<Record<string, unknown>> {
  const cache = await schemaCacheOf(project, [schema]);
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
    const ops: Record<string, unknown> = {
      get: {
        tags: [rel.name],
        responses: {
          200: { description: "OK", schema: { type: "array", items: ref } },
          206: { description: "Partial Content" },
        },
      },
    };
    if (rel.insertable)
      ops.post = {
        tags: [rel.name],
        parameters: [{ name: "body", in: "body", schema: ref }],
        responses: { 201: { description: "Created" } },
      };
    if (rel.updatable)
      ops.patch = {
        tags: [rel.name],
        parameters: [{ name: "body", in: "body", schema: ref }],
        responses: { 204: { description: "No Content" } },
      };
    if (rel.deletable) ops.delete = { tags: [rel.name], responses: { 204: { description: "No Content" } } };
    paths[`/${rel.name}`] = ops;
  }
  for (const fns of cache.functions.values()) {
    for (const fn of fns) {
      if (fn.schema !== schema) continue;
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
