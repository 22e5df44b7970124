import { listOfCodec, TYPES, type PgCodec, type PgEnumCodec } from "@dataplan/pg";
import { GraphQLEnumType, Kind, type ValueNode } from "grafast/graphql";
import { sql, type SQL } from "pg-sql2";
import { isValidGraphqlName } from "./PgGqlExposurePlugin";

/** pg_catalog types whose text pg_graphql returns in `to_jsonb` form (ISO date/time; jsonb text for JSON). */
const JSONB_TEXT_TYPES: Record<string, { base: PgCodec; typeName: string }> = {
  json: { base: TYPES.json, typeName: "JSON" },
  jsonb: { base: TYPES.jsonb, typeName: "JSON" },
  timestamp: { base: TYPES.timestamp, typeName: "Datetime" },
  timestamptz: { base: TYPES.timestamptz, typeName: "Datetime" },
  date: { base: TYPES.date, typeName: "Date" },
  time: { base: TYPES.time, typeName: "Time" },
  // pg_graphql has no scalar for a time with a time zone.
  timetz: { base: TYPES.timetz, typeName: "Opaque" },
};

const asJsonbText = (fragment: SQL): SQL => sql`(to_jsonb(${fragment}) #>> '{}')`;

/**
 * Codecs that read these types as pg_graphql prints them: `to_jsonb(value) #>> '{}'`, kept as
 * text (JSON stays a string holding serialized JSON, as pg_graphql's JSON scalar does).
 */
const pgGqlCodecs = new Map<string, PgCodec>(
  Object.entries(JSONB_TEXT_TYPES).map(([typname, { base }]) => [
    typname,
    {
      ...base,
      // Its own name: the stock codec of the same type may be registered too.
      name: `pgGql_${typname}`,
      castFromPg: asJsonbText,
      // A json element keeps its own text (pg_graphql returns `{"a" : 1}` as written); the others read as to_jsonb prints them.
      listCastFromPg: (fragment: SQL) =>
        typname === "json"
          ? sql`(select array_agg(__e::text) from unnest(${fragment}) as __e)::text`
          : sql`(select array_agg(to_jsonb(__e) #>> '{}') from unnest(${fragment}) as __e)::text`,
      fromPg: (value: string) => value,
      toPg: (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value)),
    } as PgCodec,
  ]),
);

/** pg_graphql's description of each scalar (introspection shows these texts). */
const SCALAR_DESCRIPTIONS: Record<string, string> = {
  ID: "A globally unique identifier for a given record",
  Int: "A scalar integer up to 32 bits",
  Float: "A scalar floating point value up to 32 bits",
  String: "A string",
  Boolean: "A value that is true or false",
  BigInt: "An arbitrary size integer represented as a string",
  Date: "A date without time information",
  Time: "A time without date information",
  Datetime: "A date and time",
  UUID: "A universally unique identifier",
  JSON: "A Javascript Object Notation value serialized as a string",
  Cursor: "An opaque string using for tracking a position in results during pagination",
  BigFloat: "A high precision floating point value represented as a string",
  Opaque: "Any type not handled by the type system",
};

/**
 * graphql-js's built-in scalars are shared objects that every schema (and introspection) reads
 * directly, so pg_graphql's texts are set on them once, process-wide.
 */
function describeBuiltinScalars(graphql: GraphileBuild.Build["graphql"]): void {
  const { GraphQLID, GraphQLInt, GraphQLFloat, GraphQLString, GraphQLBoolean } = graphql;
  for (const scalar of [GraphQLID, GraphQLInt, GraphQLFloat, GraphQLString, GraphQLBoolean]) {
    scalar.description = SCALAR_DESCRIPTIONS[scalar.name];
  }
}

/** Arrays of those types (`_json`, `_timestamp`, ...), whose elements read the same way. */
const pgGqlListCodecs = new Map<string, PgCodec>(
  [...pgGqlCodecs].map(([typname, codec]) => [
    `_${typname}`,
    listOfCodec(codec as PgCodec<string, undefined, any, any, undefined>, {
      name: `pgGql__${typname}`,
    }) as PgCodec,
  ]),
);

/** PostGraphile types pg_graphql has no scalar for: pg_graphql exposes them as `Opaque`. */
const OPAQUE_TYPES = [
  "money",
  "xml",
  "tsvector",
  "tsquery",
  "jsonpath",
  "interval",
  "bit",
  "varbit",
  "box",
  "circle",
  "line",
  "lseg",
  "path",
  "point",
  "polygon",
  "hstore",
  "inet",
  "oid",
  "regproc",
  "regprocedure",
  "regoper",
  "regoperator",
  "regclass",
  "regtype",
  "regrole",
  "regnamespace",
  "regconfig",
  "regdictionary",
  "cidr",
  "macaddr",
  "macaddr8",
  "bytea",
] as const;

