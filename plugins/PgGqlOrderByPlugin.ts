import type { PgCodecWithAttributes, PgResource } from "@dataplan/pg";
import { PgGqlError } from "./pgGqlErrors";
import { primaryKeyAttributes } from "./pgGqlNodeId";
import { columnFilterKind } from "./pgGqlTypes";

export interface OrderElement {
  attribute: string;
  direction: "asc" | "desc";
  nullsFirst: boolean;
}

const DIRECTIONS: Record<string, { direction: "asc" | "desc"; nullsFirst: boolean; description: string }> = {
  AscNullsFirst: { direction: "asc", nullsFirst: true, description: "Ascending order, nulls first" },
  AscNullsLast: { direction: "asc", nullsFirst: false, description: "Ascending order, nulls last" },
  DescNullsFirst: { direction: "desc", nullsFirst: true, description: "Descending order, nulls first" },
  DescNullsLast: { direction: "desc", nullsFirst: false, description: "Descending order, nulls last" },
};

/** Columns pg_graphql can order by (scalars it can compare), keyed by GraphQL field name. */
function orderableColumns(build: GraphileBuild.Build, resource: PgResource): Map<string, string> {
  const codec = resource.codec as PgCodecWithAttributes;
  const out = new Map<string, string>();
  for (const [attributeName, attribute] of Object.entries(codec.attributes)) {
    if (!build.behavior.pgCodecAttributeMatches([codec, attributeName], "attribute:select")) continue;
    const kind = columnFilterKind(build, attribute.codec);
    if (!kind || kind.kind === "list") continue;
    out.set(build.inflection.attribute({ codec, attributeName }), attributeName);
  }
  return out;
}

/** The order a request's `orderBy` argument asks for; each element names exactly one column. */
export function orderFromArgument(
  build: GraphileBuild.Build,
  resource: PgResource,
  value: unknown,
): OrderElement[] {
  if (value == null) return [];
  const columns = orderableColumns(build, resource);
  const elements = Array.isArray(value) ? value : [value];
  return elements.flatMap((element: Record<string, string | null>) => {
    // An element whose column is null (or an unset variable) orders nothing, as in pg_graphql.
    const entries = Object.entries(element ?? {}).filter(([, v]) => v != null);
    if (entries.length === 0) return [];
    if (entries.length > 1) {
      throw new PgGqlError("Invalid value for orderBy: each element must have exactly one key");
    }
    const [field, directionName] = entries[0] as [string, string];
    const attribute = columns.get(field);
    const direction = DIRECTIONS[directionName];
    if (!attribute || !direction) throw new PgGqlError("Invalid input for OrderByDirection type");
    return [{ attribute, direction: direction.direction, nullsFirst: direction.nullsFirst }];
  });
}

/** pg_graphql's `OrderByDirection` enum and `<T>OrderBy` input types. */
export const PgGqlOrderByPlugin: GraphileConfig.Plugin = {
  name: "PgGqlOrderByPlugin",
  description: "pg_graphql <T>OrderBy input types",
  version: "0.1.0",
  after: ["PgTablesPlugin", "PgCodecsPlugin"],
  schema: {
    hooks: {
      init(_, build) {
        build.registerEnumType(
          "OrderByDirection",
          {},
          () => ({
            description: "Defines a per-field sorting order",
            values: Object.fromEntries(
              Object.entries(DIRECTIONS).map(([name, d]) => [
                name,
                { value: name, description: d.description },
              ]),
            ),
          }),
          "pg_graphql OrderByDirection",
        );
        const resources = Object.values(build.input.pgRegistry.pgResources) as PgResource[];
        for (const resource of resources) {
          if (resource.parameters || !resource.codec.attributes || resource.isVirtual) continue;
          if (primaryKeyAttributes(resource).length === 0) continue;
          const typeName = build.inflection.pgGqlOrderByType(build.inflection.tableType(resource.codec));
          if (build.getTypeMetaByName(typeName)) continue;
          build.registerInputObjectType(
            typeName,
            { pgCodec: resource.codec },
            () => ({
              fields: () => {
                const Direction = build.getInputTypeByName("OrderByDirection");
                return Object.fromEntries(
                  [...orderableColumns(build, resource).keys()].map((name) => [name, { type: Direction }]),
                );
              },
            }),
            `pg_graphql order by for ${typeName}`,
          );
        }
        return _;
      },
    },
  },
};
