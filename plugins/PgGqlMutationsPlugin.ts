import type { PgCodecWithAttributes, PgResource } from "@dataplan/pg";
import type { FieldArgs, FieldInfo, Step } from "grafast";
import type { GraphQLInputType, GraphQLOutputType } from "grafast/graphql";
import type { PgAttribute } from "pg-introspection";
import { applyFilterValue, filterApplyStep, type ApplyFilter } from "./pgGqlFilterOperands";
import {
  deleteShape,
  insertShape,
  keptOrBuilt,
  updateShape,
  type KeptTexts,
  type MutationStatement,
} from "./pgGqlKeptStatements";
import { gatheredColumnInputInfo, insertRows, updateValues, writableColumns } from "./pgGqlMutationInputs";
import {
  deleteSql,
  insertSql,
  mutationStatementSql,
  mutationTable,
  MUTATION_ALIAS,
  updateSql,
  type Answer,
  type MutationKind,
} from "./pgGqlMutationSql";
import { affectedCountFor, mutationStep, recordsFor } from "./pgGqlMutationSteps";
import { isMutationOperation, withMutationAwareClients } from "./pgGqlPendingMutations";
import { nodeResources } from "./PgGqlNodePlugin";
import { columnInputInfo } from "./pgGqlTypes";
import { acceptingReturnedRows, plainColumnFields } from "./pgGqlReturnedRows";

declare global {
  namespace GraphileBuild {
    interface Inflection {
      /** `insertInto<T>Collection` */
      pgGqlInsertField(this: Inflection, typeName: string): string;
      /** `update<T>Collection` */
      pgGqlUpdateField(this: Inflection, typeName: string): string;
      /** `deleteFrom<T>Collection` */
      pgGqlDeleteField(this: Inflection, typeName: string): string;
      /** `<T>InsertResponse` / `<T>UpdateResponse` / `<T>DeleteResponse` */
      pgGqlMutationResponseType(this: Inflection, typeName: string, kind: MutationKind): string;
    }
    interface ScopeObject {
      isPgGqlMutationResponse?: boolean;
    }
  }
}

/**
 * A mutation field's plan: its step takes the field's `args` and builds the statement (`statement`) per request
 * from their values (see pgGqlMutationSteps).
 */
function mutationFieldPlan<const TSpec extends Record<string, Step>>(
  build: GraphileBuild.Build,
  resource: PgResource,
  args: (fieldArgs: FieldArgs) => TSpec,
  statement: (values: { [K in keyof TSpec]: unknown }, answer: Answer) => MutationStatement,
) {
  const columnFields = plainColumnFields(build, resource.codec as PgCodecWithAttributes);
  return (_$root: Step, fieldArgs: FieldArgs, info: FieldInfo) =>
    mutationStep(resource, { info, columnFields }, args(fieldArgs), statement);
}

function insertPlan(build: GraphileBuild.Build, resource: PgResource) {
  const table = mutationTable(resource);
  const writable = writableColumns(build, table.codec, "insert");
  const kept: KeptTexts = new Map();
  // The last statement by its `objects` value: a literal list is the same object in every request of a
  // document, so its statement is read once (values from variables are new objects each time). The statement
  // is only read later (its values are copied, never changed).
  let last: { objects: unknown; answer: Answer; statement: MutationStatement } | null = null;
  return mutationFieldPlan(
    build,
    resource,
    (fieldArgs) => ({ objects: fieldArgs.getRaw("objects") }),
    ({ objects }, answer) => {
      // Only a list with a row is kept (an empty one throws), so an equal value is that very object.
      if (last !== null && last.objects === objects && last.answer === answer) return last.statement;
      const statement = insertStatement(objects, answer);
      last = { objects, answer, statement };
      return statement;
    },
  );

  function insertStatement(objects: unknown, answer: Answer): MutationStatement {
    const { fields, columns, rows } = insertRows(writable, table.codec, objects);
    // The text depends only on the columns given and which values are defaults: built once per such
    // shape, the values (each a bind parameter, in row and column order) read per request.
    const texts = rows.flat().filter((text) => text !== undefined);
    return keptOrBuilt(kept, insertShape(answer, fields, rows), texts, [], () =>
      mutationStatementSql(table, insertSql(table, columns, rows), null, "insert", answer),
    );
  }
}

