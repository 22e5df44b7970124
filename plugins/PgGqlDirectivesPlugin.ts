import type { PgCodec, PgCodecAttribute } from "@dataplan/pg";
import type { PgConstraint, PgNamespace } from "pg-introspection";

/** `@graphql({...})` on a schema comment. */
export interface SchemaDirectives {
  inflect_names?: boolean;
  introspection?: boolean;
}

/** `@graphql({...})` on a table, view, column, enum or function comment. */
export interface EntityDirectives {
  name?: string;
  description?: string;
  totalCount?: { enabled?: boolean };
  aggregate?: { enabled?: boolean };
  max_rows?: number;
  primary_key_columns?: string[];
  foreign_keys?: ViewForeignKey[];
  mappings?: Record<string, string>;
}

/** A view's declared foreign key (`foreign_keys` directive). */
export interface ViewForeignKey {
  local_name?: string;
  local_columns: string[];
  foreign_name?: string;
  foreign_schema: string;
  foreign_table: string;
  foreign_columns: string[];
}

/** `@graphql({...})` on a foreign key constraint. */
export interface RelationDirectives {
  local_name?: string;
  foreign_name?: string;
}

/** What this plugin stores under `extensions.pgGql` of codecs, attributes and relations. */
export interface PgGqlCodecExtension {
  /** Table (or enum) directives. */
  entity: EntityDirectives;
  /** Directives of the schema the table lives in. */
  schema: SchemaDirectives;
  /** The SQL schema and name, as pg_graphql names nodeIds and types. */
  schemaName: string;
  sqlName: string;
}

declare global {
  namespace GraphileBuild {
    interface BuildInput {
      /** Directives of each exposed schema, by schema name. */
      pgGqlSchemas?: Record<string, SchemaDirectives>;
    }
  }
  namespace GraphileConfig {
    interface GatherHelpers {
      pgGql: Record<string, never>;
    }
  }
  namespace DataplanPg {
    interface PgCodecExtensions {
      pgGql?: PgGqlCodecExtension;
    }
    interface PgCodecAttributeExtensions {
      pgGql?: EntityDirectives;
    }
    interface PgCodecRelationExtensions {
      pgGql?: RelationDirectives;
    }
    interface PgResourceExtensions {
      /** Function resources only: the function's directives, its schema's, and its SQL names. */
      pgGql?: PgGqlCodecExtension;
    }
  }
}

const DIRECTIVE = /@graphql\((.+)\)/s;

/** pg_graphql's directive syntax: the JSON inside `@graphql(...)` anywhere in a comment; invalid JSON is ignored. */
export function parseDirectives<T>(comment: string | undefined | null): Partial<T> {
  const match = comment ? DIRECTIVE.exec(comment) : null;
  if (!match) return {};
  try {
    const parsed: unknown = JSON.parse(match[1]);
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as T) : {};
  } catch {
    return {};
  }
}

/** How serde (pg_graphql's deserializer) names a JSON value it did not expect. */
function serdeDescription(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "sequence";
  if (typeof value === "string") return `string ${JSON.stringify(value)}`;
  if (typeof value === "boolean") return `boolean \`${value}\``;
  if (typeof value === "number") {
    return Number.isInteger(value) ? `integer \`${value}\`` : `floating point \`${value}\``;
  }
  return "map";
}

function expectStrings(value: unknown): string | undefined {
  if (!Array.isArray(value)) return `invalid type: ${serdeDescription(value)}, expected a sequence`;
  const bad = value.find((v) => typeof v !== "string");
  return bad === undefined ? undefined : `invalid type: ${serdeDescription(bad)}, expected a string`;
}

function expectString(value: unknown): string | undefined {
  return typeof value === "string"
    ? undefined
    : `invalid type: ${serdeDescription(value)}, expected a string`;
}

/**
 * The first shape error of the `primary_key_columns` and `foreign_keys` directives, in serde's words;
 * pg_graphql refuses to load a schema with one ("Error while loading schema, check comment directives").
 */
export function entityDirectiveError(directives: Partial<EntityDirectives>): string | undefined {
  const { primary_key_columns: primaryKey, foreign_keys: foreignKeys } = directives as Record<
    string,
    unknown
  >;
  if (primaryKey !== undefined) {
    const error = expectStrings(primaryKey);
    if (error) return error;
  }
  if (foreignKeys === undefined) return undefined;
  if (!Array.isArray(foreignKeys))
    return `invalid type: ${serdeDescription(foreignKeys)}, expected a sequence`;
  for (const fk of foreignKeys as unknown[]) {
    if (!fk || typeof fk !== "object" || Array.isArray(fk)) {
      return `invalid type: ${serdeDescription(fk)}, expected struct ForeignKeyDirective`;
    }
    const record = fk as Record<string, unknown>;
    for (const field of ["local_columns", "foreign_schema", "foreign_table", "foreign_columns"]) {
      if (!(field in record)) return `missing field \`${field}\``;
    }
    const error =
      expectStrings(record.local_columns) ??
      expectString(record.foreign_schema) ??
      expectString(record.foreign_table) ??
      expectStrings(record.foreign_columns) ??
      (record.local_name === undefined ? undefined : expectString(record.local_name)) ??
      (record.foreign_name === undefined ? undefined : expectString(record.foreign_name));
    if (error) return error;
  }
  return undefined;
}