function literalValue(node: ValueNode): unknown {
  switch (node.kind) {
    case "IntValue":
    case "FloatValue":
      return Number(node.value);
    case "StringValue":
    case "EnumValue":
      return node.value;
    case "BooleanValue":
      return node.value;
    case "ListValue":
      return node.values.map(literalValue);
    case "ObjectValue":
      return Object.fromEntries(node.fields.map((f) => [f.name.value, literalValue(f.value)]));
    default:
      return null;
  }
}

/**
 * pg_graphql's scalars: `Opaque` for types it has no scalar for, JSON as a string, date/time values
 * in `to_jsonb` form; and enums that also accept their values as strings, as pg_graphql does.
 */
export const PgGqlScalarsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlScalarsPlugin",
  description: "pg_graphql scalar wire forms",
  version: "0.1.0",
  before: ["PgCodecsPlugin"],
  gather: {
    hooks: {
      async pgCodecs_findPgCodec(info, event) {
        if (event.pgCodec) return;
        const namespace = event.pgType.getNamespace();
        if (namespace?.nspname !== "pg_catalog") return;
        const codec = pgGqlCodecs.get(event.pgType.typname) ?? pgGqlListCodecs.get(event.pgType.typname);
        if (codec) event.pgCodec = codec;
      },
    },
  },
  schema: {
    hooks: {
      init: {
        before: ["PgCodecsPlugin"],
        callback(_, build) {
          describeBuiltinScalars(build.graphql);
          build.registerScalarType(
            "Opaque",
            {},
            () => ({
              description: SCALAR_DESCRIPTIONS.Opaque,
              serialize: (value: unknown) => value,
              parseValue: (value: unknown) => value,
              parseLiteral: (node: ValueNode) => literalValue(node),
            }),
            "pg_graphql Opaque",
          );
          for (const [typname, codec] of pgGqlCodecs) {
            build.setGraphQLTypeForPgCodec(codec, ["input", "output"], JSONB_TEXT_TYPES[typname].typeName);
          }
          // An enum from a schema the API does not expose has no GraphQL enum: pg_graphql shows it as Opaque.
          // So does one whose name or a value (after `mappings`) is not a valid GraphQL name.
          const exposed = new Set(Object.keys(build.input.pgGqlSchemas ?? {}));
          for (const codec of Object.values(build.input.pgRegistry.pgCodecs) as PgCodec[]) {
            const values = (codec as PgEnumCodec).values;
            if (!values) continue;
            const schemaName = (codec.extensions as { pg?: { schemaName?: string } } | undefined)?.pg
              ?.schemaName;
            const named =
              isValidGraphqlName(build.inflection.enumType(codec as PgEnumCodec)) &&
              values.every(({ value }) =>
                isValidGraphqlName(build.inflection.enumValue(value, codec as PgEnumCodec)),
              );
            if ((schemaName && !exposed.has(schemaName)) || !named) {
              build.setGraphQLTypeForPgCodec(codec, ["input", "output"], "Opaque");
            }
          }
          for (const key of OPAQUE_TYPES) {
            const codec = (TYPES as Record<string, PgCodec>)[key];
            if (codec) build.setGraphQLTypeForPgCodec(codec, ["input", "output"], "Opaque");
          }
          return _;
        },
      },
      GraphQLScalarType(config) {
        const description = SCALAR_DESCRIPTIONS[config.name] ?? config.description;
        if (config.name === "BigInt" || config.name === "BigFloat") {
          // pg_graphql takes these as strings or as number literals (`addBigints(a: 3, b: 4)`). Column
          // values answer as strings; aggregate results (PgGqlAggregatesPlugin) as JSON numbers, as in
          // pg_graphql, so a number passes through.
          const { parseValue, serialize } = config;
          return {
            ...config,
            description,
            serialize: (value: unknown) =>
              typeof value === "number" ? value : serialize ? serialize(value) : value,
            parseValue: (value: unknown) =>
              typeof value === "number" ? String(value) : parseValue ? parseValue(value) : value,
            parseLiteral: (node: ValueNode, variables?: Record<string, unknown> | null) =>
              node.kind === Kind.INT || node.kind === Kind.FLOAT
                ? node.value
                : config.parseLiteral
                  ? config.parseLiteral(node, variables)
                  : literalValue(node),
          };
        }
        if (config.name !== "JSON") return { ...config, description };
        return {
          ...config,
          description,
          serialize: (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value)),
          parseValue: (value: unknown) => value,
          parseLiteral: (node: ValueNode) => literalValue(node),
        };
      },
      finalize(schema) {
        // pg_graphql accepts an enum's value written as a string literal too.
        for (const type of Object.values(schema.getTypeMap())) {
          if (!(type instanceof GraphQLEnumType) || type.name.startsWith("__")) continue;
          const parseLiteral = type.parseLiteral.bind(type);
          type.parseLiteral = (node, variables) =>
            node.kind === "StringValue" ? type.parseValue(node.value) : parseLiteral(node, variables);
        }
        return schema;
      },
    },
  },
};