function updatePlan(build: GraphileBuild.Build, resource: PgResource) {
  const table = mutationTable(resource);
  const writable = writableColumns(build, table.codec, "update");
  const kept: KeptTexts = new Map();
  return mutationFieldPlan(
    build,
    resource,
    (fieldArgs) => ({
      set: fieldArgs.getRaw("set"),
      atMost: fieldArgs.getRaw("atMost"),
      applyFilter: filterApplyStep(fieldArgs),
    }),
    ({ set, atMost, applyFilter }, answer) => {
      const { fields, columns, texts } = updateValues(writable, table.codec, set);
      const filter = applyFilterValue(applyFilter as ApplyFilter, MUTATION_ALIAS);
      const shape = updateShape(answer, atMost, fields, filter.key);
      return keptOrBuilt(kept, shape, texts, filter.operands, () =>
        mutationStatementSql(
          table,
          updateSql(table, columns, texts, filter),
          atMost as number,
          "update",
          answer,
        ),
      );
    },
  );
}

function deletePlan(build: GraphileBuild.Build, resource: PgResource) {
  const table = mutationTable(resource);
  const kept: KeptTexts = new Map();
  return mutationFieldPlan(
    build,
    resource,
    (fieldArgs) => ({ atMost: fieldArgs.getRaw("atMost"), applyFilter: filterApplyStep(fieldArgs) }),
    ({ atMost, applyFilter }, answer) => {
      const filter = applyFilterValue(applyFilter as ApplyFilter, MUTATION_ALIAS);
      return keptOrBuilt(kept, deleteShape(answer, atMost, filter.key), [], filter.operands, () =>
        mutationStatementSql(table, deleteSql(table, filter), atMost as number, "delete", answer),
      );
    },
  );
}

function registerResponseType(build: GraphileBuild.Build, resource: PgResource, kind: MutationKind): void {
  const { inflection, graphql } = build;
  const { GraphQLNonNull, GraphQLList, GraphQLInt } = graphql;
  const tableTypeName = inflection.tableType(resource.codec);
  const typeName = inflection.pgGqlMutationResponseType(tableTypeName, kind);
  if (build.getTypeMetaByName(typeName)) return;
  build.registerObjectType(
    typeName,
    { isPgGqlMutationResponse: true, pgCodec: resource.codec },
    () => ({
      fields: () => ({
        affectedCount: {
          description: "Count of the records impacted by the mutation",
          type: new GraphQLNonNull(GraphQLInt),
          plan: ($mutation: Step) => affectedCountFor($mutation),
        },
        records: {
          description: "Array of records impacted by the mutation",
          type: new GraphQLNonNull(
            new GraphQLList(new GraphQLNonNull(build.getOutputTypeByName(tableTypeName))),
          ) as GraphQLOutputType,
          plan: ($mutation: Step) => recordsFor($mutation),
        },
      }),
    }),
    `pg_graphql ${kind} response for ${tableTypeName}`,
  );
}

const AT_MOST_DESCRIPTION = "The maximum number of records in the collection permitted to be affected";
const FILTER_DESCRIPTION = "Restricts the mutation's impact to records matching the criteria";

