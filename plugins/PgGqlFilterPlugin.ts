import type { PgCodec, PgCodecWithAttributes, PgCondition, PgResource } from "@dataplan/pg";
import type { GraphQLInputType } from "grafast/graphql";
import { sql, type SQL } from "pg-sql2";
import { PgGqlError } from "./pgGqlErrors";
import { operandSql } from "./pgGqlFilterOperands";
import { pgGqlDecodeNodeId, primaryKeyAttributes } from "./pgGqlNodeId";
import {
  assertMaxLength,
  columnFilterKind,
  columnInputInfo,
  ENUM_FILTER_OPERATORS,
  LIST_FILTER_OPERATORS,
  LIST_FILTER_SCALARS,
  SCALAR_FILTER_OPERATORS,
} from "./pgGqlTypes";

declare global {
  namespace GraphileBuild {
    interface ScopeInputObject {
      isPgGqlFilter?: boolean;
      isPgGqlScalarFilter?: boolean;
    }
  }
}

/** The column a filter input applies to, handed from the `<T>Filter` field to the operator fields. */
interface ColumnTarget {
  condition: PgCondition<any>;
  column: string;
  codec: PgCodec;
  maxLength?: number;
}

/** A text value cast to the column's type, as pg_graphql binds filter values. */
function castValue(value: unknown, codec: PgCodec): SQL {
  const text = Array.isArray(value) ? value.map((v) => (v === null ? null : String(v))) : String(value);
  return operandSql(text, codec.sqlType);
}

function arrayOf(codec: PgCodec): SQL {
  return sql`${codec.sqlType}[]`;
}

const BINARY: Record<string, SQL> = {
  eq: sql`=`,
  neq: sql`<>`,
  lt: sql`<`,
  lte: sql`<=`,
  gt: sql`>`,
  gte: sql`>=`,
  startsWith: sql`^@`,
  like: sql`like`,
  ilike: sql`ilike`,
  regex: sql`~`,
  iregex: sql`~*`,
  contains: sql`@>`,
  containedBy: sql`<@`,
  overlaps: sql`&&`,
};

/** The SQL condition of one operator on one column. */
function operatorCondition(op: string, target: ColumnTarget, value: unknown): SQL {
  assertMaxLength(value, target.maxLength);
  const column = sql`${target.condition.alias}.${sql.identifier(target.column)}`;
  if (op === "is") {
    if (value === null) throw new PgGqlError("Error transpiling Is filter value type");
    return value === "NULL" ? sql`${column} is null` : sql`${column} is not null`;
  }
  // pg_graphql binds a null operand as SQL NULL: the comparison then matches no row.
  if (value === null) return sql.false;
  if (op === "in") {
    const texts = (value as unknown[]).map((v) => (v === null ? null : String(v)));
    return sql`${column} = any(${operandSql(texts, arrayOf(target.codec))})`;
  }
  const isArrayColumn = Boolean(target.codec.arrayOfCodec);
  const operand =
    isArrayColumn && !Array.isArray(value)
      ? castValue([value], target.codec)
      : castValue(value, target.codec);
  return sql`${column} ${BINARY[op]} ${operand}`;
}

/**
 * pg_graphql filters: `<T>Filter` with one `<Scalar>Filter` per column, `nodeId`, and `and`/`or`/`not`;
 * compiled into the WHERE clause of the same statement. Empty `and`/`or`/`not` are ignored.
 */
