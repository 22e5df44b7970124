import {
  pgSelect,
  TYPES,
  type PgCodecWithAttributes,
  type PgResource,
  type PgSelectQueryBuilder,
  type PgSelectSingleStep,
  type PgSelectStep,
} from "@dataplan/pg";
import {
  access,
  constant,
  ConstantStep,
  first,
  lambda,
  last,
  operationPlan,
  type ConnectionStep,
  type FieldArgs,
  type Step,
} from "grafast";
import { Kind, type FieldNode, type GraphQLFieldConfigArgumentMap } from "grafast/graphql";
import { sql, type SQL } from "pg-sql2";
import { codecDirectives } from "./PgGqlDirectivesPlugin";
import { PgGqlError } from "./pgGqlErrors";
import { filterStep } from "./pgGqlFilterOperands";
import { base64OfJsonbArray, primaryKeyAttributes } from "./pgGqlNodeId";
import { orderFromArgument, type OrderElement } from "./PgGqlOrderByPlugin";

/** pg_graphql's default page size when no `max_rows` directive applies. */
export const DEFAULT_MAX_ROWS = 30;

/** What a connection field decided at plan time, read by the edge, pageInfo and totalCount plans. */
export interface PgGqlPage {
  resource: PgResource;
  order: OrderElement[];
  reverse: boolean;
  limit: number;
  offset: number;
  /** The rows matching the filter, before cursor and page limits (aggregate mode). */
  $matching: PgSelectStep;
  /** The `after` (forward) or `before` (reverse) cursor. */
  $cursor: Step<string | null | undefined>;
}

const pages = new WeakMap<PgSelectStep, PgGqlPage>();

export function pageOf($select: Step): PgGqlPage | undefined {
  return pages.get($select as PgSelectStep);
}

/** `max_rows`: the table's directive, else its schema's, else 30. */
export function maxRowsOf(resource: PgResource): number {
  const pgGql = codecDirectives(resource.codec);
  const value = pgGql?.entity.max_rows ?? (pgGql?.schema as { max_rows?: number })?.max_rows;
  return typeof value === "number" && value > 0 ? value : DEFAULT_MAX_ROWS;
}

function column(alias: SQL, name: string): SQL {
  return sql`${alias}.${sql.identifier(name)}`;
}

/** pg_graphql cursor of a row: base64 of the jsonb array of its order-by values. */
export function cursorSql(order: readonly OrderElement[], alias: SQL): SQL {
  return base64OfJsonbArray(order.map((o) => sql`to_jsonb(${column(alias, o.attribute)})`));
}

function decodeCursor(cursor: string): unknown[] {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, "base64").toString("utf8"));
    if (Array.isArray(parsed)) return parsed;
  } catch {
    // fall through
  }
  throw new PgGqlError("Invalid cursor");
}

function jsonToText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** pg_graphql's keyset condition: rows strictly after the cursor in `order` (a port of `to_pagination_clause`). */
function paginationClause(
  resource: PgResource,
  alias: SQL,
  order: readonly OrderElement[],
  values: readonly unknown[],
): SQL {
  if (values.length === 0) return sql.false;
  if (order.length === 0) throw new PgGqlError("orderBy clause incompatible with pagination cursor");
  const [o, ...restOrder] = order;
  const [v, ...restValues] = values;
  const codec = (resource.codec as PgCodecWithAttributes).attributes[o.attribute].codec;
  const col = column(alias, o.attribute);
  const val = sql`(${sql.value(jsonToText(v))}::${codec.sqlType})`;
  const op = o.direction === "asc" ? sql`>` : sql`<`;
  const rest = paginationClause(resource, alias, restOrder, restValues);
  return sql`((${col} ${op} ${val} or (${col} is not null and ${val} is null and ${o.nullsFirst ? sql.true : sql.false})) or ((${col} = ${val} or (${col} is null and ${val} is null)) and ${rest}))`;
}

function reversed(order: readonly OrderElement[]): OrderElement[] {
  return order.map((o) => ({
    ...o,
    direction: o.direction === "asc" ? "desc" : "asc",
    nullsFirst: !o.nullsFirst,
  }));
}

