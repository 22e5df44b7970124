import { errors, RestError } from "./errors";
import {
  outputName,
  parseField,
  parseFilterValue,
  type Field,
  type Filter,
  type LogicTree,
  type OrderTerm,
  type SelectItem,
} from "./request/grammar";
import type { ApiRequest, Scoped } from "./request/apiRequest";
import {
  qualified,
  type ForeignKey,
  type Relation,
  type RestFunction,
  type SchemaCache,
} from "../catalog/schemaCache";

/**
 * Stage 2 for what a request reads (and what a write or a call returns): the select, filters, order and
 * embeds resolved against the schema cache into a tree of ReadNodes. Names are checked here.
 */

export type Cardinality = "many-to-one" | "one-to-many" | "one-to-one" | "many-to-many";

export interface Relationship {
  cardinality: Cardinality;
  /** For m2o/o2o-forward: FK on the parent; for o2m/o2o-backward: FK on the child; for m2m: FK junction→parent. */
  fk: ForeignKey;
  /** True when `fk` lives on the embedded (child) side. */
  fkOnChild: boolean;
  junction?: { relation: Relation; toParent: ForeignKey; toChild: ForeignKey };
}

export type OutputItem =
  | { kind: "column"; name: string; field: Field; cast?: string }
  /** Every column of a row whose columns the catalog does not list (a function's `returns table`). */
  | { kind: "all" }
  | { kind: "embed"; node: ReadNode }
  | { kind: "count"; name: string };

export interface ReadNode {
  relation: Relation;
  /** SQL alias, unique within the statement. */
  alias: string;
  items: OutputItem[];
  filters: Filter[];
  logic: LogicTree[];
  order: OrderTerm[];
  /** Order terms on to-one embeds, with the embed node they address. */
  limit?: number;
  offset?: number;
  /** How this node joins its parent; undefined at the root. */
  join?: {
    relationship: Relationship;
    inner: boolean;
    spread: boolean;
    /** Output key; undefined for an empty embed `rel()` that only filters. */
    name?: string;
  };
  children: ReadNode[];
}

function relationOf(cache: SchemaCache, schema: string, name: string): Relation {
  const rel = cache.relations.get(qualified(schema, name));
  if (!rel) throw errors.noTable(schema, name);
  return rel;
}

const sameCols = (a: string[], b: string[]) => a.length === b.length && a.every((c) => b.includes(c));
const isUnique = (rel: Relation, cols: string[]) => rel.uniques.some((u) => sameCols(u, cols));

/** Every relationship from `parent` to a relation named `target` (PostgREST's relationship discovery). */
function relationshipsTo(
  cache: SchemaCache,
  parent: Relation,
  target: string,
): { rel: Relation; r: Relationship }[] {
  const found: { rel: Relation; r: Relationship }[] = [];
  const rel = cache.relations.get(qualified(parent.schema, target));
  const fks = cache.foreignKeys;
  const onTable = (fk: ForeignKey, r: Relation) => fk.schema === r.schema && fk.table === r.name;
  const refsTable = (fk: ForeignKey, r: Relation) => fk.refSchema === r.schema && fk.refTable === r.name;
  if (rel) {
    for (const fk of fks) {
      if (onTable(fk, parent) && refsTable(fk, rel)) {
        found.push({ rel, r: { cardinality: "many-to-one", fk, fkOnChild: false } });
      }
      if (onTable(fk, rel) && refsTable(fk, parent)) {
        const oneToOne = isUnique(rel, fk.columns);
        found.push({ rel, r: { cardinality: oneToOne ? "one-to-one" : "one-to-many", fk, fkOnChild: true } });
      }
    }
    // many-to-many through a junction whose FK columns to both sides are part of its primary key
    for (const junction of cache.relations.values()) {
      const toParent = fks.filter((fk) => onTable(fk, junction) && refsTable(fk, parent));
      const toChild = fks.filter((fk) => onTable(fk, junction) && refsTable(fk, rel));
      for (const p of toParent) {
        for (const c of toChild) {
          if (p === c) continue;
          const pk = junction.primaryKey;
          if (p.columns.every((x) => pk.includes(x)) && c.columns.every((x) => pk.includes(x))) {
            found.push({
              rel,
              r: {
                cardinality: "many-to-many",
                fk: p,
                fkOnChild: false,
                junction: { relation: junction, toParent: p, toChild: c },
              },
            });
          }
        }
      }
    }
  }
  // `rel` may also name a foreign key column or constraint of the parent (`from:sender_id(name)`).
  for (const fk of fks) {
    if (
      onTable(fk, parent) &&
      (fk.name === target || (fk.columns.length === 1 && fk.columns[0] === target))
    ) {
      const refRel = cache.relations.get(qualified(fk.refSchema, fk.refTable));
      if (refRel) found.push({ rel: refRel, r: { cardinality: "many-to-one", fk, fkOnChild: false } });
    }
  }
  return found;
}

