import type { ProjectRuntime } from "../../projects/runtime";
import {
  loadSchemaCache,
  type Column,
  type Relation,
  type RestFunction,
  type SchemaCache,
} from "../../catalog/schemaCache";

/**
 * A TypeScript `Database` type in the format of the platform CLI's `gen types typescript`, for the
 * platform's JavaScript client: tables (Row/Insert/Update/Relationships), views, functions, enums and
 * composite types, plus the CLI's helper types (Tables, TablesInsert, TablesUpdate, Enums, Constants).
 */

interface EnumType {
  schema: string;
  name: string;
  values: string[];
}

interface CompositeType {
  schema: string;
  name: string;
  attributes: { name: string; typname: string; type: string }[];
}

const NUMBER = new Set(["int2", "int4", "int8", "float4", "float8", "numeric", "oid", "money"]);
const FORMAT_NAMES: Record<string, string> = {
  integer: "int4",
  smallint: "int2",
  bigint: "int8",
  real: "float4",
  "double precision": "float8",
  boolean: "bool",
  "character varying": "varchar",
  "timestamp with time zone": "timestamptz",
  "timestamp without time zone": "timestamp",
};

class TypeNames {
  constructor(
    private readonly enums: EnumType[],
    private readonly composites: CompositeType[],
  ) {}

  /** The TypeScript type of a PostgreSQL type given by pg_type name (`_int4`) or format_type (`integer[]`). */
  of(name: string): string {
    if (name.startsWith("_")) return `${this.of(name.slice(1))}[]`;
    if (name.endsWith("[]")) return `${this.of(name.slice(0, -2))}[]`;
    const bare = name.replace(/^"?([^".]+)"?\."?([^"]+)"?$/, "$2").replace(/\(.*\)$/, "");
    const t = FORMAT_NAMES[bare] ?? bare;
    if (t === "bool") return "boolean";
    if (NUMBER.has(t)) return "number";
    if (t === "json" || t === "jsonb") return "Json";
    if (t === "void") return "undefined";
    if (t === "record") return "Record<string, unknown>";
    const e = this.enums.find((x) => x.name === t);
    if (e) return `Database[${JSON.stringify(e.schema)}]["Enums"][${JSON.stringify(e.name)}]`;
    const c = this.composites.find((x) => x.name === t);
    if (c) return `Database[${JSON.stringify(c.schema)}]["CompositeTypes"][${JSON.stringify(c.name)}]`;
    return "string";
  }
}

const key = (name: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name));
const indent = (text: string, n: number) =>
  text
    .split("\n")
    .map((l) => (l ? " ".repeat(n) + l : l))
    .join("\n");

function objectType(fields: string[]): string {
  return fields.length ? `{\n${indent(fields.join("\n"), 2)}\n}` : "{\n  [_ in never]: never\n}";
}

function columnType(types: TypeNames, c: Column): string {
  return types.of(c.typname) + (c.nullable ? " | null" : "");
}

function relationships(cache: SchemaCache, rel: Relation): string {
  const fks = cache.foreignKeys.filter((fk) => fk.schema === rel.schema && fk.table === rel.name);
  if (!fks.length) return "[]";
  const items = fks.map((fk) => {
    const oneToOne = rel.uniques.some(
      (u) => u.length === fk.columns.length && u.every((c) => fk.columns.includes(c)),
    );
    return `{\n  foreignKeyName: ${JSON.stringify(fk.name)}\n  columns: ${JSON.stringify(fk.columns)}\n  isOneToOne: ${oneToOne}\n  referencedRelation: ${JSON.stringify(fk.refTable)}\n  referencedColumns: ${JSON.stringify(fk.refColumns)}\n},`;
  });
  return `[\n${indent(items.join("\n"), 2)}\n]`;
}

/**
 * Columns a client never writes, as postgres-meta types them (`?: never` in Insert and Update): generated
 * columns and `generated always as identity` ones, keyed `schema.table.column`.
 */
