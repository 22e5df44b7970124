import {
  GraphQLError,
  Kind,
  parse,
  parseType,
  TypeInfo,
  validate,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from "grafast/graphql";
import { introspectionEnabled } from "../../plugins/PgGqlIntrospectionPlugin";

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
  return visit(document, {
    VariableDefinition(node) {
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

/** Parses and validates a request's document for `schema`, cached per schema; errors are returned, not thrown. */
export function prepareDocument(schema: GraphQLSchema, source: string): Prepared {
  const cache = cacheOf(schema);
  const cached = cache.get(source);
  if (cached) return cached;
  let prepared: Prepared;
  try {
    const document = alignVariableTypes(schema, parse(source));
    const errors = validate(schema, document);
    prepared = errors.length
      ? errors
      : introspectionEnabled(schema)
        ? { document, errors: [] }
        : gateIntrospection(document);
  } catch (e) {
    prepared = [e instanceof GraphQLError ? e : new GraphQLError("Invalid request")];
  }
  if (source.length <= MAX_CACHED_SOURCE) {
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(source, prepared);
  }
  return prepared;
}
