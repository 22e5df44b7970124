import type { PgCodec, PgCodecAttribute } from "@dataplan/pg";
import { PgGqlError } from "./pgGqlErrors";
import type { GraphQLNamedType } from "grafast/graphql";

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

/** What the gather phase learns about a column for inputs (`attribute.extensions.pgGqlColumn`, set by PgGqlMutationsPlugin). */
export interface ColumnInputInfo {
  /** Owns a sequence (serial) or is an identity column: pg_graphql leaves it out of inputs. */
  serial?: boolean;
  /** A generated column: never written. */
  generated?: boolean;
  /** `varchar(n)` / `char(n)` (or arrays of them): the `n` pg_graphql checks string inputs against. */
  maxLength?: number;
}

export function columnInputInfo(attribute: PgCodecAttribute | undefined): ColumnInputInfo {
  return (attribute?.extensions as { pgGqlColumn?: ColumnInputInfo } | undefined)?.pgGqlColumn ?? {};
}

/** pg_graphql refuses a string input longer than the column's `varchar(n)`/`char(n)` allows. */
export function assertMaxLength(value: unknown, maxLength: number | undefined): void {
  if (maxLength === undefined) return;
  for (const v of Array.isArray(value) ? value : [value]) {
    if (typeof v === "string" && [...v].length > maxLength) {
      throw new PgGqlError(`Invalid input for String type. Maximum character length ${maxLength}`);
    }
  }
}