/** Whether the document gives no cursor in `$cursor`'s argument (neither a value nor a variable for one). */
function noCursorIn($cursor: Step): boolean {
  return $cursor instanceof ConstantStep && $cursor.data == null;
}

function withoutCursor(page: Omit<PgGqlPage, "$matching">): boolean {
  return noCursorIn(page.$cursor);
}

/** Applies (or, with `negate`, excludes) the keyset condition of the page's cursor to `$target`. */
function applyCursor(page: Omit<PgGqlPage, "$matching">, $target: PgSelectStep, negate: boolean) {
  const order = page.reverse ? reversed(page.order) : page.order;
  const resource = page.resource;
  // No cursor in the document: decided now, not by a step run per request.
  if (withoutCursor(page)) {
    if (negate) $target.where(sql.false);
    return;
  }
  $target.apply(
    lambda(page.$cursor, (cursor) => {
      if (cursor == null) {
        return negate ? (qb: PgSelectQueryBuilder) => qb.where(sql.false) : null;
      }
      const values = decodeCursor(cursor);
      return (qb: PgSelectQueryBuilder) => {
        const clause = paginationClause(resource, qb.alias, order, values);
        qb.where(negate ? sql`not coalesce(${clause}, false)` : clause);
      };
    }),
  );
}

/** A plan-time view of an input argument (grafast's `__InputStaticLeafStep`/`__TrackedValueStep`). */
interface EvaluableStep {
  eval(): unknown;
  evalIs(value: unknown): boolean;
}

function argument(fieldArgs: FieldArgs, name: string): EvaluableStep {
  return fieldArgs.getRaw(name) as unknown as EvaluableStep;
}

function evalInt(fieldArgs: FieldArgs, name: string): number | null {
  return (argument(fieldArgs, name).eval() as number | null | undefined) ?? null;
}

function checkPagingArgs(fieldArgs: FieldArgs) {
  const present = (name: string) =>
    !argument(fieldArgs, name).evalIs(null) && !argument(fieldArgs, name).evalIs(undefined);
  const [hasFirst, hasLast, hasBefore, hasAfter] = ["first", "last", "before", "after"].map(present);
  if (hasFirst && hasLast) throw new PgGqlError('only one of "first" and "last" may be provided');
  if (hasBefore && hasAfter) throw new PgGqlError('only one of "before" and "after" may be provided');
  if (hasFirst && hasBefore) throw new PgGqlError('"first" may only be used with "after"');
  if (hasLast && hasAfter) throw new PgGqlError('"last" may only be used with "before"');
  return { reverse: hasLast || hasBefore };
}

/** The page's size: `first` (or `last`), at most the table's max_rows. */
function pageLimit(fieldArgs: FieldArgs, resource: PgResource, reverse: boolean): number {
  const maxRows = maxRowsOf(resource);
  const requested = evalInt(fieldArgs, reverse ? "last" : "first");
  if (requested !== null && requested < 0) {
    throw new PgGqlError(`"${reverse ? "last" : "first"}" must be a non-negative integer`);
  }
  return Math.min(requested ?? maxRows, maxRows);
}

/**
 * Turns the collection select of a connection field into a pg_graphql page: filter, ordering
 * with the primary key as tie-breaker, keyset cursor, first/last/offset and max_rows.
 */
