import {
  GraphQLError,
  type ExecutionResult,
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
import { pgGqlErrors, RequestError } from "./pgGqlErrors";
import { introspectionEnabled } from "./PgGqlIntrospectionPlugin";
import { limitErrors, limitsOf, parseWithinLimits, type PgGqlLimits } from "./PgGqlLimitsPlugin";

/**
 * pg_graphql reads a document more loosely than graphql-js and answers its faults in its own order and words.
 * Where grafast parses (`grafast()`, Strata's server), the `parseAndValidate` middleware reads each document once
 * per schema: refused beyond the limits (PgGqlLimitsPlugin), rewritten as pg_graphql reads it, validated, its
 * root introspection taken out when the schema has introspection off. The `execute` middleware then answers in
 * pg_graphql's order: a syntax error, the operation's selection, validation errors, and only then the
 * operation, with the introspection it refused listed beside the data.
 */

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

const INTROSPECTION_FIELDS = new Set(["__schema", "__type"]);

const unknownField = (name: string) => new GraphQLError(`Unknown field "${name}" on type Query`);

/** A fragment on Query selecting `__schema`/`__type`: introspection pg_graphql refuses outright. */
function fragmentIntrospection(document: DocumentNode): GraphQLError[] {
  return document.definitions.flatMap((definition) => {
    if (definition.kind !== Kind.FRAGMENT_DEFINITION) return [];
    if (definition.typeCondition.name.value !== "Query") return [];
    return definition.selectionSet.selections.flatMap((selection) =>
      selection.kind === Kind.FIELD && INTROSPECTION_FIELDS.has(selection.name.value)
        ? [unknownField(selection.name.value)]
        : [],
    );
  });
}

/** The document without its root `__schema`/`__type` selections, and the errors that say so. */
function withoutRootIntrospection(document: DocumentNode): {
  document: DocumentNode;
  refused: GraphQLError[];
} {
  const refused: GraphQLError[] = [];
  const definitions = document.definitions.map((definition) => {
    if (definition.kind !== Kind.OPERATION_DEFINITION || definition.operation !== "query") {
      return definition;
    }
    const selections = definition.selectionSet.selections.filter((selection) => {
      if (selection.kind !== Kind.FIELD || !INTROSPECTION_FIELDS.has(selection.name.value)) return true;
      refused.push(unknownField(selection.name.value));
      return false;
    });
    const operation: OperationDefinitionNode = {
      ...definition,
      selectionSet: { ...definition.selectionSet, selections },
    };
    return operation;
  });
  return { document: { ...document, definitions }, refused };
}

/** What pg_graphql says of a document before running it, kept with the document `parseAndValidate` returns. */
interface Verdict {
  /** A syntax error: answered first. */
  syntax?: GraphQLError;
  /** Validation errors: answered once the operation is selected. */
  invalid?: readonly GraphQLError[];
  /** Root introspection taken out (introspection off): listed beside the data. */
  refused: readonly GraphQLError[];
}

const verdicts = new WeakMap<DocumentNode, Verdict>();

/** The document of a syntax error: nothing to run, only its verdict. */
const unparsed = (): DocumentNode => ({ kind: Kind.DOCUMENT, definitions: [] });

const FRAGMENT_CYCLE = /^Cannot spread fragment ".*" within itself/;

/** Reads a document as pg_graphql does; a document beyond `limits` is refused before it is validated. */
function read(
  schema: GraphQLSchema,
  source: string,
  limits: PgGqlLimits,
): DocumentNode | readonly GraphQLError[] {
  let parsed: DocumentNode;
  try {
    parsed = parseWithinLimits(source, limits);
  } catch (e) {
    const document = unparsed();
    verdicts.set(document, {
      syntax: e instanceof GraphQLError ? e : new GraphQLError("Invalid request"),
      refused: [],
    });
    return document;
  }
  // Refused outright, as pg_graphql refuses a request it will not read: no `data`.
  const beyond = limitErrors(parsed, limits);
  if (beyond.length) return beyond.map((e) => new RequestError(e.message));
  const document = alignVariableTypes(schema, typenameOfIntrospectedType(lastFieldValueWins(parsed)));
  const invalid = validate(schema, document).map((e) =>
    FRAGMENT_CYCLE.test(e.message) ? new RequestError("Found a cycle between fragments") : e,
  );
  if (invalid.length) {
    verdicts.set(document, { invalid, refused: [] });
    return document;
  }
  if (introspectionEnabled(schema)) {
    verdicts.set(document, { refused: [] });
    return document;
  }
  const refusedFragments = fragmentIntrospection(document);
  if (refusedFragments.length) {
    verdicts.set(document, { invalid: refusedFragments, refused: [] });
    return document;
  }
  const gated = withoutRootIntrospection(document);
  verdicts.set(gated.document, { refused: gated.refused });
  return gated.document;
}

const CACHE_SIZE = 500;
const MAX_CACHED_SOURCE = 100_000;

/** Per schema, the documents read from each source (a repeated document is the same object, so grafast's plans for its operation, cached per operation, are reused). */
const readDocuments = new WeakMap<GraphQLSchema, Map<string, DocumentNode | readonly GraphQLError[]>>();

/** A document as pg_graphql reads it for `schema` (refusals beyond the limits as errors), kept per source. */
export function pgGqlDocument(
  schema: GraphQLSchema,
  source: string,
  limits: PgGqlLimits,
): DocumentNode | readonly GraphQLError[] {
  let cache = readDocuments.get(schema);
  if (!cache) readDocuments.set(schema, (cache = new Map()));
  const known = cache.get(source);
  if (known) return known;
  const document = read(schema, source, limits);
  if (source.length <= MAX_CACHED_SOURCE) {
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(source, document);
  }
  return document;
}

/** pg_graphql chooses the operation before validating: these errors come first, with its texts. */
function operationSelectionError(
  document: DocumentNode,
  operationName: string | null | undefined,
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
  if (selected.operation === "subscription") return new RequestError("Subscriptions are not supported");
  return undefined;
}

/**
 * What pg_graphql answers instead of running the operation, or null to run it: a syntax error, the operation's
 * selection, validation errors, an operation left empty by the introspection it refused.
 */
function answerBeforeRunning(
  verdict: Verdict,
  document: DocumentNode,
  operationName: string | null | undefined,
): ExecutionResult | null {
  if (verdict.syntax) return pgGqlErrors([verdict.syntax]);
  const selection = operationSelectionError(document, operationName);
  if (selection) return pgGqlErrors([selection]);
  if (verdict.invalid) return pgGqlErrors(verdict.invalid);
  const empty = document.definitions.some(
    (d) => d.kind === Kind.OPERATION_DEFINITION && d.selectionSet.selections.length === 0,
  );
  return empty ? pgGqlErrors(verdict.refused) : null;
}

/** A document validated elsewhere (grafserv's own parse and validation): only the operation's selection applies. */
const VALIDATED_ELSEWHERE: Verdict = { refused: [] };

/**
 * pg_graphql's document rules: `grafast()` (and any server that parses through grafast's middleware) reads each
 * document as pg_graphql does (see `pgGqlDocument`), and every request is answered in pg_graphql's order.
 */
export const PgGqlDocumentPlugin: GraphileConfig.Plugin = {
  name: "PgGqlDocumentPlugin",
  description: "Reads GraphQL documents as pg_graphql does and answers their faults in its order and words",
  version: "0.1.0",
  grafast: {
    middleware: {
      parseAndValidate(_next, { schema, source, resolvedPreset }) {
        return pgGqlDocument(
          schema,
          typeof source === "string" ? source : source.body,
          limitsOf(resolvedPreset),
        );
      },
      async execute(next, event) {
        const { document, operationName } = event.args;
        const verdict = verdicts.get(document) ?? VALIDATED_ELSEWHERE;
        const early = answerBeforeRunning(verdict, document, operationName);
        if (early) return early;
        const result = await next();
        if (!verdict.refused.length || Symbol.asyncIterator in result) return result;
        const { errors, ...rest } = result as ExecutionResult;
        return errors?.length ? result : { ...rest, errors: pgGqlErrors(verdict.refused).errors };
      },
    },
  },
};