/** The root mutation fields of a table that the role's privileges allow. */
function mutationFields(
  build: GraphileBuild.Build,
  resource: PgResource,
): GraphileBuild.GrafastFieldConfigMap {
  const { inflection, graphql } = build;
  const { GraphQLNonNull, GraphQLList, GraphQLInt } = graphql;
  const codec = resource.codec as PgCodecWithAttributes;
  const typeName = inflection.tableType(codec);
  if (!build.getTypeMetaByName(typeName)) return {};
  const fields: GraphileBuild.GrafastFieldConfigMap = {};
  const Filter = build.getInputTypeByName(inflection.pgGqlFilterType(typeName));
  const filterArg = { type: Filter, description: FILTER_DESCRIPTION };
  const atMostArg = {
    type: new GraphQLNonNull(GraphQLInt),
    defaultValue: 1,
    description: AT_MOST_DESCRIPTION,
  };
  const matches = (behavior: keyof GraphileBuild.BehaviorStrings) =>
    build.behavior.pgResourceMatches(resource, behavior);
  if (matches("resource:insert") && writableColumns(build, codec, "insert").size > 0) {
    const InsertInput = build.getGraphQLTypeByPgCodec(codec, "input") as GraphQLInputType;
    fields[inflection.pgGqlInsertField(typeName)] = {
      description: `Adds one or more \`${typeName}\` records to the collection`,
      type: build.getOutputTypeByName(inflection.pgGqlMutationResponseType(typeName, "insert")),
      args: {
        objects: {
          type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(InsertInput))),
        },
      },
      plan: insertPlan(build, resource) as never,
    };
  }
  if (matches("resource:update") && writableColumns(build, codec, "update").size > 0) {
    const UpdateInput = build.getGraphQLTypeByPgCodec(codec, "patch") as GraphQLInputType;
    fields[inflection.pgGqlUpdateField(typeName)] = {
      description: `Updates zero or more records in the \`${typeName}\` collection`,
      type: new GraphQLNonNull(
        build.getOutputTypeByName(inflection.pgGqlMutationResponseType(typeName, "update")),
      ),
      args: {
        set: {
          type: new GraphQLNonNull(UpdateInput),
          description: "Fields that are set will be updated for all records matching the `filter`",
        },
        filter: filterArg,
        atMost: atMostArg,
      },
      plan: updatePlan(build, resource) as never,
    };
  }
  if (matches("resource:delete")) {
    fields[inflection.pgGqlDeleteField(typeName)] = {
      description: `Deletes zero or more records from the \`${typeName}\` collection`,
      type: new GraphQLNonNull(
        build.getOutputTypeByName(inflection.pgGqlMutationResponseType(typeName, "delete")),
      ),
      args: { filter: filterArg, atMost: atMostArg },
      plan: deletePlan(build, resource) as never,
    };
  }
  return fields;
}

/**
 * pg_graphql's mutations: `insertInto<T>Collection(objects)`, `update<T>Collection(set, filter, atMost)` and
 * `deleteFrom<T>Collection(filter, atMost)` per the role's privileges, each answering `affectedCount` and
 * `records`. One statement per mutation, in the request's transaction; past `atMost` it fails and nothing
 * changes. Insert and update inputs leave out serial, identity and generated columns, as pg_graphql does; every
 * input field is nullable. This plugin holds the schema and the plans: the inputs are read by
 * pgGqlMutationInputs, the statement's SQL built by pgGqlMutationSql and its text kept by pgGqlKeptStatements;
 * pgGqlMutationSteps and pgGqlPendingMutations run it and read its records.
 */