type Unwritable = Set<string>;

function tableType(
  cache: SchemaCache,
  types: TypeNames,
  rel: Relation,
  isView: boolean,
  unwritable: Unwritable,
): string {
  const row = rel.columns.map(
    (c) => `${key(c.name)}: ${columnType(types, isView ? { ...c, nullable: true } : c)}`,
  );
  const neverWritten = (c: Relation["columns"][number]) =>
    c.generated || unwritable.has(`${rel.schema}.${rel.name}.${c.name}`);
  const insert = rel.columns.map((c) =>
    neverWritten(c)
      ? `${key(c.name)}?: never`
      : `${key(c.name)}${c.nullable || c.hasDefault || isView ? "?" : ""}: ${columnType(types, isView ? { ...c, nullable: true } : c)}`,
  );
  const update = rel.columns.map((c) =>
    neverWritten(c)
      ? `${key(c.name)}?: never`
      : `${key(c.name)}?: ${columnType(types, isView ? { ...c, nullable: true } : c)}`,
  );
  const parts = [`Row: ${objectType(row)}`];
  if (!isView || rel.insertable) parts.push(`Insert: ${objectType(insert)}`);
  if (!isView || rel.updatable) parts.push(`Update: ${objectType(update)}`);
  parts.push(`Relationships: ${relationships(cache, rel)}`);
  return `{\n${indent(parts.join("\n"), 2)}\n}`;
}

function functionReturn(cache: SchemaCache, types: TypeNames, fn: RestFunction): string {
  let base: string;
  if (fn.returnsRelation) {
    const rel = cache.relations.get(`${fn.returnsRelation.schema}.${fn.returnsRelation.name}`);
    base = rel
      ? objectType(rel.columns.map((c) => `${key(c.name)}: ${columnType(types, c)}`))
      : "Record<string, unknown>";
  } else {
    base = types.of(fn.returnType);
  }
  return fn.returnsSet ? (base.includes("\n") || base.includes(" ") ? `(${base})[]` : `${base}[]`) : base;
}

function functionType(cache: SchemaCache, types: TypeNames, fns: RestFunction[]): string {
  const one = (fn: RestFunction) => {
    const named = fn.args.filter((a) => a.name);
    const args =
      named.length === 0
        ? "never"
        : objectType(named.map((a) => `${key(a.name)}${a.hasDefault ? "?" : ""}: ${types.of(a.typeName)}`));
    return `{\n  Args: ${indent(args, 2).trimStart()}\n  Returns: ${indent(functionReturn(cache, types, fn), 2).trimStart()}\n}`;
  };
  return fns.length === 1 ? one(fns[0]) : fns.map(one).join(" | ");
}

function schemaType(
  cache: SchemaCache,
  types: TypeNames,
  schema: string,
  enums: EnumType[],
  composites: CompositeType[],
  unwritable: Unwritable,
): string {
  const rels = [...cache.relations.values()]
    .filter((r) => r.schema === schema)
    .sort((a, b) => a.name.localeCompare(b.name));
  const tables = rels.filter(
    (r) => r.kind === "table" || r.kind === "partitioned_table" || r.kind === "foreign_table",
  );
  const views = rels.filter((r) => r.kind === "view" || r.kind === "materialized_view");
  const fnGroups = [...cache.functions.entries()]
    .filter(([, fns]) => fns[0].schema === schema)
    .sort(([a], [b]) => a.localeCompare(b))
    // functions over trigger/event-trigger types are not callable from the client
    .filter(([, fns]) => !["trigger", "event_trigger"].includes(fns[0].returnType));
  const section = (entries: string[]) => objectType(entries);
  return [
    `Tables: ${section(tables.map((t) => `${key(t.name)}: ${tableType(cache, types, t, false, unwritable)}`))}`,
    `Views: ${section(views.map((v) => `${key(v.name)}: ${tableType(cache, types, v, true, unwritable)}`))}`,
    `Functions: ${section(fnGroups.map(([, fns]) => `${key(fns[0].name)}: ${functionType(cache, types, fns)}`))}`,
    `Enums: ${section(enums.filter((e) => e.schema === schema).map((e) => `${key(e.name)}: ${e.values.map((v) => JSON.stringify(v)).join(" | ") || "never"}`))}`,
    `CompositeTypes: ${section(
      composites
        .filter((c) => c.schema === schema)
        .map(
          (c) =>
            `${key(c.name)}: ${objectType(c.attributes.map((a) => `${key(a.name)}: ${types.of(a.typname)} | null`))}`,
        ),
    )}`,
  ].join("\n");
}

