import {
  PgSelectSingleStep,
  TYPES,
  pgSelect,
  pgSelectSingleFromRecord,
  type PgCodec,
  type PgCodecWithAttributes,
  type PgResource,
  type PgResourceParameter,
  type PgSelectStep,
} from "@dataplan/pg";
import {
  bakedInput,
  each,
  list,
  operationPlan,
  type FieldArgs,
  type GrafastFieldConfig,
  type Step,
} from "grafast";
import type { GraphQLFieldConfigArgumentMap, GraphQLInputType, GraphQLOutputType } from "grafast/graphql";
import { sql } from "pg-sql2";
import { connectionArguments, planPage } from "./PgGqlConnectionPlugin";
import { functionDirectives } from "./PgGqlDirectivesPlugin";
import { lowercaseFirstLetter, toBaseTypeName } from "./PgGqlInflectionPlugin";
import { primaryKeyAttributes } from "./pgGqlNodeId";
import { isValidGraphqlName } from "./PgGqlExposurePlugin";
import {
  defaultExpressions,
  functionInfo,
  gatheredFunctionInfo,
  isComputedFieldCandidate,
  type GatherState,
} from "./pgGqlFunctionInfo";

type FieldConfig = GrafastFieldConfig<any> & {
  type: GraphQLOutputType;
  args?: GraphQLFieldConfigArgumentMap;
};

declare global {
  namespace GraphileConfig {
    interface GatherHelpers {
      pgGqlFunctions: Record<string, never>;
    }
  }
  namespace GraphileBuild {
    interface Inflection {
      /** pg_graphql's field name of a function: `name` directive, else the name without a leading `_`, camelCase when inflecting. */
      pgGqlFunctionField(this: Inflection, resource: PgResource): string;
      /** pg_graphql's argument name of a function parameter (camelCase when inflecting). */
      pgGqlFunctionArgument(this: Inflection, resource: PgResource, paramName: string): string;
    }
  }
}

/** Schemas whose functions pg_graphql never exposes, even when they are on the API's schema list. */
const SYSTEM_SCHEMAS = new Set([
  "pg_catalog",
  "information_schema",
  "graphql",
  "graphql_public",
  "auth",
  "extensions",
]);

/** Connection arguments: a set-returning function with a parameter of one of these names is left out. */
const CONNECTION_ARGUMENTS = new Set(["first", "last", "before", "after", "offset", "filter", "orderBy"]);

/** The table (or view) whose row type `codec` is, when the role may select from it. */
function selectableTable(build: GraphileBuild.Build, codec: PgCodec): PgResource | undefined {
  if (!codec.attributes) return undefined;
  const table = (Object.values(build.input.pgRegistry.pgResources) as PgResource[]).find(
    (r) => !r.parameters && !r.isVirtual && r.codec === codec,
  );
  return table && table.extensions?.canSelect !== false ? table : undefined;
}

/** A selectable table that is exposed as a collection (it has a primary key). */
function exposedTable(build: GraphileBuild.Build, codec: PgCodec): PgResource | undefined {
  const table = selectableTable(build, codec);
  return table && build.behavior.pgResourceMatches(table, "resource:select") ? table : undefined;
}

/** Scalar or array-of-scalar codecs are the argument and return types pg_graphql supports ("Other" category). */
function isScalarCodec(codec: PgCodec): boolean {
  return !codec.attributes && !codec.arrayOfCodec && !(codec as { values?: unknown }).values;
}

function isScalarOrArrayCodec(codec: PgCodec): boolean {
  return codec.arrayOfCodec ? isScalarCodec(codec.arrayOfCodec) : isScalarCodec(codec);
}

/** A function's return as a GraphQL type: scalar, list, enum (computed fields only), row, or connection. */
type FunctionReturn =
  | { kind: "value"; type: GraphQLOutputType }
  | { kind: "row"; type: GraphQLOutputType; table: PgResource }
  | { kind: "connection"; type: GraphQLOutputType; table: PgResource };