export const PgGqlMutationsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlMutationsPlugin",
  description: "pg_graphql insert, update and delete mutations",
  version: "0.1.0",
  after: ["PgAttributesPlugin", "PgTablesPlugin", "PgGqlFilterPlugin", "PgGqlNodePlugin"],
  inflection: {
    add: {
      pgGqlInsertField(_options, typeName) {
        return `insertInto${typeName}Collection`;
      },
      pgGqlUpdateField(_options, typeName) {
        return `update${typeName}Collection`;
      },
      pgGqlDeleteField(_options, typeName) {
        return `deleteFrom${typeName}Collection`;
      },
      pgGqlMutationResponseType(_options, typeName, kind) {
        const suffix = { insert: "InsertResponse", update: "UpdateResponse", delete: "DeleteResponse" }[kind];
        return `${typeName}${suffix}`;
      },
    },
  },
  grafast: {
    middleware: {
      // Every query of a request goes through a client that holds the request's pending mutations.
      async prepareArgs(next, event) {
        const args = await next();
        // Only a mutation pends statements: a query's client stays as it is.
        if (!isMutationOperation(args.document, args.operationName)) return args;
        withMutationAwareClients(
          args.contextValue as unknown as Record<string, unknown>,
          args.resolvedPreset?.pgServices ?? event.args.resolvedPreset?.pgServices ?? [],
        );
        return args;
      },
    },
  },
  gather: {
    hooks: {
      async pgCodecs_attribute(info, { serviceName, pgAttribute, attribute }) {
        const { introspection } = await info.helpers.pgIntrospection.getService(serviceName);
        const write = gatheredColumnInputInfo(pgAttribute as PgAttribute, introspection as never);
        attribute.extensions = { ...attribute.extensions, pgGqlColumn: write } as typeof attribute.extensions;
      },
    },
  },
  schema: {
    behaviorRegistry: {
      add: {
        "resource:insert": {
          description: "insertInto<T>Collection for this table",
          entities: ["pgResource"],
        },
        "resource:update": { description: "update<T>Collection for this table", entities: ["pgResource"] },
        "resource:delete": {
          description: "deleteFrom<T>Collection for this table",
          entities: ["pgResource"],
        },
      },
    },
    entityBehavior: {
      pgResource: {
        inferred: {
          provides: ["default"],
          before: ["inferred", "override"],
          // Defaults first: grants (PgRBACPlugin) and view updatability (PgTablesPlugin) take them away.
          callback(behavior, resource) {
            const isTable =
              !resource.parameters && Boolean(resource.codec.attributes) && !resource.codec.isAnonymous;
            return isTable ? ["resource:insert", "resource:update", "resource:delete", behavior] : behavior;
          },
        },
      },
      pgCodecAttribute: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlMutations"],
          callback(behavior, [codec, attributeName]) {
            const { serial, generated } = columnInputInfo(codec.attributes[attributeName]);
            return serial || generated ? [behavior, "-attribute:insert", "-attribute:update"] : behavior;
          },
        },
      },
    },
    hooks: {
      init(_, build) {
        for (const resource of nodeResources(build)) {
          for (const kind of ["insert", "update", "delete"] as const)
            registerResponseType(build, resource, kind);
        }
        return _;
      },
      GraphQLObjectType(config, _build, context) {
        if (!context.scope.isPgClassType) return config;
        // A mutation's records may be rows it returned (pgGqlReturnedRows).
        return { ...config, assertStep: acceptingReturnedRows(config.assertStep) };
      },
      GraphQLInputObjectType(config, _build, context) {
        const { isInputType, isPgPatch, isPgRowType } = context.scope;
        if (!isPgRowType || (!isInputType && !isPgPatch)) return config;
        return { ...config, description: undefined };
      },
      GraphQLInputObjectType_fields(fields, build, context) {
        const { isInputType, isPgPatch, isPgRowType } = context.scope;
        if (!isPgRowType || (!isInputType && !isPgPatch)) return fields;
        // pg_graphql cannot see through triggers and defaults: every input field is nullable.
        return Object.fromEntries(
          Object.entries(fields).map(([name, field]) => [
            name,
            {
              ...field,
              description: undefined,
              type: build.graphql.getNullableType(field.type) as GraphQLInputType,
            },
          ]),
        );
      },
      GraphQLObjectType_fields(fields, build, context) {
        if (!context.scope.isRootMutation) return fields;
        const out = { ...fields };
        for (const resource of nodeResources(build)) Object.assign(out, mutationFields(build, resource));
        return out;
      },
    },
  },
};
