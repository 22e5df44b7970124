import {
  GraphQLError,
  Kind,
  parseType,
  TypeInfo,
  validate,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type VariableDefinitionNode,
} from "grafast/graphql";
import { introspectionEnabled } from "../../plugins/PgGqlIntrospectionPlugin";
import { limitErrors, parseWithinLimits, type PgGqlLimits } from "../../plugins/PgGqlLimitsPlugin";

/**
 * pg_graphql coerces a variable's value to the type of the position it is used in rather than
 * checking its declared type (`$ids: Int!` works for `in: [Int!]`, `$o: [BlogOrderBy]` for
 * `orderBy: [BlogOrderBy!]`). Declaring each variable as the type of its position gives the same
 * result through GraphQL's own coercion (a single value becomes a one-element list).
 */
function alignVariableTypes(schema: GraphQLSchema, document: DocumentNode): DocumentNode {
  const typeInfo = new TypeInfo(schema);
  const usedAs = new Map<string, GraphQLInputType | null>();
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      // The declaration is not a use.
      VariableDefinition: () => false,
      Variable(node) {
        const type = typeInfo.getInputType();
        if (!type) return;
        const seen = usedAs.get(node.name.value);
        const sameAsBefore = seen === undefined || (seen && String(seen) === String(type));
        usedAs.set(node.name.value, sameAsBefore ? type : null);
      },
    }),
  );
  const operations = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  return visit(document, {
    OperationDefinition(node) {
      // pg_graphql also reads variables the operation never declared.
      if (operations.length !== 1) return undefined;
      const declared = new Set(node.variableDefinitions?.map((d) => d.variable.name.value));
      const undeclared = [...usedAs].filter(([name, type]) => type && !declared.has(name));
      if (!undeclared.length) return undefined;
      const definitions: VariableDefinitionNode[] = undeclared.map(([name, type]) => ({
        kind: Kind.VARIABLE_DEFINITION,
        variable: { kind: Kind.VARIABLE, name: { kind: Kind.NAME, value: name } },
        type: parseType(String(type)),
      }));
      return { ...node, variableDefinitions: [...(node.variableDefinitions ?? []), ...definitions] };
    },
    VariableDefinition(node) {
      // Nor does it require a value for a declared variable nothing uses.
      if (!usedAs.has(node.variable.name.value)) return null;
      const type = usedAs.get(node.variable.name.value);
      if (!type || node.defaultValue) return undefined;
      return { ...node, type: parseType(String(type)) };
    },
  });
}
const CACHE_SIZE = 500;
const MAX_CACHED_SOURCE = 100_000;

export interface PreparedDocument {
  document: DocumentNode;
  /** Errors to add to the result (introspection refused), as pg_graphql reports them. */
  errors: GraphQLError[];
}

type Prepared = PreparedDocument | readonly GraphQLError[];

const caches = new WeakMap<GraphQLSchema, Map<string, Prepared>>();

function cacheOf(schema: GraphQLSchema): Map<string, Prepared> {
  let cache = caches.get(schema);
  if (!cache) caches.set(schema, (cache = new Map()));
  return cache;
}

const INTROSPECTION_FIELDS = new Set(["__schema", "__type"]);

/** A fragment on Query selecting `__schema`/`__type`: introspection pg_graphql refuses outright. */
function fragmentIntrospection(document: DocumentNode): GraphQLError[] {
  return document.definitions.flatMap((definition) => {
    if (definition.kind !== Kind.FRAGMENT_DEFINITION) return [];
    if (definition.typeCondition.name.value !== "Query") return [];
    return definition.selectionSet.selections.flatMap((selection) =>
      selection.kind === Kind.FIELD && INTROSPECTION_FIELDS.has(selection.name.value)
        ? [new GraphQLError(`Unknown field "${selection.name.value}" on type Query`)]
        : [],
    );
  });
}

/** Removes root `__schema`/`__type` selections when the schema has introspection off. */
function gateIntrospection(document: DocumentNode): Prepared {
  const refused = fragmentIntrospection(document);
  if (refused.length) return refused;
  const errors: GraphQLError[] = [];
  const definitions = document.definitions.map((definition) => {
    if (definition.kind !== Kind.OPERATION_DEFINITION || definition.operation !== "query") {
      return definition;
    }
    const selections = definition.selectionSet.selections.filter((selection) => {
      if (selection.kind !== Kind.FIELD || !INTROSPECTION_FIELDS.has(selection.name.value)) {
        return true;
      }
      errors.push(new GraphQLError(`Unknown field "${selection.name.value}" on type Query`));
      return false;
    });
    const operation: OperationDefinitionNode = {
      ...definition,
      selectionSet: { ...definition.selectionSet, selections },
    };
    return operation;
  });
  return { document: { ...document, definitions }, errors };
}