export function schemaDirectives(namespace: PgNamespace | undefined): SchemaDirectives {
  return parseDirectives<SchemaDirectives>(namespace?.getDescription());
}

/** The directives this plugin attached to a codec (tables, views, enums); empty for other codecs. */
export function codecDirectives(codec: PgCodec): PgGqlCodecExtension | undefined {
  return codec.extensions?.pgGql;
}

/** The directives of a function resource (`name`, `description`); undefined for other resources. */
export function functionDirectives(resource: {
  extensions?: DataplanPg.PgResourceExtensions;
}): PgGqlCodecExtension | undefined {
  return resource.extensions?.pgGql;
}

export function attributeDirectives(attribute: PgCodecAttribute): EntityDirectives {
  return attribute.extensions?.pgGql ?? {};
}

export function relationDirectives(relation: {
  extensions?: DataplanPg.PgCodecRelationExtensions;
}): RelationDirectives {
  return relation.extensions?.pgGql ?? {};
}

function constraintDirectives(constraint: PgConstraint): RelationDirectives {
  return parseDirectives<RelationDirectives>(constraint.getDescription());
}

/**
 * Reads pg_graphql's comment directives once, in the gather phase, and stores them as data
 * (`extensions.pgGql`) on codecs, attributes and relations. Descriptions come only from the
 * `description` directive: pg_graphql never publishes raw comments.
 */
export const PgGqlDirectivesPlugin: GraphileConfig.Plugin = {
  name: "PgGqlDirectivesPlugin",
  description: "Parses pg_graphql @graphql({...}) comment directives into extensions.pgGql",
  version: "0.1.0",
  after: [
    "PgCodecsPlugin",
    "PgTablesPlugin",
    "PgRelationsPlugin",
    "PgEnumTablesPlugin",
    "PgProceduresPlugin",
  ],
  gather: {
    namespace: "pgGql",
    initialState: () => ({ schemas: {} as Record<string, SchemaDirectives> }),
    helpers: {},
    async main(output, info) {
      output.pgGqlSchemas = (info.state as { schemas: Record<string, SchemaDirectives> }).schemas;
    },
    hooks: {
      pgIntrospection_namespace(info, { entity, serviceName }) {
        const service = info.resolvedPreset.pgServices?.find((s) => s.name === serviceName);
        if (!service?.schemas?.includes(entity.nspname)) return;
        (info.state as { schemas: Record<string, SchemaDirectives> }).schemas[entity.nspname] =
          schemaDirectives(entity);
      },
      pgCodecs_PgCodec(_info, { pgCodec, pgType, pgClass }) {
        const comment = pgClass ? pgClass.getDescription() : pgType.getDescription();
        const entity = parseDirectives<EntityDirectives>(comment);
        const namespace = pgClass ? pgClass.getNamespace() : pgType.getNamespace();
        const pgGql: PgGqlCodecExtension = {
          entity,
          schema: schemaDirectives(namespace),
          schemaName: namespace?.nspname ?? "",
          sqlName: pgClass ? pgClass.relname : pgType.typname,
        };
        pgCodec.extensions = { ...pgCodec.extensions, pgGql };
        pgCodec.description = entity.description;
      },
      pgCodecs_attribute(_info, { pgAttribute, attribute }) {
        const directives = parseDirectives<EntityDirectives>(pgAttribute.getDescription());
        attribute.extensions = { ...attribute.extensions, pgGql: directives };
        attribute.description = directives.description;
      },
      pgTables_PgResourceOptions(_info, { resourceOptions, pgClass }) {
        resourceOptions.description = parseDirectives<EntityDirectives>(pgClass.getDescription()).description;
      },
      pgProcedures_PgResourceOptions(_info, { pgProc, resourceOptions }) {
        const entity = parseDirectives<EntityDirectives>(pgProc.getDescription());
        const namespace = pgProc.getNamespace();
        const pgGql: PgGqlCodecExtension = {
          entity,
          schema: schemaDirectives(namespace),
          schemaName: namespace?.nspname ?? "",
          sqlName: pgProc.proname,
        };
        resourceOptions.extensions = { ...resourceOptions.extensions, pgGql };
        resourceOptions.description = entity.description;
      },
      pgRelations_relation(_info, { relation, pgConstraint }) {
        relation.extensions = { ...relation.extensions, pgGql: constraintDirectives(pgConstraint) };
        relation.description = undefined;
      },
    },
  },
};
