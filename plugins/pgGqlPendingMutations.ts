import type { PgClient, PgClientQuery, WithPgClient } from "@dataplan/pg";
import { randomBytes } from "node:crypto";
import { Kind, type DocumentNode } from "grafast/graphql";
import { PgGqlError } from "./pgGqlErrors";
import { joinedText, type MutationStatement } from "./pgGqlKeptStatements";

/**
 * How a mutation's statement runs. One answered from its returned rows runs at once (`runReturning`). One that
 * answers the records select waits, under a token, in the request's own registry until that select runs: the
 * DML becomes its leading CTE, so one statement writes, checks `atMost` and returns the records, whose relations
 * read the snapshot from before the write, as in pg_graphql.
 */

/** The mutations of one request that wait for their records statement, by token. */
type PendingMutations = Map<string, MutationStatement>;

/** SQLSTATE of `_strata_graphql.at_most` (bootstrap SQL) when a mutation affects more rows than `atMost`. */
const AT_MOST_SQLSTATE = "SGQ01";

/** `atMost` refused the mutation: pg_graphql's message, as a GraphQL error. */
function tooManyError(error: unknown): unknown {
  const e = error as { code?: string; message?: string } | undefined;
  return e?.code === AT_MOST_SQLSTATE ? new PgGqlError(e.message ?? "") : error;
}

/** A mutation answered from its returned rows: runs now; its rows are the answered columns' texts. */
export async function runReturning(
  client: PgClient,
  mutation: MutationStatement,
): Promise<readonly unknown[][]> {
  const query = { text: mutation.text, values: mutation.values as unknown[], arrayMode: true };
  const { rows } = await client.query<unknown[]>(query).catch((e: unknown) => {
    throw tooManyError(e);
  });
  return rows;
}

/** The records statement of a pending mutation, with the mutation prepended; undefined for any other query. */
function withPendingMutation(
  query: PgClientQuery,
  pendingMutations: PendingMutations,
): PgClientQuery | undefined {
  const values = query.values ?? [];
  const token = values.find((v): v is string => typeof v === "string" && pendingMutations.has(v));
  if (token === undefined) return undefined;
  const pending = pendingMutations.get(token)!;
  pendingMutations.delete(token);
  const tokenAt = new Set<number>();
  const kept: unknown[] = [];
  values.forEach((value, index) => (value === token ? tokenAt.add(index) : kept.push(value)));
  const text = joinedText(pending, query.text, values.length, tokenAt);
  return { text, values: [...pending.values, ...kept], arrayMode: query.arrayMode };
}

/**
 * A pending mutation's token: a secret of the process and a counter, so no value a client sends can be taken
 * for one (a token stands among the records select's bound values), without a random UUID per mutation.
 */
const TOKEN_PREFIX = `pgGqlMutation:${randomBytes(16).toString("hex")}:`;
let tokenCount = 0;

/** A client of one request that holds its pending mutations and runs each with its records statement. */
export interface MutationAwareClient extends PgClient {
  pendMutation(mutation: MutationStatement): string;
}

/**
 * A plain object delegating to the client: one made with the client as its prototype would turn the client
 * into a prototype object, which V8 reshapes at a cost on every request.
 */
function mutationAwareClient<TClient extends PgClient>(client: TClient, pending: PendingMutations): TClient {
  const aware = {
    pendMutation(mutation: MutationStatement): string {
      const token = `${TOKEN_PREFIX}${++tokenCount}`;
      pending.set(token, mutation);
      return token;
    },
    query(query: PgClientQuery) {
      const rewritten = withPendingMutation(query, pending);
      if (!rewritten) return client.query(query);
      return client.query(rewritten).catch((e: unknown) => {
        throw tooManyError(e);
      });
    },
    withTransaction<T>(callback: (client: TClient) => Promise<T>) {
      return client.withTransaction((tx) => callback(mutationAwareClient(tx, pending)));
    },
  };
  return aware as unknown as TClient;
}

/** Whether the operation a request runs is a mutation (the one operation, or the one named). */
export function isMutationOperation(
  document: DocumentNode,
  operationName: string | null | undefined,
): boolean {
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    if (operationName && definition.name?.value !== operationName) continue;
    return definition.operation === "mutation";
  }
  return false;
}

/** Makes a mutation request's grafast context hand out clients that hold the request's pending mutations. */
export function withMutationAwareClients(
  context: Record<string, unknown>,
  pgServices: readonly { withPgClientKey: string }[],
): void {
  const pending: PendingMutations = new Map();
  for (const { withPgClientKey } of pgServices) {
    const withPgClient = context[withPgClientKey] as WithPgClient | undefined;
    if (!withPgClient) continue;
    const aware: WithPgClient = (pgSettings, callback) =>
      withPgClient(pgSettings, (client) => callback(mutationAwareClient(client, pending)));
    context[withPgClientKey] = aware;
  }
}