function outputTypeOf(build: GraphileBuild.Build, codec: PgCodec): GraphQLOutputType | undefined {
  const inner = codec.arrayOfCodec ?? codec;
  const type = build.getGraphQLTypeByPgCodec(inner, "output") as GraphQLOutputType | undefined;
  if (!type) return undefined;
  return codec.arrayOfCodec ? new build.graphql.GraphQLList(type) : type;
}

function functionReturn(
  build: GraphileBuild.Build,
  resource: PgResource,
  computed: boolean,
): FunctionReturn | undefined {
  const { codec } = resource;
  const info = functionInfo(resource);
  // Records and arrays of rows are not supported by pg_graphql.
  if (!info || codec.isAnonymous || (info.returnsArray && codec.attributes)) return undefined;
  const table = codec.attributes ? selectableTable(build, codec) : undefined;
  if (info.isSetOf || (!resource.isUnique && !codec.attributes)) {
    if (!table || !exposedTable(build, codec) || primaryKeyAttributes(table).length === 0) return undefined;
    const connectionName = build.inflection.connectionType(build.inflection.tableType(codec));
    const type = build.getTypeByName(connectionName) as GraphQLOutputType | undefined;
    return type ? { kind: "connection", type, table } : undefined;
  }
  if (codec.attributes) {
    const type = table && (build.getGraphQLTypeByPgCodec(codec, "output") as GraphQLOutputType | undefined);
    return table && type ? { kind: "row", type, table } : undefined;
  }
  // Root functions return scalars (Opaque included) or lists of scalars; computed fields also enums.
  if (codec.name === "void") return undefined;
  if (!computed && !isScalarOrArrayCodec(codec)) return undefined;
  if (computed && codec.arrayOfCodec && !isScalarCodec(codec.arrayOfCodec)) return undefined;
  const type = outputTypeOf(build, codec);
  if (!type) return undefined;
  return { kind: "value", type };
}

/** A root function's arguments as pg_graphql types them: required unless the parameter has a usable default. */
function rootArguments(
  build: GraphileBuild.Build,
  resource: PgResource,
): { args: GraphQLFieldConfigArgumentMap; names: [string, PgResourceParameter][] } | undefined {
  const { GraphQLList, GraphQLNonNull } = build.graphql;
  const info = functionInfo(resource)!;
  const args: GraphQLFieldConfigArgumentMap = {};
  const names: [string, PgResourceParameter][] = [];
  for (const [index, param] of (resource.parameters ?? []).entries()) {
    if (!param.name || !isScalarOrArrayCodec(param.codec)) return undefined;
    const inner = build.getGraphQLTypeByPgCodec(param.codec.arrayOfCodec ?? param.codec, "input") as
      GraphQLInputType | undefined;
    if (!inner) return undefined;
    const type = param.codec.arrayOfCodec ? new GraphQLList(inner) : inner;
    const argName = build.inflection.pgGqlFunctionArgument(resource, param.name);
    if (!isValidGraphqlName(argName)) return undefined;
    const fallback = info.argDefaults[index];
    // A default pg_graphql can show is also applied by GraphQL; any other default is left to SQL.
    args[argName] = !fallback
      ? { type: new GraphQLNonNull(type) }
      : fallback.value === null
        ? { type }
        : { type, defaultValue: JSON.parse(fallback.value) as unknown };
    names.push([argName, param]);
  }
  return { args, names };
}

/** The plan-time argument list of a function call; an omitted optional argument is left to its SQL default. */
function functionArgs(fieldArgs: FieldArgs, names: [string, PgResourceParameter][]) {
  return names.map(([argName, param]) => {
    const $raw = fieldArgs.getRaw(argName);
    const step = operationPlan().withRootLayerPlan(() => bakedInput(fieldArgs.typeAt(argName), $raw));
    return { step, pgCodec: param.codec, name: param.name ?? undefined };
  });
}

