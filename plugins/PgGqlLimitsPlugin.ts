import {
  GraphQLError,
  Kind,
  parse,
  visitInParallel,
  type DocumentNode,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type Source,
  type ValidationRule,
} from "grafast/graphql";
import type {} from "grafserv";
import type { InternalErrorListener } from "./pgGqlErrors";

/**
 * Bounds on one GraphQL document, so that no single request can hold the process: grafast plans an operation
 * synchronously, and its planning time grows faster than the number of fields (a thousand aliased collections
 * take seconds). The document is refused before it is validated or planned.
 */
export interface PgGqlLimits {
  /** Lexical tokens of the document: parsing stops past them (graphql-js `maxLexicalTokens`). */
  maxTokens: number;
  /** Fields nested in one another (`{ a { b } }` is 2 deep), through fragments. */
  maxDepth: number;
  /** Aliased fields, each fragment spread counting its fragment's again. */
  maxAliases: number;
  /** Fields, each fragment spread counting its fragment's again. */
  maxFields: number;
}

declare global {
  namespace GraphileConfig {
    interface Preset {
      /**
       * Bounds on each GraphQL document (PgGqlLimitsPlugin; those not given keep PG_GQL_LIMITS' values), and who
       * hears of each error answered "Internal server error" (PgGqlErrorsPlugin; default: console.error).
       */
      pgGraphql?: Partial<PgGqlLimits> & { onInternalError?: InternalErrorListener };
    }
  }
}

/**
 * The defaults: Apollo Router's default parser token limit; depth, aliases and fields well above what
 * pg_graphql's regression cases use (at most 28 deep, 10 aliases, 104 fields, 148 tokens).
 */
export const PG_GQL_LIMITS: PgGqlLimits = {
  maxTokens: 15_000,
  maxDepth: 32,
  maxAliases: 100,
  maxFields: 1_000,
};

/** Each resolved preset's limits, read once (every request asks). */
const presetLimits = new WeakMap<GraphileConfig.ResolvedPreset, PgGqlLimits>();

/** The limits a resolved preset sets, the defaults for the others. */
export function limitsOf(preset: GraphileConfig.ResolvedPreset): PgGqlLimits {
  let limits = presetLimits.get(preset);
  if (limits === undefined) {
    const { maxTokens, maxDepth, maxAliases, maxFields } = { ...PG_GQL_LIMITS, ...preset.pgGraphql };
    presetLimits.set(preset, (limits = { maxTokens, maxDepth, maxAliases, maxFields }));
  }
  return limits;
}

/**
 * grafast's own bound on planning layers (`grafast.maxPlanningDepth`), set behind `maxDepth`: a level of fields
 * may take up to 6 layers, as grafast's documentation of the option says (its default, 100, refuses collections
 * nested in collections 28 deep).
 */
export function planningDepthFor(maxDepth: number): number {
  return 6 * maxDepth;
}

interface Size {
  depth: number;
  aliases: number;
  fields: number;
}

const EMPTY: Size = { depth: 0, aliases: 0, fields: 0 };

/**
 * Measures selection sets as if every fragment spread were written out, in time linear in the document: each
 * fragment is measured once, however often it is spread. A fragment spread within itself (a cycle, which
 * validation refuses) counts as empty there.
 */
function measurer(document: DocumentNode): {
  selectionSet(set: SelectionSetNode): Size;
  fragment(name: string): Size;
} {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  const measured = new Map<string, Size>();
  const fragment = (name: string): Size => {
    const known = measured.get(name);
    if (known) return known;
    const definition = fragments.get(name);
    if (!definition) return EMPTY;
    measured.set(name, EMPTY);
    const size = selectionSet(definition.selectionSet);
    measured.set(name, size);
    return size;
  };
  const selectionSet = (set: SelectionSetNode): Size => {
    const total = { depth: 0, aliases: 0, fields: 0 };
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        const inner = selection.selectionSet ? selectionSet(selection.selectionSet) : EMPTY;
        total.depth = Math.max(total.depth, inner.depth + 1);
        total.aliases += inner.aliases + (selection.alias ? 1 : 0);
        total.fields += inner.fields + 1;
      } else {
        const inner =
          selection.kind === Kind.INLINE_FRAGMENT
            ? selectionSet(selection.selectionSet)
            : fragment(selection.name.value);
        total.depth = Math.max(total.depth, inner.depth);
        total.aliases += inner.aliases;
        total.fields += inner.fields;
      }
    }
    return total;
  };
  return { selectionSet, fragment };
}

/**
 * The errors of the first operation or fragment of `document` that is beyond `limits` (none when all are
 * within them). Fragments are measured on their own too: validation reads every one, used or not.
 */
export function limitErrors(document: DocumentNode, limits: PgGqlLimits): GraphQLError[] {
  const measure = measurer(document);
  for (const definition of document.definitions) {
    let size: Size;
    let subject: string;
    if (definition.kind === Kind.OPERATION_DEFINITION) {
      size = measure.selectionSet(definition.selectionSet);
      subject = definition.name ? `Operation "${definition.name.value}"` : "The operation";
    } else if (definition.kind === Kind.FRAGMENT_DEFINITION) {
      size = measure.fragment(definition.name.value);
      subject = `Fragment "${definition.name.value}"`;
    } else {
      continue;
    }
    const errors: GraphQLError[] = [];
    if (size.depth > limits.maxDepth) {
      errors.push(new GraphQLError(`${subject} nests fields more than ${limits.maxDepth} deep`));
    }
    if (size.aliases > limits.maxAliases) {
      errors.push(new GraphQLError(`${subject} has more than ${limits.maxAliases} aliases`));
    }
    if (size.fields > limits.maxFields) {
      errors.push(
        new GraphQLError(
          `${subject} selects more than ${limits.maxFields} fields (a fragment counts at every spread)`,
        ),
      );
    }
    if (errors.length) return errors;
  }
  return [];
}

/** Parses a document, refusing one of more than `maxTokens` tokens (a syntax error, thrown as parse throws). */
export function parseWithinLimits(source: string | Source, limits: PgGqlLimits): DocumentNode {
  return parse(source, { maxLexicalTokens: limits.maxTokens });
}

/**
 * `rules` run on a document within `limits`; a document beyond them gets the limits' errors and no other rule
 * runs (rules are called when validation starts, before it visits the document).
 */
function withinLimits(limits: PgGqlLimits, rules: readonly ValidationRule[]): ValidationRule {
  return (context) => {
    const refused = limitErrors(context.getDocument(), limits);
    for (const error of refused) context.reportError(error);
    return refused.length ? {} : visitInParallel(rules.map((rule) => rule(context)));
  };
}

/**
 * The limits for any PostGraphile app: grafserv validates with them first (`preset.grafserv.maxRequestLength`
 * bounds what it parses); where grafast parses (`grafast()`, Strata's server), PgGqlDocumentPlugin reads each
 * document within them before anything else.
 */
export const PgGqlLimitsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlLimitsPlugin",
  description: "Refuses GraphQL documents beyond the preset's token, depth, alias and field limits",
  version: "0.1.0",
  grafserv: {
    middleware: {
      setPreset(next, event) {
        event.validationRules = [withinLimits(limitsOf(event.resolvedPreset), event.validationRules)];
        return next();
      },
    },
  },
};