export function planPage(
  $select: PgSelectStep,
  fieldArgs: FieldArgs,
  resource: PgResource,
  build: GraphileBuild.Build,
): PgSelectStep {
  const { reverse } = checkPagingArgs(fieldArgs);
  const order = orderFromArgument(build, resource, argument(fieldArgs, "orderBy").eval());
  // pg_graphql appends the primary key even when `orderBy` names it already: cursors carry it twice then.
  for (const pk of primaryKeyAttributes(resource)) {
    order.push({ attribute: pk, direction: "asc", nullsFirst: false });
  }
  for (const o of order) {
    $select.orderBy({
      fragment: column($select.alias, o.attribute),
      codec: (resource.codec as PgCodecWithAttributes).attributes[o.attribute].codec,
      direction: o.direction === "asc" ? "ASC" : "DESC",
      nulls: o.nullsFirst ? "FIRST" : "LAST",
    });
  }
  const limit = pageLimit(fieldArgs, resource, reverse);
  const offset = evalInt(fieldArgs, "offset") ?? 0;
  if (reverse) $select.setLast(constant(limit));
  else $select.setFirst(constant(limit));
  if (offset > 0) $select.setOffset(constant(offset));
  $select.setOrderIsUnique();
  $select.apply(filterStep(fieldArgs, $select.alias));
  const $matching = $select.clone("aggregate");
  const $cursor = fieldArgs.getRaw(reverse ? "before" : "after") as Step<string | null | undefined>;
  const page: PgGqlPage = { resource, order, reverse, limit, offset, $matching, $cursor };
  applyCursor(page, $select, false);
  pages.set($select, page);
  return $select;
}

/** Whether `field` selects plain fields only (no fragments), each of which `allowed` accepts. */
function selectsOnly(field: FieldNode, allowed: (selected: FieldNode) => boolean): boolean {
  return (field.selectionSet?.selections ?? []).every((s) => s.kind === Kind.FIELD && allowed(s));
}

/**
 * Whether the operation being planned is one root field answered by its page's rows alone: `edges`, and
 * `pageInfo` flags and cursors that need no probe (see pageFlags: `hasNextPage` of a forward page of at
 * least one row from the row fetched past it, `hasPreviousPage` of a page without a cursor from its offset).
 * The page is then the request's only select, and the shared root row (which exists to merge several
 * selects, counts and page probes into one statement) would only wrap it in a subquery whose rows come
 * back as a text array to parse.
 */
function answeredByItsPageAlone(fieldArgs: FieldArgs, resource: PgResource): boolean {
  const roots = operationPlan().operation.selectionSet.selections;
  const root = roots[0];
  if (roots.length !== 1 || root.kind !== Kind.FIELD) return false;
  const { reverse } = checkPagingArgs(fieldArgs);
  const flagFromRows = (flag: FieldNode) => {
    switch (flag.name.value) {
      case "__typename":
      case "startCursor":
      case "endCursor":
        return true;
      case "hasNextPage":
        return pageLimit(fieldArgs, resource, reverse) > 0;
      case "hasPreviousPage":
        return noCursorIn(fieldArgs.getRaw("after"));
      default:
        return false;
    }
  };
  return selectsOnly(root, (selected) => {
    const name = selected.name.value;
    if (name === "edges" || name === "__typename") return true;
    return name === "pageInfo" && !reverse && selectsOnly(selected, flagFromRows);
  });
}

/**
 * The root-row trick: every root collection hangs off one shared single-row select, so
 * @dataplan/pg inlines all of them (and their counts) into one SQL statement, as it does for
 * nested relations. A lone page needs no such row (see answeredByItsPageAlone).
 */
function rootSelect(build: GraphileBuild.Build, resource: PgResource, fieldArgs: FieldArgs): PgSelectStep {
  if (answeredByItsPageAlone(fieldArgs, resource)) return pgSelect({ resource, identifiers: [] });
  const anchor = (Object.values(build.input.pgRegistry.pgResources) as PgResource[])
    .filter((r) => !r.parameters && r.codec.attributes)
    .sort((a, b) => (a.name < b.name ? -1 : 1))[0];
  const $root = pgSelect({ resource: anchor, identifiers: [], from: sql`(select 1 as one)` });
  const $one = ($root.single() as PgSelectSingleStep).select(sql`1`, TYPES.int);
  return pgSelect({
    resource,
    identifiers: [{ step: $one, codec: TYPES.int, matches: () => sql`1` }],
  });
}

function countOf($select: PgSelectStep): Step<string> {
  return $select.singleAsRecord().select(sql`count(*)`, TYPES.bigint) as Step<string>;
}