/** `TablesInsert` and `TablesUpdate`: a table's `Insert` or `Update` shape, by name or by schema and name. */
const tableShapeHelper = (name: string, shape: "Insert" | "Update", inferred: string) => `export type ${name}<
  DefaultSchemaTableNameOrOptions extends
    | keyof DefaultSchema["Tables"]
    | { schema: keyof DatabaseWithoutInternals },
  TableName extends DefaultSchemaTableNameOrOptions extends {
    schema: keyof DatabaseWithoutInternals
  }
    ? keyof DatabaseWithoutInternals[DefaultSchemaTableNameOrOptions["schema"]]["Tables"]
    : never = never,
> = DefaultSchemaTableNameOrOptions extends {
  schema: keyof DatabaseWithoutInternals
}
  ? DatabaseWithoutInternals[DefaultSchemaTableNameOrOptions["schema"]]["Tables"][TableName] extends {
      ${shape}: infer ${inferred}
    }
    ? ${inferred}
    : never
  : DefaultSchemaTableNameOrOptions extends keyof DefaultSchema["Tables"]
    ? DefaultSchema["Tables"][DefaultSchemaTableNameOrOptions] extends {
        ${shape}: infer ${inferred}
      }
      ? ${inferred}
      : never
    : never
`;

/** `Enums` and `CompositeTypes`: a member of the section, by name or by schema and name. */
const sectionHelper = (
  section: "Enums" | "CompositeTypes",
  options: string,
  member: string,
) => `export type ${section}<
  ${options} extends
    | keyof DefaultSchema["${section}"]
    | { schema: keyof DatabaseWithoutInternals },
  ${member} extends ${options} extends {
    schema: keyof DatabaseWithoutInternals
  }
    ? keyof DatabaseWithoutInternals[${options}["schema"]]["${section}"]
    : never = never,
> = ${options} extends {
  schema: keyof DatabaseWithoutInternals
}
  ? DatabaseWithoutInternals[${options}["schema"]]["${section}"][${member}]
  : ${options} extends keyof DefaultSchema["${section}"]
    ? DefaultSchema["${section}"][${options}]
    : never
`;

const HELPERS = `type DatabaseWithoutInternals = Omit<Database, "__InternalSupabase">

type DefaultSchema = DatabaseWithoutInternals[Extract<keyof Database, "public">]

export type Tables<
  DefaultSchemaTableNameOrOptions extends
    | keyof (DefaultSchema["Tables"] & DefaultSchema["Views"])
    | { schema: keyof DatabaseWithoutInternals },
  TableName extends DefaultSchemaTableNameOrOptions extends {
    schema: keyof DatabaseWithoutInternals
  }
    ? keyof (DatabaseWithoutInternals[DefaultSchemaTableNameOrOptions["schema"]]["Tables"] &
        DatabaseWithoutInternals[DefaultSchemaTableNameOrOptions["schema"]]["Views"])
    : never = never,
> = DefaultSchemaTableNameOrOptions extends {
  schema: keyof DatabaseWithoutInternals
}
  ? (DatabaseWithoutInternals[DefaultSchemaTableNameOrOptions["schema"]]["Tables"] &
      DatabaseWithoutInternals[DefaultSchemaTableNameOrOptions["schema"]]["Views"])[TableName] extends {
      Row: infer R
    }
    ? R
    : never
  : DefaultSchemaTableNameOrOptions extends keyof (DefaultSchema["Tables"] &
        DefaultSchema["Views"])
    ? (DefaultSchema["Tables"] &
        DefaultSchema["Views"])[DefaultSchemaTableNameOrOptions] extends {
        Row: infer R
      }
      ? R
      : never
    : never

${tableShapeHelper("TablesInsert", "Insert", "I")}
${tableShapeHelper("TablesUpdate", "Update", "U")}
${sectionHelper("Enums", "DefaultSchemaEnumNameOrOptions", "EnumName")}
${sectionHelper("CompositeTypes", "PublicCompositeTypeNameOrOptions", "CompositeTypeName")}`;

