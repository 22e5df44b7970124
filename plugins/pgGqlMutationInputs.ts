import type { PgCodecAttribute, PgCodecWithAttributes } from "@dataplan/pg";
import type { PgAttribute, PgClass } from "pg-introspection";
import { PgGqlError } from "./pgGqlErrors";
import { assertMaxLength, columnInputInfo, type ColumnInputInfo } from "./pgGqlTypes";

/**
 * The inputs of pg_graphql's mutations: which columns a table's inputs offer (learnt in the gather phase) and
 * the request's values as the texts its statement binds, checked as pg_graphql checks them.
 */

const PG_CLASS_OID = "1259";
const CHARACTER_TYPES = new Set(["varchar", "bpchar", "_varchar", "_bpchar"]);

/** What this module reads of a database's introspection. */
interface Introspection {
  depends: {
    classid: string;
    objid: string;
    refobjid: string;
    refobjsubid: number | null;
    deptype: string;
  }[];
  classes: PgClass[];
}

/** Columns owning a sequence (`serial`), per introspection: pg_depend rows of kind 'a' from a sequence. */
const serialColumnsCache = new WeakMap<object, Set<string>>();
function serialColumns(introspection: Introspection): Set<string> {
  let cached = serialColumnsCache.get(introspection);
  if (!cached) {
    const sequences = new Set(introspection.classes.filter((c) => c.relkind === "S").map((c) => c._id));
    cached = new Set(
      introspection.depends
        .filter(
          (d) =>
            d.deptype === "a" &&
            String(d.classid) === PG_CLASS_OID &&
            sequences.has(d.objid) &&
            d.refobjsubid != null &&
            d.refobjsubid > 0,
        )
        .map((d) => `${d.refobjid}:${d.refobjsubid}`),
    );
    serialColumnsCache.set(introspection, cached);
  }
  return cached;
}

/** What the gather phase learns of a column for inputs (kept as `attribute.extensions.pgGqlColumn`). */
export function gatheredColumnInputInfo(attr: PgAttribute, introspection: Introspection): ColumnInputInfo {
  const info: ColumnInputInfo = {};
  if (attr.attidentity || serialColumns(introspection).has(`${attr.attrelid}:${attr.attnum}`)) {
    info.serial = true;
  }
  if (attr.attgenerated) info.generated = true;
  const typname = attr.getType()?.typname;
  if (typname && CHARACTER_TYPES.has(typname) && attr.atttypmod != null && attr.atttypmod > 4) {
    info.maxLength = attr.atttypmod - 4;
  }
  return info;
}

/** The mutable columns of a table for one kind of write, by GraphQL field name. */
export function writableColumns(
  build: GraphileBuild.Build,
  codec: PgCodecWithAttributes,
  kind: "insert" | "update",
): Map<string, string> {
  const columns = new Map<string, string>();
  for (const attributeName of Object.keys(codec.attributes)) {
    if (!build.behavior.pgCodecAttributeMatches([codec, attributeName], `attribute:${kind}`)) continue;
    if (!build.getGraphQLTypeByPgCodec(codec.attributes[attributeName].codec, "input")) continue;
    columns.set(build.inflection.attribute({ codec, attributeName }), attributeName);
  }
  return columns;
}

/** pg_graphql passes every input value as text (or text[] for arrays) cast to the column type. */
function textOf(value: unknown, nested = false): unknown {
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) {
    if (nested) throw new PgGqlError("Unexpected array in input value array");
    return value.map((v) => textOf(v, true));
  }
  if (typeof value === "object") {
    throw new PgGqlError(
      nested ? "Unexpected object in input value array" : "Unexpected object in input value",
    );
  }
  return String(value);
}

/** A column's input value as the text bound for it (after pg_graphql's length check). */
function valueText(attribute: PgCodecAttribute, value: unknown): unknown {
  assertMaxLength(value, columnInputInfo(attribute).maxLength);
  return textOf(value);
}

/** The columns a write sets: their GraphQL fields and, in the same order, their names. */
export interface SetColumns {
  fields: string[];
  columns: string[];
}

function setColumns(used: readonly (readonly [field: string, column: string])[]): SetColumns {
  return { fields: used.map(([field]) => field), columns: used.map(([, column]) => column) };
}

/** An insert's `objects`: per row, the text of each column any row gives, or undefined where it takes its default. */
export interface InsertRows extends SetColumns {
  rows: unknown[][];
}

export function insertRows(
  writable: ReadonlyMap<string, string>,
  codec: PgCodecWithAttributes,
  objects: unknown,
): InsertRows {
  const list = ((Array.isArray(objects) ? objects : [objects]) as Record<string, unknown>[]).filter(
    (o) => o != null,
  );
  if (list.length === 0) throw new PgGqlError("At least one record must be provided to objects");
  const used = [...writable].filter(([field]) => list.some((o) => o[field] !== undefined));
  const rows = list.map((o) =>
    used.map(([field, column]) =>
      o[field] === undefined ? undefined : valueText(codec.attributes[column], o[field]),
    ),
  );
  return { ...setColumns(used), rows };
}

/** An update's `set`: the texts of the columns it gives. */
export interface UpdateValues extends SetColumns {
  texts: unknown[];
}

export function updateValues(
  writable: ReadonlyMap<string, string>,
  codec: PgCodecWithAttributes,
  set: unknown,
): UpdateValues {
  const values = (set ?? {}) as Record<string, unknown>;
  const used = [...writable].filter(([field]) => values[field] !== undefined);
  if (used.length === 0) throw new PgGqlError("At least one mapping must be provided to set argument");
  const texts = used.map(([field, column]) => valueText(codec.attributes[column], values[field]));
  return { ...setColumns(used), texts };
}