function matchesHint(r: Relationship, hint: string): boolean {
  if (r.fk.name === hint) return true;
  if (r.junction && (r.junction.relation.name === hint || r.junction.toChild.name === hint)) return true;
  const cols = r.fkOnChild ? r.fk.columns : r.fk.columns;
  return cols.length === 1 && cols[0] === hint;
}

function describeRelationship(parent: Relation, child: Relation, r: Relationship) {
  return {
    cardinality: r.cardinality,
    embedding: `${parent.name} with ${child.name}`,
    relationship: r.junction
      ? `${r.junction.relation.name} using ${r.junction.toParent.name}(${r.junction.toParent.columns.join(", ")}) and ${r.junction.toChild.name}(${r.junction.toChild.columns.join(", ")})`
      : `${r.fk.name} using ${r.fk.table}(${r.fk.columns.join(", ")}) and ${r.fk.refTable}(${r.fk.refColumns.join(", ")})`,
  };
}

function resolveRelationship(
  cache: SchemaCache,
  parent: Relation,
  target: string,
  hint: string | undefined,
): { rel: Relation; r: Relationship } {
  let candidates = relationshipsTo(cache, parent, target);
  // dedupe identical (fk, cardinality) found by name and by column
  candidates = candidates.filter(
    (c, i) =>
      candidates.findIndex(
        (d) =>
          d.r.fk === c.r.fk &&
          d.r.cardinality === c.r.cardinality &&
          d.r.junction?.toChild === c.r.junction?.toChild,
      ) === i,
  );
  if (hint) candidates = candidates.filter((c) => matchesHint(c.r, hint) || c.rel.name === hint);
  if (candidates.length === 0) throw errors.noRelationship(parent.name, target, parent.schema);
  if (candidates.length > 1) {
    // A direct relationship wins over many-to-many ones through a junction.
    const direct = candidates.filter((c) => !c.r.junction);
    if (direct.length === 1 && !hint) return direct[0];
    throw errors.ambiguousRelationship(
      parent.name,
      target,
      candidates.map((c) => describeRelationship(parent, c.rel, c.r)),
      `Try changing '${target}' to one of the following: ${candidates
        .map((c) => `'${target}!${c.r.junction ? c.r.junction.relation.name : c.r.fk.name}'`)
        .join(", ")}. Find the desired relationship in the 'details' key.`,
    );
  }
  return candidates[0];
}

interface Scope {
  filters: Map<string, Filter[]>;
  logic: Map<string, LogicTree[]>;
  order: Map<string, OrderTerm[]>;
  limits: Map<string, number>;
  offsets: Map<string, number>;
}

function scopeOf(req: ApiRequest, extraFilters: Scoped<Filter>[]): Scope {
  const group = <T>(items: { path: string[]; value: T }[]) => {
    const m = new Map<string, T[]>();
    for (const i of items) m.set(i.path.join("."), [...(m.get(i.path.join(".")) ?? []), i.value]);
    return m;
  };
  return {
    filters: group([...req.filters, ...extraFilters]),
    logic: group(req.logic),
    order: new Map([...group(req.order)].map(([k, v]) => [k, v.flat()])),
    limits: new Map(req.limits.map((l) => [l.path.join("."), l.value])),
    offsets: new Map(req.offsets.map((l) => [l.path.join("."), l.value])),
  };
}

class AliasMaker {
  private n = 0;
  next(): string {
    return `pgrst_${this.n++}`;
  }
}

function checkField(rel: Relation, field: Field): void {
  if (rel.columns.length === 0) return; // columns unknown to the catalog: PostgreSQL decides
  if (!rel.columns.some((c) => c.name === field.name)) {
    throw new RestError(400, "42703", `column ${rel.name}.${field.name} does not exist`);
  }
}

