import type { PgCodec } from "@dataplan/pg";
import type { GraphQLNamedType } from "grafast/graphql";
import { PgGqlError } from "./pgGqlErrors";

/** pg_graphql's filterable scalars and the operators each filter type offers (alphabetical, as pg_graphql lists them). */
const ORDERED = ["eq", "gt", "gte", "in", "is", "lt", "lte", "neq"];
export const SCALAR_FILTER_OPERATORS: Record<string, string[]> = {
  BigFloat: ORDERED,
  BigInt: ORDERED,
  Boolean: ["eq", "is"],
  Date: ORDERED,
  Datetime: ORDERED,
  Float: ORDERED,
  ID: ["eq"],
  Int: ORDERED,
  Opaque: ["eq", "is"],
  String: [
    "eq",
    "gt",
    "gte",
    "ilike",
    "in",
    "iregex",
    "is",
    "like",
    "lt",
    "lte",
    "neq",
    "regex",
    "startsWith",
  ],
  Time: ORDERED,
  UUID: ["eq", "in", "is", "neq"],
};
export const ENUM_FILTER_OPERATORS = ["eq", "in", "is", "neq"];
export const LIST_FILTER_OPERATORS = ["containedBy", "contains", "eq", "is", "overlaps"];
/** Scalars that have a `<Scalar>ListFilter`. */
export const LIST_FILTER_SCALARS = Object.keys(SCALAR_FILTER_OPERATORS).filter(
  (name) => name !== "ID" && name !== "Opaque",
);

export type ColumnFilterKind =
  { kind: "scalar"; scalar: string } | { kind: "enum"; typeName: string } | { kind: "list"; scalar: string };

/** How pg_graphql filters a column of this codec, from the GraphQL type it is exposed as; undefined when it cannot. */
export function columnFilterKind(build: GraphileBuild.Build, codec: PgCodec): ColumnFilterKind | undefined {
  const named = (c: PgCodec): GraphQLNamedType | undefined => {
    const type = build.getGraphQLTypeByPgCodec(c, "output");
    return type ? build.graphql.getNamedType(type) : undefined;
  };
  if (codec.arrayOfCodec) {
    if (codec.arrayOfCodec.arrayOfCodec) return undefined;
    const inner = named(codec.arrayOfCodec);
    if (!inner) return undefined;
    if (inner instanceof build.graphql.GraphQLEnumType) return undefined;
    return LIST_FILTER_SCALARS.includes(inner.name) ? { kind: "list", scalar: inner.name } : undefined;
  }
  const type = named(codec);
  if (!type) return undefined;
  if (type instanceof build.graphql.GraphQLEnumType) return { kind: "enum", typeName: type.name };
  if (type.name === "JSON") return undefined;
  if (SCALAR_FILTER_OPERATORS[type.name]) return { kind: "scalar", scalar: type.name };
  return undefined;
}

declare global {
  namespace DataplanPg {
    interface PgCodecAttributeExtensions {
      /** The n of a varchar(n)/char(n) column (PgGqlScalarsPlugin). */
      pgGqlMaxLength?: number;
    }
  }
}

/**
 * pg_graphql's check of a string bound to a varchar(n)/char(n) column, in filters and in mutation
 * input alike (list values are checked element by element).
 */
export function checkMaxLength(value: unknown, maxLength: number | undefined): void {
  if (maxLength === undefined) return;
  for (const item of Array.isArray(value) ? value : [value]) {
    if (typeof item === "string" && [...item].length > maxLength) {
      throw new PgGqlError(`Invalid input for String type. Maximum character length ${maxLength}`);
    }
  }
}