/** The row a computed field runs on, inlined into the parent select when it can be. */
function rowArgument(resource: PgResource, $parent: Step) {
  const $in = $parent as PgSelectSingleStep;
  const $row =
    $in instanceof PgSelectSingleStep && $in.getClassStep().mode !== "mutation"
      ? $in
      : pgSelectSingleFromRecord($in.resource, $in.record());
  return { $row, arg: { step: $row.record(), pgCodec: resource.parameters![0].codec } };
}

function functionSql(resource: PgResource) {
  const pg = (resource.extensions as { pg?: { schemaName: string; name: string } }).pg!;
  return sql.identifier(pg.schemaName, pg.name);
}

/**
 * The rows a volatile set-returning function returned, selected again from their table by primary
 * key: the function runs once, and paging, counting and nested fields read the selected rows.
 */
function rowsByKey(table: PgResource, $rows: PgSelectStep): PgSelectStep {
  const pk = primaryKeyAttributes(table);
  const attributes = (table.codec as PgCodecWithAttributes).attributes;
  const $keys = each($rows, ($row) => list(pk.map((a) => ($row as PgSelectSingleStep).get(a))));
  const $select = pgSelect({ resource: table, identifiers: [] });
  const keys = $select.placeholder($keys, TYPES.jsonb);
  const columns = pk.map((a) => sql`${$select.alias}.${sql.identifier(a)}`);
  const values = pk.map((a, i) => sql`(__key__->>${sql.literal(i)})::${attributes[a].codec.sqlType}`);
  $select.where(
    sql`(${sql.join(columns, ", ")}) in (select ${sql.join(values, ", ")} from jsonb_array_elements(${keys}) as __key__)`,
  );
  return $select;
}

/** Field config of a function on `Query`/`Mutation`, or undefined when pg_graphql leaves it out. */
function rootFunctionField(
  build: GraphileBuild.Build,
  resource: PgResource,
): [string, FieldConfig] | undefined {
  const info = functionInfo(resource);
  const pgGql = functionDirectives(resource);
  if (!info || !pgGql || info.overloaded) return undefined;
  if (SYSTEM_SCHEMAS.has(pgGql.schemaName)) return undefined;
  if (!build.behavior.pgResourceMatches(resource, resource.isMutation ? "mutationField" : "queryField")) {
    return undefined;
  }
  const fieldName = build.inflection.pgGqlFunctionField(resource);
  if (!isValidGraphqlName(fieldName)) return undefined;
  if ((resource.parameters ?? []).some((p) => p.codec.attributes)) return undefined;
  const returns = functionReturn(build, resource, false);
  const argSpec = rootArguments(build, resource);
  if (!returns || !argSpec) return undefined;
  const { names } = argSpec;
  const mode = resource.isMutation ? "mutation" : "normal";
  let args = argSpec.args;
  let plan: (_$root: Step, fieldArgs: FieldArgs) => Step;
  if (returns.kind === "connection") {
    if (names.some(([argName]) => CONNECTION_ARGUMENTS.has(argName))) return undefined;
    const connectionArgs = connectionArguments(build, returns.table);
    args = { ...args, ...connectionArgs };
    plan = (_$root, fieldArgs) => {
      const $rows = resource.execute(functionArgs(fieldArgs, names), mode) as PgSelectStep;
      // A volatile function runs once; its rows are then paged (and counted) like any set of rows.
      const $select = resource.isMutation ? rowsByKey(returns.table, $rows) : $rows;
      return planPage($select, fieldArgs, returns.table, build);
    };
  } else {
    plan = (_$root, fieldArgs) => {
      const $result = resource.execute(functionArgs(fieldArgs, names), mode);
      return resource.isUnique ? $result : ($result as PgSelectStep).single();
    };
  }
  return [
    fieldName,
    {
      type: returns.type,
      description: pgGql.entity.description,
      args,
      plan: plan as never,
    },
  ];
}