function buildNode(
  cache: SchemaCache,
  relation: Relation,
  select: SelectItem[],
  path: string[],
  scope: Scope,
  aliases: AliasMaker,
): ReadNode {
  const key = path.join(".");
  const node: ReadNode = {
    relation,
    alias: aliases.next(),
    items: [],
    filters: scope.filters.get(key) ?? [],
    logic: scope.logic.get(key) ?? [],
    order: scope.order.get(key) ?? [],
    limit: scope.limits.get(key),
    offset: scope.offsets.get(key),
    children: [],
  };
  for (const item of select) {
    if (item.kind === "star" && relation.columns.length === 0) node.items.push({ kind: "all" });
    else if (item.kind === "star") {
      for (const c of relation.columns)
        node.items.push({ kind: "column", name: c.name, field: { name: c.name, path: [] } });
    } else if (item.kind === "column") {
      if (
        path.length > 0 &&
        item.field.name === "count" &&
        item.field.path.length === 0 &&
        !relation.columns.some((c) => c.name === "count")
      ) {
        node.items.push({ kind: "count", name: item.alias ?? "count" });
        continue;
      }
      checkField(relation, item.field);
      node.items.push({
        kind: "column",
        name: outputName(item.field, item.alias),
        field: item.field,
        cast: item.cast,
      });
    } else {
      const { rel, r } = resolveRelationship(cache, relation, item.relation, item.hint);
      const childPath = [...path, item.alias ?? item.relation];
      const child = buildNode(cache, rel, item.children, childPath, scope, aliases);
      // Filters may address the embed by its name even when it is aliased.
      if (item.alias) {
        const byName = [...path, item.relation].join(".");
        child.filters.push(...(scope.filters.get(byName) ?? []));
        child.logic.push(...(scope.logic.get(byName) ?? []));
        child.order.push(...(scope.order.get(byName) ?? []));
        child.limit ??= scope.limits.get(byName);
        child.offset ??= scope.offsets.get(byName);
      }
      child.join = {
        relationship: r,
        inner: item.inner,
        spread: item.spread,
        name: item.children.length === 0 ? undefined : (item.alias ?? item.relation),
      };
      node.children.push(child);
      node.items.push({ kind: "embed", node: child });
    }
  }
  for (const f of node.filters) checkField(relation, f.field);
  for (const t of node.order) {
    if (!t.relation) checkField(relation, t.field);
    else if (!node.children.some((c) => c.join?.name === t.relation || c.relation.name === t.relation)) {
      throw errors.noRelationship(relation.name, t.relation, relation.schema);
    }
  }
  return node;
}

/** The tree of what is read from `relation`; `extraFilters` are the root filters of an rpc's query string. */
export function planReadNode(
  cache: SchemaCache,
  req: ApiRequest,
  relation: Relation,
  extraFilters: Scoped<Filter>[] = [],
): ReadNode {
  return buildNode(cache, relation, req.select, [], scopeOf(req, extraFilters), new AliasMaker());
}

export function targetRelation(cache: SchemaCache, req: ApiRequest): Relation {
  return relationOf(cache, req.schema, req.target);
}

/** Resolves `/rpc/<fn>` by name and argument names (overloads by argument set). */
export function resolveFunction(cache: SchemaCache, req: ApiRequest, argNames: string[]): RestFunction {
  const candidates = cache.functions.get(qualified(req.schema, req.target)) ?? [];
  const fits = candidates.filter((fn) => {
    if (fn.args.length === 1 && fn.args[0].name === "" && /^jsonb?$/.test(fn.args[0].type)) return true;
    const named = fn.args.map((a) => a.name);
    return (
      argNames.every((n) => named.includes(n)) &&
      fn.args.every((a) => a.hasDefault || argNames.includes(a.name))
    );
  });
  if (fits.length === 0) throw errors.noFunction(req.schema, req.target, argNames);
  if (fits.length > 1) {
    const exact = fits.filter((fn) => fn.args.length === argNames.length);
    if (exact.length === 1) return exact[0];
    throw errors.ambiguousFunction(req.schema, req.target);
  }
  return fits[0];
}

/** GET /rpc/fn?x=1&id=eq.2: parameters named like an argument are arguments, the rest filter the result. */
export function splitRpcQuery(
  req: ApiRequest,
  cache: SchemaCache,
): { args: Map<string, string>; filters: Scoped<Filter>[] } {
  const candidates = cache.functions.get(qualified(req.schema, req.target)) ?? [];
  const argNames = new Set(candidates.flatMap((fn) => fn.args.map((a) => a.name)));
  const args = new Map<string, string>();
  const filters: Scoped<Filter>[] = [];
  for (const [key, value] of req.rpcArgs) {
    if (argNames.has(key)) args.set(key, value);
    else filters.push({ path: [], value: parseFilterValue(parseField(key, "filter"), value, value) });
  }
  return { args, filters };
}

/** The pseudo-relation of a function's result rows, for planning select/filters over it. */
export function resultRelation(cache: SchemaCache, fn: RestFunction): Relation {
  if (fn.returnsRelation) {
    const rel = cache.relations.get(qualified(fn.returnsRelation.schema, fn.returnsRelation.name));
    if (rel) return rel;
  }
  return {
    schema: fn.schema,
    name: fn.name,
    kind: "view",
    columns: [],
    primaryKey: [],
    uniques: [],
    insertable: false,
    updatable: false,
    deletable: false,
    description: null,
  };
}
