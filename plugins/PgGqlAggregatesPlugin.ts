import {
  TYPES,
  type PgCodec,
  type PgCodecWithAttributes,
  type PgResource,
  type PgSelectSingleStep,
} from "@dataplan/pg";
import { lambda, type Step } from "grafast";
import type { GraphQLFieldConfigMap, GraphQLOutputType } from "grafast/graphql";
import { sql, type SQL } from "pg-sql2";
import { pageOf } from "./PgGqlConnectionPlugin";
import { codecDirectives } from "./PgGqlDirectivesPlugin";
import { PgGqlError } from "./pgGqlErrors";
import { primaryKeyAttributes } from "./pgGqlNodeId";

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

/** Postgres's built-in types by oid, by the names pg_graphql decides aggregates on. */
const BUILTIN_TYPE_NAMES: Record<string, string> = {
  "21": "int2",
  "23": "int4",
  "20": "int8",
  "700": "float4",
  "701": "float8",
  "1700": "numeric",
  "790": "money",
  "25": "text",
  "1043": "varchar",
  "1042": "bpchar",
  "18": "char",
  "19": "name",
  "16": "bool",
  "1082": "date",
  "1083": "time",
  "1266": "timetz",
  "1114": "timestamp",
  "1184": "timestamptz",
};

function pgTypeName(codec: PgCodec): string | undefined {
  const extensions = codec.extensions as { oid?: string; pg?: { name?: string } } | undefined;
  if (extensions?.oid && BUILTIN_TYPE_NAMES[extensions.oid]) return BUILTIN_TYPE_NAMES[extensions.oid];
  // citext comes from an extension, so it has no fixed oid.
  return codec.name === "citext" || extensions?.pg?.name === "citext" ? "citext" : undefined;
}

const NUMERIC_TYPES = new Set(["int2", "int4", "int8", "float4", "float8", "numeric", "money"]);
const STRING_TYPES = new Set(["text", "varchar", "char", "bpchar", "name", "citext"]);
/** min/max result scalar of the ordered, non-string types. */
const ORDERED_RESULTS: Record<string, string> = {
  int2: "Int",
  int4: "Int",
  int8: "BigInt",
  float4: "BigFloat",
  float8: "BigFloat",
  numeric: "BigFloat",
  money: "Opaque",
  date: "Date",
  time: "Time",
  timetz: "Time",
  timestamp: "Datetime",
  timestamptz: "Datetime",
  bool: "Boolean",
};

/**
 * The GraphQL scalar of an operation's result on a column of this type, as pg_graphql types it;
 * undefined when the operation does not apply. sum and avg take numbers (integer sums are BigInt,
 * every other sum and every average BigFloat); min and max take numbers, strings, dates and times
 * and booleans.
 */
function aggregateResultType(pgType: string, operation: AggregateOperation): string | undefined {
  if (operation === "sum" || operation === "avg") {
    if (!NUMERIC_TYPES.has(pgType)) return undefined;
    return operation === "sum" && ["int2", "int4", "int8"].includes(pgType) ? "BigInt" : "BigFloat";
  }
  return STRING_TYPES.has(pgType) ? "String" : ORDERED_RESULTS[pgType];
}

interface AggregateColumn {
  attributeName: string;
  fieldName: string;
  pgType: string;
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
    const pgType = pgTypeName(attribute.codec);
    const resultType = pgType && aggregateResultType(pgType, operation);
    if (!pgType || !resultType) continue;
    out.push({
      attributeName,
      fieldName: build.inflection.attribute({ codec, attributeName }),
      pgType,
      resultType,
    });
  }
  return out;
}

const FUNCTIONS: Record<AggregateOperation, SQL> = {
  sum: sql`sum`,
  avg: sql`avg`,
  min: sql`min`,
  max: sql`max`,
};
const BOOLEAN_FUNCTIONS: Partial<Record<AggregateOperation, SQL>> = { min: sql`bool_and`, max: sql`bool_or` };

