import { TYPES, type PgCodecWithAttributes, type PgResource, type PgSelectSingleStep } from "@dataplan/pg";
import { lambda, type Step } from "grafast";
import type { GraphQLFieldConfigMap, GraphQLOutputType } from "grafast/graphql";
import { sql, type SQL } from "pg-sql2";
import { pageOf } from "./PgGqlConnectionPlugin";
import { attributeDirectives, codecDirectives } from "./PgGqlDirectivesPlugin";
import { PgGqlError } from "./pgGqlErrors";
import { primaryKeyAttributes } from "./pgGqlNodeId";
import { columnFilterKind } from "./pgGqlTypes";

/** pg_graphql's per-column aggregate operations, in the order its `<T>Aggregate` type lists them. */
export type AggregateOperation = "sum" | "avg" | "min" | "max";
const OPERATIONS: AggregateOperation[] = ["sum", "avg", "min", "max"];

declare global {
  namespace GraphileBuild {
    interface Inflection {
      /** `<T>Aggregate` */
      pgGqlAggregateType(this: Inflection, typeName: string): string;
      /** `<T>SumAggregateResult`, `<T>AvgAggregateResult`, `<T>MinAggregateResult`, `<T>MaxAggregateResult` */
      pgGqlAggregateResultType(this: Inflection, typeName: string, operation: AggregateOperation): string;
    }
    interface ScopeObject {
      isPgGqlAggregate?: boolean;
      pgGqlAggregateOperation?: AggregateOperation;
    }
  }
}

/**
 * What each operation accepts and returns, by the GraphQL scalar a column is exposed as: sum and
 * avg take numbers; min and max anything ordered (numbers, strings, dates and times, booleans) and
 * keep the column's type. Sums of integers widen to BigInt and averages of exact numbers are
 * BigFloat, as Postgres widens them; floats stay Float.
 */
const NUMERIC_RESULTS: Record<string, { sum: string; avg: string }> = {
  Int: { sum: "BigInt", avg: "BigFloat" },
  BigInt: { sum: "BigInt", avg: "BigFloat" },
  BigFloat: { sum: "BigFloat", avg: "BigFloat" },
  Float: { sum: "Float", avg: "Float" },
};
const ORDERED_SCALARS = new Set([
  ...Object.keys(NUMERIC_RESULTS),
  "String",
  "Date",
  "Datetime",
  "Time",
  "Boolean",
]);

interface AggregateColumn {
  attributeName: string;
  fieldName: string;
  description?: string;
  /** Name of the GraphQL scalar of the result. */
  resultType: string;
}

/** The columns an operation applies to, in column order, with the scalar each result has. */
function aggregateColumns(
  build: GraphileBuild.Build,
  codec: PgCodecWithAttributes,
  operation: AggregateOperation,
): AggregateColumn[] {
  const out: AggregateColumn[] = [];
  for (const [attributeName, attribute] of Object.entries(codec.attributes)) {
    if (!build.behavior.pgCodecAttributeMatches([codec, attributeName], "attribute:select")) continue;
    const kind = columnFilterKind(build, attribute.codec);
    if (kind?.kind !== "scalar") continue;
    const numeric = NUMERIC_RESULTS[kind.scalar];
    let resultType: string | undefined;
    if (operation === "sum" || operation === "avg") resultType = numeric?.[operation];
    else if (ORDERED_SCALARS.has(kind.scalar)) resultType = kind.scalar;
    if (!resultType) continue;
    out.push({
      attributeName,
      fieldName: build.inflection.attribute({ codec, attributeName }),
      description: attributeDirectives(attribute).description,
      resultType,
    });
  }
  return out;
}

/**
 * The SQL of one aggregate, as jsonb: pg_graphql returns aggregate results in their `to_jsonb`
 * form (numbers as JSON numbers, dates and times as ISO strings). Postgres has no min/max for
 * booleans; `bool_and`/`bool_or` are the same thing for them.
 */
function aggregateSql(operation: AggregateOperation, column: SQL, resultType: string): SQL {
  const fn =
    resultType === "Boolean" && (operation === "min" || operation === "max")
      ? operation === "min"
        ? sql`bool_and`
        : sql`bool_or`
      : sql.raw(operation);
  return sql`to_jsonb(${fn}(${column}))`;
}

function aggregateEnabled(resource: PgResource): boolean {
  return (
    codecDirectives(resource.codec)?.entity.aggregate?.enabled === true &&
    !resource.parameters &&
    !resource.isVirtual &&
    Boolean(resource.codec.attributes) &&
    primaryKeyAttributes(resource).length > 0
  );
}

const OPERATION_LABEL: Record<AggregateOperation, string> = {
  sum: "Sum",
  avg: "Avg",
  min: "Min",
  max: "Max",
};

const OPERATION_DESCRIPTION: Record<AggregateOperation, string> = {
  sum: "Summation aggregates for numeric fields",
  avg: "Average aggregates for numeric fields",
  min: "Minimum aggregates for comparable fields",
  max: "Maximum aggregates for comparable fields",
};

const RESULT_DESCRIPTION: Record<AggregateOperation, string> = {
  sum: "Result of summation aggregation for",
  avg: "Result of average aggregation for",
  min: "Result of minimum aggregation for",
  max: "Result of maximum aggregation for",
};

