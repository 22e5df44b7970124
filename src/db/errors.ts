/**
 * The errors of the db layer that every API answers in its own format: the database out of reach, no
 * connection free, a value PostgreSQL text cannot hold.
 */

/**
 * No connection of the pool came free within its wait (`connectionTimeoutMillis`): every connection is busy.
 * Carries PostgreSQL's SQLSTATE for exhausted resources, so each API answers it as "unavailable", not a 500.
 */
export class PoolTimeout extends Error {
  readonly code = "53300";
  constructor() {
    super("Timed out acquiring a connection from the connection pool: every connection is busy, try again");
  }
}

/** pg-pool's own timeout error (from any caller of `pool.connect()`) as a PoolTimeout; other errors as they are. */
export function asPoolTimeout(e: unknown): unknown {
  return e instanceof Error && /timeout exceeded when trying to connect/.test(e.message)
    ? new PoolTimeout()
    : e;
}

/** A text value holding a NUL byte, which PostgreSQL text cannot hold: its own SQLSTATE and message. */
export class NulInText extends Error {
  readonly code = "22021";
  constructor() {
    super('invalid byte sequence for encoding "UTF8": 0x00');
  }
}

/**
 * Whether an error says the database is out of reach rather than that a statement failed: a network error
 * (ECONNREFUSED, ECONNRESET, ...), a connection-class SQLSTATE (08xxx), a server shutting down or starting
 * (57P01-57P03), or pg's "Connection terminated". Every API answers these 503, never 500.
 */
export function isDatabaseUnreachable(e: unknown): boolean {
  const code = (e as { code?: unknown } | undefined)?.code;
  if (typeof code === "string") {
    if (!/^[0-9A-Z]{5}$/.test(code)) return true;
    if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") return true;
  }
  return e instanceof Error && /^Connection terminated/.test(e.message);
}

/**
 * Whether a statement was refused because the schema changed after the version its scope was planned for
 * (`TransactionScope.schemaVersion`, checked by pipeline.ts's SCHEMA_CHECK): nothing of it ran, and it may be
 * planned again and retried.
 */
export function isSchemaChanged(e: unknown): boolean {
  const { code, message } = (e ?? {}) as { code?: unknown; message?: unknown };
  return code === "22P02" && typeof message === "string" && message.includes('"strata: the schema changed');
}
