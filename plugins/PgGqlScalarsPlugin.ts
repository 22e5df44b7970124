import { TYPES, type PgCodec } from "@dataplan/pg";
import { GraphQLEnumType, type ValueNode } from "grafast/graphql";
import { sql, type SQL } from "pg-sql2";

/** pg_catalog types whose text pg_graphql returns in `to_jsonb` form (ISO date/time; jsonb text for JSON). */
const JSONB_TEXT_TYPES: Record<string, { base: PgCodec; typeName: string }> = {
  json: { base: TYPES.json, typeName: "JSON" },
  jsonb: { base: TYPES.jsonb, typeName: "JSON" },
  timestamp: { base: TYPES.timestamp, typeName: "Datetime" },
  timestamptz: { base: TYPES.timestamptz, typeName: "Datetime" },
  date: { base: TYPES.date, typeName: "Date" },
  time: { base: TYPES.time, typeName: "Time" },
  timetz: { base: TYPES.timetz, typeName: "Time" },
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
      listCastFromPg: (fragment: SQL) =>
        sql`(select array_agg(to_jsonb(__e) #>> '{}') from unnest(${fragment}) as __e)::text`,
      fromPg: (value: string) => value,
      toPg: (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value)),
    } as PgCodec,
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
        const codec = pgGqlCodecs.get(event.pgType.typname);
        if (codec) event.pgCodec = codec;
      },
    },
  },
  schema: {
    hooks: {
      init: {
        before: ["PgCodecsPlugin"],
        callback(_, build) {
          build.registerScalarType(
            "Opaque",
            {},
            () => ({
              description: "Any type not handled by the type system",
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
          const exposed = new Set(Object.keys(build.input.pgGqlSchemas ?? {}));
          for (const codec of Object.values(build.input.pgRegistry.pgCodecs) as PgCodec[]) {
            const schemaName = (codec.extensions as { pg?: { schemaName?: string } } | undefined)?.pg
              ?.schemaName;
            const isEnum = Boolean((codec as { values?: unknown }).values);
            if (isEnum && schemaName && !exposed.has(schemaName)) {
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
        if (config.name === "BigInt" || config.name === "BigFloat") {
          // pg_graphql takes these as strings or as number literals.
          const parseValue = config.parseValue;
          return {
            ...config,
            parseValue: (value: unknown) =>
              typeof value === "number" ? String(value) : parseValue ? parseValue(value) : value,
            parseLiteral: (node: ValueNode, variables?: Record<string, unknown> | null) =>
              node.kind === "IntValue" || node.kind === "FloatValue"
                ? node.value
                : config.parseLiteral
                  ? config.parseLiteral(node, variables)
                  : literalValue(node),
          };
        }
        if (config.name !== "JSON") return config;
        return {
          ...config,
          description: "A Javascript Object Notation value serialized as a string",
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