/** Field config of a computed field (a function of one table row) on that table's type. */
function computedField(build: GraphileBuild.Build, resource: PgResource): [string, FieldConfig] | undefined {
  const pgGql = functionDirectives(resource);
  if (!pgGql || !build.behavior.pgResourceMatches(resource, "typeField")) return undefined;
  const fieldName = build.inflection.pgGqlFunctionField(resource);
  if (!isValidGraphqlName(fieldName)) return undefined;
  const returns = functionReturn(build, resource, true);
  if (!returns) return undefined;
  const description = pgGql.entity.description;
  if (returns.kind === "connection") {
    return [
      fieldName,
      {
        type: returns.type,
        description,
        args: connectionArguments(build, returns.table),
        plan: (($parent: Step, fieldArgs: FieldArgs) => {
          const { arg } = rowArgument(resource, $parent);
          return planPage(resource.execute([arg]) as PgSelectStep, fieldArgs, returns.table, build);
        }) as never,
      },
    ];
  }
  if (returns.kind === "row") {
    return [
      fieldName,
      {
        type: returns.type,
        description,
        plan: (($parent: Step) => {
          const { arg } = rowArgument(resource, $parent);
          const $result = resource.execute([arg]);
          return resource.isUnique ? $result : ($result as PgSelectStep).single();
        }) as never,
      },
    ];
  }
  // A scalar: the call is an expression of the parent row, in the parent's own select.
  return [
    fieldName,
    {
      type: returns.type,
      description,
      plan: (($parent: Step) => {
        const { $row } = rowArgument(resource, $parent);
        return $row.select(sql`${functionSql(resource)}(${$row.getClassStep().alias})`, resource.codec);
      }) as never,
    },
  ];
}

/** Function resources that are computed fields of `codec` (one argument: a row of that table). */
function computedResources(build: GraphileBuild.Build, codec: PgCodec): PgResource[] {
  return (Object.values(build.input.pgRegistry.pgResources) as PgResource[])
    .filter((r) => r.parameters?.length === 1 && r.parameters[0].codec === codec && functionInfo(r))
    .sort((a, b) => functionInfo(a)!.oid - functionInfo(b)!.oid);
}

function rootResources(build: GraphileBuild.Build, mutation: boolean): PgResource[] {
  return (Object.values(build.input.pgRegistry.pgResources) as PgResource[]).filter(
    (r) => r.parameters && functionInfo(r) && Boolean(r.isMutation) === mutation,
  );
}

/**
 * pg_graphql's user-defined functions: stable and immutable functions on `Query`, volatile ones on
 * `Mutation`, and functions of a single table row as computed fields of that table's type.
 * Functions pg_graphql cannot expose are left out, as it leaves them out: overloaded names, unnamed
 * or variadic arguments, arguments that are rows, enums or arrays of those, returns of `void`,
 * `record`, triggers, enums (root fields), arrays of rows or enums, `setof` anything but a table
 * with a primary key, functions in system schemas, and functions the role may not EXECUTE
 * (PgRBACPlugin's `-queryField -mutationField -typeField` behaviors).
 */
