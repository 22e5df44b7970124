import type { GraphQLNamedType } from "grafast/graphql";
import { LIST_FILTER_SCALARS, SCALAR_FILTER_OPERATORS } from "./pgGqlTypes";

/** Is introspection on for this schema (any exposed SQL schema with `"introspection": true`)? */
export function introspectionEnabled(schema: { extensions: object }): boolean {
  const pgGql = (schema.extensions as { pgGql?: { introspection?: boolean } }).pgGql;
  return pgGql?.introspection === true;
}

/**
 * What introspection shows, as pg_graphql shows it: every type sorted by name (the filter types of
 * all scalars included, used or not), root fields sorted by name, only the `include` and `skip`
 * directives; and the schema's introspection flag in `extensions.pgGql`.
 */
export const PgGqlIntrospectionPlugin: GraphileConfig.Plugin = {
  name: "PgGqlIntrospectionPlugin",
  description: "pg_graphql's introspection shape and the introspection flag",
  version: "0.1.0",
  after: ["CollectReferencedTypesPlugin", "PgGqlFilterPlugin", "PgGqlOrderByPlugin"],
  schema: {
    hooks: {
      GraphQLSchema(config, build) {
        const { GraphQLIncludeDirective, GraphQLSkipDirective, GraphQLDirective } = build.graphql;
        // pg_graphql's own wording of the two directives.
        const described = (directive: typeof GraphQLSkipDirective, description: string) =>
          new GraphQLDirective({ ...directive.toConfig(), description });
        const introspection = Object.values(build.input.pgGqlSchemas ?? {}).some(
          (d) => d.introspection === true,
        );
        return {
          ...config,
          directives: [
            described(
              GraphQLIncludeDirective,
              "This field or fragment will be included only when the `if` argument is true.",
            ),
            described(
              GraphQLSkipDirective,
              "This field or fragment will be skipped when the `if` argument is true.",
            ),
          ],
          extensions: { ...config.extensions, pgGql: { introspection } },
        };
      },
      GraphQLSchema_types(types, build) {
        const always = [
          "FilterIs",
          "OrderByDirection",
          "PageInfo",
          "Cursor",
          "JSON",
          "Opaque",
          ...Object.keys(SCALAR_FILTER_OPERATORS).flatMap((s) => [
            s,
            build.inflection.pgGqlScalarFilterType(s, false),
          ]),
          ...LIST_FILTER_SCALARS.map((s) => build.inflection.pgGqlScalarFilterType(s, true)),
        ];
        const byName = new Map<string, GraphQLNamedType>();
        for (const type of [
          ...types,
          ...build.graphql.introspectionTypes,
          ...always.map((name) => build.getTypeByName(name)),
        ]) {
          if (type) byName.set(type.name, type);
        }
        return [...byName.values()];
      },
      finalize(schema, build) {
        // graphql-js lists types in the order of `types`; pg_graphql sorts them by name.
        const sorted = Object.values(schema.getTypeMap()).sort((a, b) =>
          a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
        );
        return new build.graphql.GraphQLSchema({ ...schema.toConfig(), types: sorted });
      },
      GraphQLObjectType_fields(fields, _build, context) {
        const { isRootQuery, isRootMutation } = context.scope;
        if (!isRootQuery && !isRootMutation) return fields;
        return Object.fromEntries(Object.entries(fields).sort(([a], [b]) => (a < b ? -1 : 1)));
      },
    },
  },
};
