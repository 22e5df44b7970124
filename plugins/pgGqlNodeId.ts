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

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function nodeIdError(detail: string): PgGqlError {
  return new PgGqlError(`Invalid value passed to nodeId argument${detail}`);
}

/**
 * Parses a nodeId to `[schema, table, ...pk]` as pg_graphql does, failing with its numbered messages
 * (clients match on them): not a string, not base64, not UTF-8, not JSON, not a `[schema, table, pk...]` array.
 */
export function parseNodeId(value: unknown): unknown[] {
  if (typeof value !== "string") throw nodeIdError(", Error 1");
  if (!BASE64.test(value) || value.replace(/=+$/, "").length % 4 === 1) throw nodeIdError(". Error 2");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(value, "base64"));
  } catch {
    throw nodeIdError(". Error 3");
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw nodeIdError(". Error 4");
  }
  if (!Array.isArray(parsed)) throw nodeIdError(". Error 10");
  if (parsed.length < 3) throw nodeIdError(". Error 5");
  if (typeof parsed[0] !== "string") throw nodeIdError(". Error 6");
  if (typeof parsed[1] !== "string") throw nodeIdError(". Error 7");
  return parsed;
}

/** The primary key values of a nodeId that must belong to `resource` (pg_graphql's errors otherwise). */
export function pgGqlDecodeNodeId(resource: PgResource, nodeId: string): [string, unknown][] {
  const decoded = parseNodeId(nodeId);
  const [schema, table] = nodeIdPrefix(resource);
  if (decoded[0] !== schema || decoded[1] !== table) {
    throw new PgGqlError("nodeId belongs to a different collection");
  }
  return primaryKeyAttributes(resource).map((a, i) => [a, decoded[i + 2]]);
}