/**
 * Whether at least `atLeast` rows match the page's filter on one side of its cursor. A bounded probe
 * (`limit atLeast`), not a count over the whole filter: PostgreSQL stops at the `atLeast`-th row.
 */
function atLeastRows(page: PgGqlPage, beforeCursor: boolean, atLeast: number): Step<boolean> {
  const $probe = page.$matching.clone("normal");
  applyCursor(page, $probe, beforeCursor);
  $probe.setFirst(constant(atLeast));
  return lambda($probe.items(), (rows) => ((rows as unknown[] | null)?.length ?? 0) >= atLeast, true);
}

/** `hasNextPage`/`hasPreviousPage` as pg_graphql computes them (see transpile.rs `__has_next_page`). */
function pageFlags(page: PgGqlPage, $select: PgSelectStep, which: "next" | "previous"): Step<boolean> {
  // "Beyond": more rows past the page in its own direction; "behind": rows before the cursor.
  const beyond = (which === "next") !== page.reverse;
  const { limit, offset } = page;
  if (beyond && !page.reverse && limit > 0) {
    // Whether at least offset + limit + 1 rows follow the cursor: the page's own select fetches one row
    // past the page and drops it, instead of a second scan of the filter.
    $select.setNeedsHasMore();
    return access($select, "hasNextPage") as Step<boolean>;
  }
  if (beyond) return atLeastRows(page, false, offset + limit + 1);
  // Rows behind the page: skipped by the offset, or before the cursor (none without one, so no probe).
  const $before = withoutCursor(page) ? constant(false) : atLeastRows(page, true, 1);
  return lambda(
    [$before, $select.items()],
    ([before, rows]) => ((rows as unknown[] | null)?.length ? before || offset > 0 : false),
    true,
  );
}

function edgeCursor($item: Step): Step {
  const $row = $item as PgSelectSingleStep;
  const page = pageOf($row.getClassStep());
  if (!page) return constant(null);
  return $row.select(cursorSql(page.order, $row.getClassStep().alias), TYPES.text);
}

/** pg_graphql's arguments of a collection of `resource`'s rows, in its order. */
export function connectionArguments(
  build: GraphileBuild.Build,
  resource: PgResource,
): GraphQLFieldConfigArgumentMap {
  const { GraphQLNonNull, GraphQLInt, GraphQLList } = build.graphql;
  const typeName = build.inflection.tableType(resource.codec);
  const Cursor = build.getInputTypeByName("Cursor");
  const Filter = build.getInputTypeByName(build.inflection.pgGqlFilterType(typeName));
  const OrderBy = build.getInputTypeByName(build.inflection.pgGqlOrderByType(typeName));
  return {
    first: {
      type: GraphQLInt,
      description: "Query the first `n` records in the collection",
    },
    last: { type: GraphQLInt, description: "Query the last `n` records in the collection" },
    before: {
      type: Cursor,
      description: "Query values in the collection before the provided cursor",
    },
    after: {
      type: Cursor,
      description: "Query values in the collection after the provided cursor",
    },
    offset: {
      type: GraphQLInt,
      description:
        "Skip n values from the after cursor. Alternative to cursor pagination. Backward pagination not supported.",
    },
    filter: {
      type: Filter,
      description: "Filters to apply to the results set when querying from the collection",
    },
    orderBy: {
      type: new GraphQLList(new GraphQLNonNull(OrderBy)),
      description: "Sort order to apply to the collection",
    },
  };
}

/**
 * pg_graphql's connection shape: `<T>Connection { edges: [<T>Edge!]!, pageInfo: PageInfo!,
 * totalCount: Int! (opt-in) }`, `<T>Edge { cursor: String!, node: <T>! }`, and the
 * `first, last, before, after, offset, filter, orderBy` arguments on every collection field.
 */