const TYPES_QUERY = `
select json_build_object(
  'enums', coalesce((select json_agg(json_build_object('schema', n.nspname, 'name', t.typname,
      'values', (select coalesce(json_agg(e.enumlabel order by e.enumsortorder), '[]') from pg_enum e where e.enumtypid = t.oid))
      order by n.nspname, t.typname)
    from pg_type t join pg_namespace n on n.oid = t.typnamespace where t.typtype = 'e' and n.nspname = any($1)), '[]'),
  'composites', coalesce((select json_agg(json_build_object('schema', n.nspname, 'name', t.typname,
      'attributes', (select coalesce(json_agg(json_build_object('name', a.attname, 'typname', at.typname, 'type', format_type(a.atttypid, a.atttypmod)) order by a.attnum), '[]')
                       from pg_attribute a join pg_type at on at.oid = a.atttypid
                      where a.attrelid = t.typrelid and a.attnum > 0 and not a.attisdropped))
      order by n.nspname, t.typname)
    from pg_type t join pg_namespace n on n.oid = t.typnamespace join pg_class c on c.oid = t.typrelid
   where t.typtype = 'c' and c.relkind = 'c' and n.nspname = any($1)), '[]'),
  'always_identity', coalesce((select json_agg(pg_catalog.concat_ws('.', n.nspname, c.relname, a.attname))
    from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
   where a.attidentity = 'a' and not a.attisdropped and n.nspname = any($1)), '[]')
) as types`;

export async function generateTypescript(project: ProjectRuntime, schemas: string[]): Promise<string> {
  const cache = await loadSchemaCache(project, schemas);
  const { rows } = await project.adminPool.query(TYPES_QUERY, [schemas]);
  const { enums, composites, always_identity } = rows[0].types as {
    enums: EnumType[];
    composites: CompositeType[];
    always_identity: string[];
  };
  const unwritable: Unwritable = new Set(always_identity);
  const types = new TypeNames(enums, composites);
  const database = schemas
    .map((s) => `${key(s)}: {\n${indent(schemaType(cache, types, s, enums, composites, unwritable), 2)}\n}`)
    .join("\n");
  const constants = schemas
    .map((s) => {
      const es = enums
        .filter((e) => e.schema === s)
        .map((e) => `${key(e.name)}: ${JSON.stringify(e.values)},`);
      return `${key(s)}: {\n  Enums: {${es.length ? `\n${indent(es.join("\n"), 4)}\n  ` : ""}},\n},`;
    })
    .join("\n");
  const hasPublic = schemas.includes("public");
  return [
    `export type Json =\n  | string\n  | number\n  | boolean\n  | null\n  | { [key: string]: Json | undefined }\n  | Json[]\n`,
    `export type Database = {\n${indent(database, 2)}\n}\n`,
    hasPublic
      ? HELPERS
      : HELPERS.replace(
          'Extract<keyof Database, "public">',
          `Extract<keyof Database, ${JSON.stringify(schemas[0])}>`,
        ),
    `export const Constants = {\n${indent(constants, 2)}\n} as const\n`,
  ].join("\n");
}