export const PgGqlFunctionsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlFunctionsPlugin",
  description: "pg_graphql functions: query and mutation fields, computed fields",
  version: "0.1.0",
  after: ["PgProceduresPlugin", "PgRelationsPlugin", "PgGqlConnectionPlugin", "PgGqlDirectivesPlugin"],
  // Root fields are sorted by PgGqlIntrospectionPlugin: the function fields must be there first.
  before: ["PgGqlIntrospectionPlugin"],
  inflection: {
    add: {
      pgGqlFunctionField(_options, resource) {
        const pgGql = functionDirectives(resource);
        if (pgGql?.entity.name) return pgGql.entity.name;
        const sqlName = pgGql?.sqlName ?? resource.name;
        const trimmed = sqlName.startsWith("_") ? sqlName.slice(1) : sqlName;
        return lowercaseFirstLetter(toBaseTypeName(trimmed, pgGql?.schema.inflect_names === true));
      },
      pgGqlFunctionArgument(_options, resource, paramName) {
        const inflect = functionDirectives(resource)?.schema.inflect_names === true;
        const base = toBaseTypeName(paramName, inflect);
        return inflect ? lowercaseFirstLetter(base) : base;
      },
    },
    replace: {
      functionResourceName(previous, options, details) {
        // Overloads of a computed field (one per table) need distinct resource names.
        const name = previous!(details);
        const { pgProc } = details;
        const overloads = pgProc.getNamespace()?.getProcs({ name: pgProc.proname }) ?? [];
        if (overloads.length < 2) return name;
        const argTypes = pgProc.getArguments().map((a) => a.type.typname);
        return `${name}(${argTypes.join(",")})`;
      },
    },
  },
  gather: {
    namespace: "pgGqlFunctions",
    initialState: (): GatherState => ({ defaultsByService: new Map() }),
    helpers: {},
    hooks: {
      async pgIntrospection_proc(info, { entity: pgProc, serviceName }) {
        // PgProceduresPlugin skips overloaded functions; pg_graphql still makes computed fields of
        // overloads that take rows of different tables.
        const namespace = pgProc.getNamespace();
        if (!namespace) return;
        const service = info.resolvedPreset.pgServices?.find((s) => s.name === serviceName);
        if (!service || !(service.schemas ?? ["public"]).includes(namespace.nspname)) return;
        if ((namespace.getProcs({ name: pgProc.proname }) ?? []).length < 2) return;
        if (!isComputedFieldCandidate(pgProc)) return;
        await info.helpers.pgProcedures.getResourceOptions(serviceName, pgProc);
      },
      async pgProcedures_PgResourceOptions(info, { serviceName, pgProc, resourceOptions }) {
        const defaults = pgProc.pronargdefaults
          ? (await defaultExpressions(info, serviceName)).get(pgProc._id)
          : undefined;
        const pgGqlFunction = gatheredFunctionInfo(pgProc, defaults);
        resourceOptions.extensions = { ...resourceOptions.extensions, pgGqlFunction };
      },
    },
  },
  schema: {
    behaviorRegistry: {
      add: {
        queryField: { description: "a function as a field of Query", entities: ["pgResource"] },
        mutationField: { description: "a function as a field of Mutation", entities: ["pgResource"] },
        typeField: {
          description: "a function of a table row as a field of its type",
          entities: ["pgResource"],
        },
      },
    },
    entityBehavior: {
      pgResource: {
        inferred: {
          provides: ["default"],
          // Prefixed, so PgRBACPlugin (no EXECUTE: `-queryField -mutationField -typeField`) and smart tags win.
          before: ["inferred", "override"],
          callback(behavior, resource) {
            if (!resource.parameters) return behavior;
            const isComputed =
              resource.parameters.length === 1 && Boolean(resource.parameters[0].codec.attributes);
            const place = isComputed ? "typeField" : resource.isMutation ? "mutationField" : "queryField";
            return [place, behavior];
          },
        },
      },
    },
    hooks: {
      GraphQLObjectType_fields(fields, build, context) {
        const { isRootQuery, isRootMutation, isPgClassType, pgCodec } = context.scope;
        const add = (entries: ([string, FieldConfig] | undefined)[]) => {
          const out = { ...fields };
          for (const entry of entries) {
            // A function named like a column (or another field) takes its place, as in pg_graphql.
            if (!entry) continue;
            const [fieldName, config] = entry;
            out[fieldName] = context.fieldWithHooks({ fieldName }, config as never);
          }
          return out;
        };
        if (isRootQuery || isRootMutation) {
          return add(rootResources(build, Boolean(isRootMutation)).map((r) => rootFunctionField(build, r)));
        }
        if (isPgClassType && pgCodec?.attributes && selectableTable(build, pgCodec)) {
          return add(computedResources(build, pgCodec).map((r) => computedField(build, r)));
        }
        return fields;
      },
    },
  },
};