/**
 * The SQL of one aggregate, as jsonb: pg_graphql returns aggregate results as `jsonb_build_object`
 * makes them (numbers as JSON numbers, dates and times as ISO strings, money as its text) and
 * averages every column as numeric. Postgres has no min/max for booleans, where pg_graphql's query
 * fails; `bool_and`/`bool_or` are what they would mean.
 */
function aggregateSql(operation: AggregateOperation, column: SQL, pgType: string): SQL {
  const fn = (pgType === "bool" && BOOLEAN_FUNCTIONS[operation]) || FUNCTIONS[operation];
  const value = operation === "avg" ? sql`${column}::numeric` : column;
  return sql`to_jsonb(${fn}(${value}))`;
}

/**
 * An aggregate's jsonb text as a value. JSON numbers are answered as numbers, as pg_graphql does, except
 * integers beyond 2^53 (sums of big integers), which a double would round: those keep their exact digits
 * as a string.
 */
function aggregateValue(json: string | null): unknown {
  if (json === null) return null;
  const value: unknown = JSON.parse(json);
  return typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value) ? json : value;
}

/** The table directive `{"aggregate": {"enabled": true}}`. */
function aggregateDirectiveOn(codec: PgCodec): boolean {
  return codecDirectives(codec)?.entity.aggregate?.enabled === true;
}

function aggregateEnabled(resource: PgResource): boolean {
  return (
    aggregateDirectiveOn(resource.codec) &&
    !resource.parameters &&
    !resource.isVirtual &&
    Boolean(resource.codec.attributes) &&
    primaryKeyAttributes(resource).length > 0
  );
}

/** How pg_graphql names and describes each operation. */
const OPERATION_TEXTS: Record<
  AggregateOperation,
  { typePart: string; term: string; fieldTerm: string; description: string }
> = {
  sum: {
    typePart: "Sum",
    term: "summation",
    fieldTerm: "Sum",
    description: "Summation aggregates for numeric fields",
  },
  avg: {
    typePart: "Avg",
    term: "average",
    fieldTerm: "Average",
    description: "Average aggregates for numeric fields",
  },
  min: {
    typePart: "Min",
    term: "minimum",
    fieldTerm: "Minimum",
    description: "Minimum aggregates for comparable fields",
  },
  max: {
    typePart: "Max",
    term: "maximum",
    fieldTerm: "Maximum",
    description: "Maximum aggregates for comparable fields",
  },
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
        description: `Result of ${OPERATION_TEXTS[operation].term} aggregation for \`${tableTypeName}\``,
        fields: () => {
          const fields: GraphQLFieldConfigMap<unknown, unknown> = {};
          for (const column of aggregateColumns(build, codec, operation)) {
            fields[column.fieldName] = {
              description: `${OPERATION_TEXTS[operation].fieldTerm} of ${column.fieldName} across all matching records`,
              type: build.getOutputTypeByName(column.resultType),
              plan($row: Step) {
                const $single = $row as PgSelectSingleStep;
                const alias = $single.getClassStep().alias;
                const target = sql`${alias}.${sql.identifier(column.attributeName)}`;
                const $json = $single.select(
                  sql`${aggregateSql(operation, target, column.pgType)}::text`,
                  TYPES.text,
                );
                return lambda($json, aggregateValue, true);
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
              return lambda(($row as PgSelectSingleStep).select(sql`count(*)`, TYPES.bigint), Number, true);
            },
          } as never,
        };
        for (const operation of OPERATIONS) {
          if (aggregateColumns(build, codec, operation).length === 0) continue;
          fields[operation] = {
            description: OPERATION_TEXTS[operation].description,
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
        return `${typeName}${OPERATION_TEXTS[operation].typePart}AggregateResult`;
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
      GraphQLObjectType_fields(fields, build, context) {
        const { scope } = context;
        if (!scope.isConnectionType || !scope.pgCodec) return fields;
        const codec = scope.pgCodec;
        if (!aggregateDirectiveOn(codec)) return fields;
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
