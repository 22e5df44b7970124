import type { PgResource, PgResourceUnique } from "@dataplan/pg";
import { sql, type SQL } from "pg-sql2";
import { codecDirectives } from "./PgGqlDirectivesPlugin";
import { PgGqlError } from "./pgGqlErrors";

/** The primary key columns of a table (or of a view given `primary_key_columns`). */
export function primaryKeyAttributes(resource: PgResource): readonly string[] {
  const uniques = (resource.uniques ?? []) as readonly PgResourceUnique[];
  return uniques.find((u) => u.isPrimary)?.attributes ?? [];
}

/** `[schema, table]` as pg_graphql puts them at the head of a nodeId. */
export function nodeIdPrefix(resource: PgResource): [string, string] {
  const pgGql = codecDirectives(resource.codec);
  return [pgGql?.schemaName ?? "", pgGql?.sqlName ?? resource.name];
}

/** pg_graphql's base64 of a jsonb array's text, without the newlines `encode` inserts. */
export function base64OfJsonbArray(elements: readonly SQL[]): SQL {
  return sql`translate(encode(convert_to(jsonb_build_array(${sql.join(elements, ", ")})::text, 'utf-8'), 'base64'), E'\\n', '')`;
}

/** The nodeId of the row at `alias`, computed in SQL so it is byte-identical to pg_graphql's. */
export function nodeIdSql(resource: PgResource, alias: SQL): SQL {
  const [schema, table] = nodeIdPrefix(resource);
  return base64OfJsonbArray([
    sql`${sql.literal(schema)}::text`,
    sql`${sql.literal(table)}::text`,
    ...primaryKeyAttributes(resource).map((a) => sql`to_jsonb(${alias}.${sql.identifier(a)})`),
  ]);
}

/** Decodes a nodeId to `[schema, table, ...pk]`, or undefined when it is not one. */
export function decodeNodeId(nodeId: string): unknown[] | undefined {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(nodeId, "base64").toString("utf8"));
    return Array.isArray(parsed) && parsed.length >= 3 ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The primary key values of a nodeId that must belong to `resource` (pg_graphql's errors otherwise). */
export function pgGqlDecodeNodeId(resource: PgResource, nodeId: string): [string, unknown][] {
  const decoded = decodeNodeId(nodeId);
  if (!decoded) throw new PgGqlError("Invalid input for nodeId");
  const [schema, table] = nodeIdPrefix(resource);
  if (decoded[0] !== schema || decoded[1] !== table) {
    throw new PgGqlError("nodeId belongs to a different collection");
  }
  return primaryKeyAttributes(resource).map((a, i) => [a, decoded[i + 2]]);
}
