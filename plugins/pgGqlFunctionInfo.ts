import { withPgClientFromPgService, type PgResource } from "@dataplan/pg";
import type { PgProc } from "pg-introspection";

/** What the gather phase learns about a function that its resource does not say (`extensions.pgGqlFunction`). */
export interface PgGqlFunctionInfo {
  /** pg_proc oid: computed fields follow the functions' creation order, as pg_graphql lists them. */
  oid: number;
  /** `returns setof` without `rows 1`: a collection rather than a single row. */
  isSetOf: boolean;
  /** Another function of the same schema has the same name. */
  overloaded: boolean;
  /** The return type is an array (`returns account[]` becomes a set of rows in PostGraphile). */
  returnsArray: boolean;
  /** Per input argument: null when required, else the default as a GraphQL literal (null when not shown). */
  argDefaults: ({ value: string | null } | null)[];
}

declare global {
  namespace DataplanPg {
    interface PgResourceExtensions {
      pgGqlFunction?: PgGqlFunctionInfo;
    }
  }
}

/** Relation kinds whose row type is a table's (a computed field's only argument). */
const TABLE_KINDS = new Set(["r", "v", "m", "f", "p"]);

/** A function of one table row: a computed field of that table (when its name is overloaded, too). */
export function isComputedFieldCandidate(pgProc: PgProc): boolean {
  if (pgProc.pronargs !== 1) return false;
  const [arg] = pgProc.getArguments().filter((a) => a.isIn);
  const relkind = arg?.type.getClass()?.relkind;
  return relkind !== undefined && TABLE_KINDS.has(relkind);
}

/**
 * One default expression as pg_graphql shows it in introspection: integers, booleans, floats and
 * text literals; anything else (an expression, a call) is a default it cannot show (null).
 */
function graphqlDefault(expression: string, typeOid: string): string | null {
  const trimmed = expression.trim();
  if (/^NULL::/i.test(trimmed)) return null;
  const literal = trimmed
    .replace(/::[\w ."[\]]+$/, "")
    .replace(/^'(.*)'$/s, "$1")
    .replace(/''/g, "'");
  switch (typeOid) {
    case "21": // smallint
    case "23": // integer
      return /^-?\d+$/.test(literal) && Math.abs(Number(literal)) <= 2 ** 31 ? String(Number(literal)) : null;
    case "16": // boolean
      return literal === "true" || literal === "false" ? literal : null;
    case "700": // real
    case "701": // double precision
      return literal !== "" && Number.isFinite(Number(literal)) ? String(Number(literal)) : null;
    case "25": // text
      return trimmed.endsWith("::text") ? JSON.stringify(literal) : null;
    default:
      return null;
  }
}

/**
 * The defaults of a function's input arguments from `pg_get_expr(proargdefaults)`. Like
 * pg_graphql, the expressions are split at commas: when that does not give one expression per
 * defaulted argument (an array or text default containing a comma), the arguments count as
 * required.
 */
function argDefaults(pgProc: PgProc, expressions: string | undefined): PgGqlFunctionInfo["argDefaults"] {
  const types = pgProc.proargtypes ?? [];
  const withDefaults = pgProc.pronargdefaults ?? 0;
  const pieces = expressions?.split(",") ?? [];
  const firstDefault = types.length - withDefaults;
  return types.map((typeOid, i) =>
    i >= firstDefault && pieces.length === withDefaults
      ? { value: graphqlDefault(pieces[i - firstDefault], String(typeOid)) }
      : null,
  );
}

export interface GatherState {
  defaultsByService: Map<string, Promise<Map<string, string>>>;
}

/** `pg_get_expr(proargdefaults)` of every function with defaults, read once per gather. */
export function defaultExpressions(
  info: { state: unknown; resolvedPreset: GraphileConfig.ResolvedPreset },
  serviceName: string,
): Promise<Map<string, string>> {
  const state = info.state as GatherState;
  let pending = state.defaultsByService.get(serviceName);
  if (!pending) {
    const pgService = info.resolvedPreset.pgServices?.find((s) => s.name === serviceName);
    pending = pgService
      ? withPgClientFromPgService(pgService, pgService.pgSettingsForIntrospection ?? null, (client) =>
          client.query<{ oid: string; defaults: string }>({
            text: "select oid::text as oid, pg_get_expr(proargdefaults, 0) as defaults from pg_catalog.pg_proc where pronargdefaults > 0",
          }),
        ).then(({ rows }) => new Map(rows.map((r) => [r.oid, r.defaults])))
      : Promise.resolve(new Map());
    state.defaultsByService.set(serviceName, pending);
  }
  return pending;
}

/** A function's info, from its catalog row and its defaults' expressions (`defaultExpressions`). */
export function gatheredFunctionInfo(pgProc: PgProc, defaults: string | undefined): PgGqlFunctionInfo {
  const overloads = pgProc.getNamespace()?.getProcs({ name: pgProc.proname }) ?? [];
  return {
    oid: Number(pgProc._id),
    isSetOf: pgProc.proretset && pgProc.prorows !== 1,
    overloaded: overloads.length > 1,
    returnsArray: pgProc.getReturnType()?.typcategory === "A",
    argDefaults: argDefaults(pgProc, defaults),
  };
}

/** What the gather phase learnt about a function resource; undefined for any other resource. */
export function functionInfo(resource: PgResource): PgGqlFunctionInfo | undefined {
  return resource.extensions?.pgGqlFunction;
}
