import { TYPES, type PgResource, type PgSelectSingleStep } from "@dataplan/pg";
import { access, inhibitOnNull, lambda, type Step } from "grafast";
import { nodeIdPrefix, nodeIdSql, parseNodeId, primaryKeyAttributes } from "./pgGqlNodeId";

/** The node-ID codec name: encode is the identity because the ID is already computed in SQL. */
export const PG_GQL_NODE_ID_CODEC = "pgGql";

/** Tables (and views with a primary key) that get `nodeId` and the `Node` interface. */
export function nodeResources(build: GraphileBuild.Build): PgResource[] {
  return (Object.values(build.input.pgRegistry.pgResources) as PgResource[]).filter(
    (r) =>
      !r.parameters &&
      !r.isUnique &&
      !r.isVirtual &&
      r.codec.attributes &&
      primaryKeyAttributes(r).length > 0 &&
      build.behavior.pgResourceMatches(r, "resource:select"),
  );
}

/**
 * pg_graphql's `nodeId: ID!` on every type with a primary key, the `Node` interface and
 * `node(nodeId:)`: base64 of `["schema", "table", pk...]` as jsonb text, computed in SQL.
 */
export const PgGqlNodePlugin: GraphileConfig.Plugin = {
  name: "PgGqlNodePlugin",
  description: "pg_graphql nodeId encoding and Node handlers for tables",
  version: "0.1.0",
  after: ["PgTablesPlugin", "NodePlugin"],
  schema: {
    hooks: {
      init(_, build) {
        const { registerNodeIdCodec, getNodeIdCodec, registerNodeIdHandler } = build;
        if (!registerNodeIdCodec || !getNodeIdCodec || !registerNodeIdHandler) return _;
        registerNodeIdCodec({
          name: PG_GQL_NODE_ID_CODEC,
          encode: (value: unknown) => value as string,
          decode: parseNodeId,
        });
        const codec = getNodeIdCodec(PG_GQL_NODE_ID_CODEC);
        for (const resource of nodeResources(build)) {
          const typeName = build.inflection.tableType(resource.codec);
          if (!build.getTypeMetaByName(typeName)) continue;
          const pk = primaryKeyAttributes(resource);
          const [schema, table] = nodeIdPrefix(resource);
          registerNodeIdHandler({
            typeName,
            codec,
            plan($record: Step) {
              const $row = $record as PgSelectSingleStep;
              return $row.select(nodeIdSql(resource, $row.getClassStep().alias), TYPES.text);
            },
            getSpec($list: Step) {
              return Object.fromEntries(
                pk.map((attribute, index) => [attribute, inhibitOnNull(access($list, [index + 2]))]),
              );
            },
            getIdentifiers(value: unknown[]) {
              return value.slice(2);
            },
            get(spec: Record<string, Step>) {
              return resource.get(spec);
            },
            match(value: unknown[]) {
              return value[0] === schema && value[1] === table;
            },
          });
        }
        return _;
      },
      // grafast reads an undecodable nodeId as "no such node"; pg_graphql refuses it, so `node` checks
      // its argument before the Node interface decodes it.
      GraphQLObjectType_fields_field(field, _build, context) {
        if (!context.scope.isRootNodeField || !field.plan) return field;
        const plan = field.plan;
        return {
          ...field,
          plan($parent, fieldArgs, info) {
            const $nodeId = plan($parent, fieldArgs, info) as Step;
            return lambda($nodeId, checkedNodeId, true);
          },
        };
      },
    },
  },
};

function checkedNodeId(value: unknown): unknown {
  if (value != null) parseNodeId(value);
  return value;
}