export const PgGqlConnectionPlugin: GraphileConfig.Plugin = {
  name: "PgGqlConnectionPlugin",
  description: "pg_graphql connections, edges, page info, cursors and paging",
  version: "0.1.0",
  after: ["ConnectionPlugin", "PgAllRowsPlugin", "PgRelationsPlugin", "PgGqlFilterPlugin"],
  schema: {
    hooks: {
      GraphQLObjectType(config, _build, context) {
        if (context.scope.isConnectionType) return { ...config, assertStep: undefined };
        return config;
      },
      GraphQLObjectType_fields(fields, build, context) {
        const { scope } = context;
        const { GraphQLNonNull, GraphQLList, GraphQLString, GraphQLInt } = build.graphql;
        if (scope.isConnectionType && scope.pgCodec) {
          const codec = scope.pgCodec;
          const edgeTypeName = build.inflection.edgeType(build.inflection.tableType(codec));
          const EdgeType = build.getOutputTypeByName(edgeTypeName);
          const out: typeof fields = {
            edges: {
              type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(EdgeType))),
              plan: ($select: Step) => ($select as ConnectionStep<any>).edges?.() ?? $select,
            } as never,
            pageInfo: {
              ...fields.pageInfo,
              plan: ($select: Step) =>
                pageOf($select) ? $select : ($select as ConnectionStep<any>).pageInfo(),
            } as never,
          };
          if (codecDirectives(codec)?.entity.totalCount?.enabled) {
            out.totalCount = {
              description: "The total number of records matching the `filter` criteria",
              type: new GraphQLNonNull(GraphQLInt),
              plan: ($select: Step) => {
                const page = pageOf($select);
                if (!page) throw new PgGqlError("totalCount is not available here");
                return lambda(countOf(page.$matching), (n) => Number(n), true);
              },
            } as never;
          }
          return out;
        }
        if (scope.isConnectionEdgeType) {
          return {
            cursor: {
              type: new GraphQLNonNull(GraphQLString),
              plan: edgeCursor,
            } as never,
            node: {
              ...fields.node,
              type: new GraphQLNonNull(build.graphql.getNullableType(fields.node.type)),
              plan: ($item: Step) => $item,
            } as never,
          };
        }
        if (scope.isPageInfo) {
          const cursorAt = (pick: typeof first) => ($select: Step) => {
            const page = pageOf($select);
            if (!page) return ($select as unknown as { get(k: string): Step }).get("startCursor");
            const $rows = $select as PgSelectStep;
            return edgeCursor($rows.listItem(pick($rows)));
          };
          const flag = (which: "next" | "previous") => ($select: Step) => {
            const page = pageOf($select);
            if (!page) {
              return ($select as unknown as { get(k: string): Step }).get(
                which === "next" ? "hasNextPage" : "hasPreviousPage",
              );
            }
            return pageFlags(page, $select as PgSelectStep, which);
          };
          return {
            hasNextPage: { ...fields.hasNextPage, plan: flag("next") } as never,
            hasPreviousPage: { ...fields.hasPreviousPage, plan: flag("previous") } as never,
            startCursor: { type: GraphQLString, plan: cursorAt(first) } as never,
            endCursor: { type: GraphQLString, plan: cursorAt(last) } as never,
          };
        }
        return fields;
      },
      GraphQLObjectType_fields_field(field, build, context) {
        const { isPgFieldConnection, pgFieldResource } = context.scope;
        if (!isPgFieldConnection || !pgFieldResource || !field.plan) return field;
        const resource = pgFieldResource as PgResource;
        if (primaryKeyAttributes(resource).length === 0) return field;
        const { GraphQLNonNull } = build.graphql;
        const oldPlan = field.plan;
        // Root collections are non-null; relationship collections are nullable, as in pg_graphql.
        const connectionType = build.graphql.getNullableType(field.type);
        return {
          ...field,
          type: context.scope.isRootQuery ? new GraphQLNonNull(connectionType) : connectionType,
          args: connectionArguments(build, resource),
          plan(...args: Parameters<typeof oldPlan>) {
            const $select = context.scope.isRootQuery
              ? rootSelect(build, resource, args[1])
              : ((
                  oldPlan(...args) as unknown as ConnectionStep<any>
                ).getSubplan() as unknown as PgSelectStep);
            return planPage($select, args[1], resource, build) as never;
          },
        } as typeof field;
      },
    },
  },
};