export const PgGqlFilterPlugin: GraphileConfig.Plugin = {
  name: "PgGqlFilterPlugin",
  description: "pg_graphql <T>Filter input types and their SQL",
  version: "0.1.0",
  after: ["PgTablesPlugin", "PgCodecsPlugin"],
  schema: {
    hooks: {
      init(_, build) {
        const { inflection, graphql } = build;
        build.registerEnumType(
          "FilterIs",
          {},
          () => ({ values: { NULL: { value: "NULL" }, NOT_NULL: { value: "NOT_NULL" } } }),
          "pg_graphql FilterIs",
        );
        const registerOperatorFilter = (
          typeName: string,
          operators: string[],
          elementType: () => GraphQLInputType,
          listValued: boolean,
          description: string,
        ) =>
          build.registerInputObjectType(
            typeName,
            { isPgGqlScalarFilter: true },
            () => ({
              description,
              fields: () =>
                Object.fromEntries(
                  operators.map((op) => {
                    const element = elementType();
                    const type =
                      op === "is"
                        ? build.getInputTypeByName("FilterIs")
                        : op === "in" || listValued
                          ? new graphql.GraphQLList(new graphql.GraphQLNonNull(element))
                          : element;
                    return [
                      op,
                      {
                        type,
                        apply(target: ColumnTarget, value: unknown) {
                          if (value === undefined) return;
                          target.condition.where(operatorCondition(op, target, value));
                        },
                      },
                    ];
                  }),
                ),
            }),
            `pg_graphql ${typeName}`,
          );
        for (const [scalar, operators] of Object.entries(SCALAR_FILTER_OPERATORS)) {
          const typeName = inflection.pgGqlScalarFilterType(scalar, false);
          registerOperatorFilter(
            typeName,
            operators,
            () => build.getInputTypeByName(scalar),
            false,
            `Boolean expression comparing fields on type "${scalar}"`,
          );
        }
        for (const scalar of LIST_FILTER_SCALARS) {
          const typeName = inflection.pgGqlScalarFilterType(scalar, true);
          registerOperatorFilter(
            typeName,
            LIST_FILTER_OPERATORS,
            () => build.getInputTypeByName(scalar),
            true,
            `Boolean expression comparing fields on type "[${scalar}]"`,
          );
        }
        const codecs = Object.values(build.input.pgRegistry.pgCodecs) as PgCodec[];
        for (const codec of codecs) {
          if (!(codec as { values?: unknown }).values || codec.isAnonymous) continue;
          const enumTypeName = inflection.enumType(codec as never);
          registerOperatorFilter(
            inflection.pgGqlScalarFilterType(enumTypeName, false),
            ENUM_FILTER_OPERATORS,
            () => build.getInputTypeByName(enumTypeName),
            false,
            `Boolean expression comparing fields on type "${enumTypeName}"`,
          );
        }
        const resources = Object.values(build.input.pgRegistry.pgResources) as PgResource[];
        for (const resource of resources) {
          if (resource.parameters || !resource.codec.attributes || resource.isVirtual) continue;
          if (primaryKeyAttributes(resource).length === 0) continue;
          registerTableFilter(build, resource);
        }
        return _;
      },
    },
  },
};

function registerTableFilter(build: GraphileBuild.Build, resource: PgResource): void {
  const { inflection, graphql } = build;
  const codec = resource.codec as PgCodecWithAttributes;
  const tableTypeName = inflection.tableType(codec);
  const filterTypeName = inflection.pgGqlFilterType(tableTypeName);
  if (build.getTypeMetaByName(filterTypeName)) return;
  build.registerInputObjectType(
    filterTypeName,
    { isPgGqlFilter: true, pgCodec: codec },
    () => ({
      fields: () => {
        const Self = build.getInputTypeByName(filterTypeName);
        const fields: Record<string, unknown> = {};
        for (const [attributeName, attribute] of Object.entries(codec.attributes)) {
          if (!build.behavior.pgCodecAttributeMatches([codec, attributeName], "attribute:select")) {
            continue;
          }
          const kind = columnFilterKind(build, attribute.codec);
          if (!kind) continue;
          const typeName =
            kind.kind === "enum"
              ? inflection.pgGqlScalarFilterType(kind.typeName, false)
              : inflection.pgGqlScalarFilterType(kind.scalar, kind.kind === "list");
          fields[inflection.attribute({ codec, attributeName })] = {
            type: build.getInputTypeByName(typeName),
            apply(condition: PgCondition<any>): ColumnTarget {
              return {
                condition,
                column: attributeName,
                codec: attribute.codec,
                maxLength: columnInputInfo(attribute).maxLength,
              };
            },
          };
        }
        // A column named like a logical operator keeps its name; the operator is then absent (as in pg_graphql).
        const addUnlessColumn = (name: string, spec: unknown) => {
          if (!(name in fields)) fields[name] = spec;
        };
        addUnlessColumn("nodeId", {
          type: build.getInputTypeByName(inflection.pgGqlScalarFilterType("ID", false)),
          apply(condition: PgCondition<any>, value: { eq?: string } | null) {
            if (!value || value.eq == null) return;
            const pk = pgGqlDecodeNodeId(resource, value.eq);
            for (const [attributeName, pkValue] of pk) {
              const attribute = codec.attributes[attributeName];
              condition.where(
                sql`${condition.alias}.${sql.identifier(attributeName)} = ${castValue(pkValue, attribute.codec)}`,
              );
            }
          },
        });
        const list = new graphql.GraphQLList(new graphql.GraphQLNonNull(Self));
        addUnlessColumn("and", {
          type: list,
          description: "Returns true only if all its inner filters are true, otherwise returns false",
          apply(condition: PgCondition<any>, value: unknown[] | null) {
            if (!value || value.length === 0) return;
            return condition.andPlan();
          },
        });
        addUnlessColumn("or", {
          type: list,
          description: "Returns true if at least one of its inner filters is true, otherwise returns false",
          apply(condition: PgCondition<any>, value: unknown[] | null) {
            if (!value || value.length === 0) return;
            const or = condition.orPlan();
            return () => or.andPlan();
          },
        });
        addUnlessColumn("not", {
          type: Self,
          description: "Negates a filter",
          apply(condition: PgCondition<any>, value: Record<string, unknown> | null) {
            if (!value || Object.keys(value).length === 0) return;
            return condition.notPlan().andPlan();
          },
        });
        return fields as never;
      },
    }),
    `pg_graphql filter for ${tableTypeName}`,
  );
}