/** pg_graphql's request errors that come without a `data` key (operation selection, fragment cycles). */
export class RequestError extends GraphQLError {}

/** pg_graphql chooses the operation before validating: these errors come first, with its texts. */
function operationSelectionError(
  document: DocumentNode,
  operationName: string | undefined,
): RequestError | undefined {
  const operations = document.definitions.filter(
    (d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION,
  );
  if (operations.length > 1 && operations.some((o) => !o.name)) {
    return new RequestError("Anonymous operations must be the only defined operation");
  }
  const selected = operationName
    ? operations.find((o) => o.name?.value === operationName)
    : operations.length === 1
      ? operations[0]
      : undefined;
  if (!selected) return new RequestError("Operation not found");
  if (selected.operation === "subscription") {
    return new RequestError("Subscriptions are not supported");
  }
  return undefined;
}

const FRAGMENT_CYCLE = /^Cannot spread fragment ".*" within itself/;

/**
 * pg_graphql answers `__typename` directly under `__type(name:)` with the type's own name ("Account",
 * not "__Type"): that selection reads `name` under the same response key.
 */
function typenameOfIntrospectedType(document: DocumentNode): DocumentNode {
  return visit(document, {
    Field(node) {
      if (node.name.value !== "__type" || !node.selectionSet) return undefined;
      const selections = node.selectionSet.selections.map((selection) =>
        selection.kind === Kind.FIELD && selection.name.value === "__typename"
          ? {
              ...selection,
              alias: selection.alias ?? { kind: Kind.NAME, value: "__typename" },
              name: { kind: Kind.NAME, value: "name" },
            }
          : selection,
      );
      return { ...node, selectionSet: { ...node.selectionSet, selections } };
    },
  });
}

/** pg_graphql reads an input object that names a field twice with the last value. */
function lastFieldValueWins(document: DocumentNode): DocumentNode {
  return visit(document, {
    ObjectValue(node) {
      const byName = new Map<string, (typeof node.fields)[number]>();
      for (const field of node.fields) {
        byName.delete(field.name.value);
        byName.set(field.name.value, field);
      }
      return byName.size === node.fields.length ? undefined : { ...node, fields: [...byName.values()] };
    },
  });
}

/**
 * Parses and validates a document for `schema`; a document beyond `limits` is refused before it is validated
 * (its errors come without `data`, as pg_graphql answers a request it refuses outright).
 */
function prepare(
  schema: GraphQLSchema,
  source: string,
  operationName: string | undefined,
  limits: PgGqlLimits,
): Prepared {
  try {
    const parsed = parseWithinLimits(source, limits);
    const refused = limitErrors(parsed, limits);
    if (refused.length) return refused.map((e) => new RequestError(e.message));
    const selectionError = operationSelectionError(parsed, operationName);
    if (selectionError) return [selectionError];
    const document = alignVariableTypes(schema, typenameOfIntrospectedType(lastFieldValueWins(parsed)));
    const errors = validate(schema, document).map((e) =>
      FRAGMENT_CYCLE.test(e.message) ? new RequestError("Found a cycle between fragments") : e,
    );
    if (errors.length) return errors;
    return introspectionEnabled(schema) ? { document, errors: [] } : gateIntrospection(document);
  } catch (e) {
    return [e instanceof GraphQLError ? e : new GraphQLError("Invalid request")];
  }
}

/**
 * A request's document for `schema`, cached per schema (so a repeated document is the same object, and
 * grafast's plans for its operation, cached per operation, are reused); errors are returned, not thrown.
 */
export function prepareDocument(
  schema: GraphQLSchema,
  source: string,
  operationName: string | undefined,
  limits: PgGqlLimits,
): Prepared {
  const cache = cacheOf(schema);
  const key = `${operationName ?? ""}\u0000${source}`;
  const cached = cache.get(key);
  if (cached) return cached;
  const prepared = prepare(schema, source, operationName, limits);
  if (source.length <= MAX_CACHED_SOURCE) {
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(key, prepared);
  }
  return prepared;
}