function registerAggregateTypes(build: GraphileBuild.Build, resource: PgResource): void {
  const { inflection, graphql } = build;
  const codec = resource.codec as PgCodecWithAttributes;
  const tableTypeName = inflection.tableType(codec);
  const aggregateTypeName = inflection.pgGqlAggregateType(tableTypeName);
  if (build.getTypeMetaByName(aggregateTypeName)) return;

  for (const operation of OPERATIONS) {
    build.registerObjectType(
      inflection.pgGqlAggregateResultType(tableTypeName, operation),
      { isPgGqlAggregate: true, pgGqlAggregateOperation: operation, pgCodec: codec },
      () => ({
        description: `${RESULT_DESCRIPTION[operation]} \`${tableTypeName}\``,
        fields: () => {
          const fields: GraphQLFieldConfigMap<unknown, unknown> = {};
          for (const column of aggregateColumns(build, codec, operation)) {
            fields[column.fieldName] = {
              description: column.description,
              type: build.getOutputTypeByName(column.resultType),
              plan($row: Step) {
                const $single = $row as PgSelectSingleStep;
                const alias = $single.getClassStep().alias;
                const target = sql`${alias}.${sql.identifier(column.attributeName)}`;
                return $single.select(aggregateSql(operation, target, column.resultType), TYPES.jsonb);
              },
            } as never;
          }
          return fields;
        },
      }),
      `pg_graphql ${operation} aggregate result for ${tableTypeName}`,
    );
  }

  build.registerObjectType(
    aggregateTypeName,
    { isPgGqlAggregate: true, pgCodec: codec },
    () => ({
      description: `Aggregate results for \`${tableTypeName}\``,
      fields: () => {
        const fields: GraphQLFieldConfigMap<unknown, unknown> = {
          count: {
            description: "The number of records matching the query",
            type: new graphql.GraphQLNonNull(graphql.GraphQLInt),
            plan($row: Step) {
              return lambda(($row as PgSelectSingleStep).select(sql`count(*)`, TYPES.bigint), Number);
            },
          } as never,
        };
        for (const operation of OPERATIONS) {
          if (aggregateColumns(build, codec, operation).length === 0) continue;
          fields[operation] = {
            description: OPERATION_DESCRIPTION[operation],
            type: build.getOutputTypeByName(
              inflection.pgGqlAggregateResultType(tableTypeName, operation),
            ) as GraphQLOutputType,
            plan: ($row: Step) => $row,
          } as never;
        }
        return fields;
      },
    }),
    `pg_graphql aggregate for ${tableTypeName}`,
  );
}

/**
 * pg_graphql's aggregates: with the table directive `{"aggregate": {"enabled": true}}`,
 * `<T>Connection.aggregate: <T>Aggregate { count, sum, avg, min, max }`, computed over the rows
 * matching the collection's filter (paging ignored), in the same SQL statement as the collection.
 */
export const PgGqlAggregatesPlugin: GraphileConfig.Plugin = {
  name: "PgGqlAggregatesPlugin",
  description: "pg_graphql aggregate field on connections (count, sum, avg, min, max)",
  version: "0.1.0",
  after: ["PgGqlConnectionPlugin"],
  inflection: {
    add: {
      pgGqlAggregateType(_options, typeName) {
        return `${typeName}Aggregate`;
      },
      pgGqlAggregateResultType(_options, typeName, operation) {
        return `${typeName}${OPERATION_LABEL[operation]}AggregateResult`;
      },
    },
  },
  schema: {
    hooks: {
      init(_, build) {
        for (const resource of Object.values(build.input.pgRegistry.pgResources) as PgResource[]) {
          if (aggregateEnabled(resource)) registerAggregateTypes(build, resource);
        }
        return _;
      },
      GraphQLScalarType(config) {
        // Aggregate results arrive in their jsonb form, where sums and averages are JSON numbers;
        // pg_graphql answers them as numbers, so a number passes through. Column values of these
        // types arrive as strings and are answered as strings, as before.
        if (config.name !== "BigInt" && config.name !== "BigFloat") return config;
        const serialize = config.serialize;
        return {
          ...config,
          serialize: (value: unknown) =>
            typeof value === "number" ? value : serialize ? serialize(value) : value,
        };
      },
      GraphQLObjectType_fields(fields, build, context) {
        const { scope } = context;
        if (!scope.isConnectionType || !scope.pgCodec) return fields;
        const codec = scope.pgCodec;
        if (codecDirectives(codec)?.entity.aggregate?.enabled !== true) return fields;
        const tableTypeName = build.inflection.tableType(codec);
        const Aggregate = build.getTypeByName(build.inflection.pgGqlAggregateType(tableTypeName));
        if (!Aggregate) return fields;
        return {
          ...fields,
          aggregate: {
            description: `Aggregate functions calculated on the collection of \`${tableTypeName}\``,
            type: Aggregate as GraphQLOutputType,
            plan($select: Step) {
              const page = pageOf($select);
              if (!page) throw new PgGqlError("aggregate is not available here");
              return page.$matching.singleAsRecord();
            },
          } as never,
        };
      },
    },
  },
};
