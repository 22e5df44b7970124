import {
  PgDeleteSingleStep,
  PgInsertSingleStep,
  PgSelectStep,
  PgUnionAllStep,
  PgUpdateSingleStep,
  SideEffectWithPgClientStep,
  type PgClient,
  type WithPgClient,
} from "@dataplan/pg";
import type { OperationPlan, Step } from "grafast";
import { GraphQLError, type ExecutionResult } from "grafast/graphql";

/**
 * One transaction decision per request, as pg_graphql's requests have (each is one SQL statement): a query
 * whose plan sends at most one statement runs it as the adaptor runs a statement; a query that sends more runs
 * them in one read-only transaction on one snapshot (repeatable read); a mutation runs in one transaction that
 * commits only once its answer is built, and rolls back when the answer has errors (nothing is written and
 * answered as failed). The decision is made from grafast's operation plan (its public `getStepsByStepClass`)
 * and carried out through the context's `withPgClient`.
 */

/** The request's transaction when it has one of its own. */
export interface PgGqlTransactionOptions {
  readOnly: boolean;
  /** Every statement reads the transaction's first snapshot (repeatable read). */
  snapshot: boolean;
}

/**
 * What an adaptor's `withPgClient` may offer: opening the request's transaction itself (Strata's sends BEGIN with
 * the first statement). Without it, the plugin opens one with `withTransaction` and sets its options and the
 * pgSettings with statements of its own.
 */
export interface WithPgTransaction {
  withPgTransaction?<T>(
    pgSettings: Record<string, string | undefined> | null,
    options: PgGqlTransactionOptions,
    callback: (client: PgClient) => Promise<T>,
  ): Promise<T>;
}

type Decision = "statement" | "snapshot" | "write";

/** The steps of @dataplan/pg that send statements. */
const STATEMENT_STEPS: (new (...args: any[]) => Step)[] = [
  PgSelectStep,
  PgUnionAllStep,
  SideEffectWithPgClientStep,
  PgInsertSingleStep,
  PgUpdateSingleStep,
  PgDeleteSingleStep,
];

const decisions = new WeakMap<OperationPlan, Decision>();

/** A plan's decision, made once per plan (grafast keeps plans per operation). */
function decisionOf(plan: OperationPlan): Decision {
  let decision = decisions.get(plan);
  if (decision === undefined) {
    if (plan.operation.operation === "mutation") decision = "write";
    else {
      let statements = 0;
      for (const klass of STATEMENT_STEPS) statements += plan.getStepsByStepClass(klass).length;
      decision = statements > 1 ? "snapshot" : "statement";
    }
    decisions.set(plan, decision);
  }
  return decision;
}

/** How the node-postgres adaptor applies pgSettings in its transactions. */
const SET_SETTINGS = "select set_config(el->>0, el->>1, true) from json_array_elements($1::json) el";

/** Runs `callback` in a transaction with these options, the adaptor's own when it offers one. */
function inTransaction<T>(
  withPgClient: WithPgClient & WithPgTransaction,
  pgSettings: Record<string, string | undefined> | null,
  options: PgGqlTransactionOptions,
  callback: (client: PgClient) => Promise<T>,
): Promise<T> {
  if (withPgClient.withPgTransaction) return withPgClient.withPgTransaction(pgSettings, options, callback);
  // The options must come first in the transaction, before the settings' statement takes a snapshot.
  return withPgClient(null, (client) =>
    client.withTransaction(async (tx) => {
      if (options.readOnly) {
        const level = options.snapshot ? "isolation level repeatable read, read only" : "read only";
        await tx.query({ text: `set transaction ${level}` });
      }
      const settings = Object.entries(pgSettings ?? {}).filter(([, value]) => value != null);
      if (settings.length) await tx.query({ text: SET_SETTINGS, values: [JSON.stringify(settings)] });
      return callback(tx);
    }),
  );
}

/** Thrown into a held transaction to roll it back. */
class RollBack extends Error {}

/** A transaction held open for the rest of the request: its client, and its end. */
interface Held {
  client: Promise<PgClient>;
  /** Commits (true) or rolls back; settles when the transaction has ended. */
  end(commit: boolean): Promise<void>;
}

function hold(
  withPgClient: WithPgClient & WithPgTransaction,
  pgSettings: Record<string, string | undefined> | null,
  options: PgGqlTransactionOptions,
): Held {
  let decide!: (commit: boolean) => void;
  const decided = new Promise<boolean>((resolve) => (decide = resolve));
  let ready!: (client: PgClient) => void;
  let failed!: (error: unknown) => void;
  const client = new Promise<PgClient>((resolve, reject) => {
    ready = resolve;
    failed = reject;
  });
  const ended = inTransaction(withPgClient, pgSettings, options, async (tx) => {
    ready(tx);
    if (!(await decided)) throw new RollBack();
  });
  // A transaction that could not be opened fails the statements waiting for it.
  ended.catch(failed);
  return {
    client,
    async end(commit) {
      decide(commit);
      await ended.catch((e: unknown) => {
        if (!(e instanceof RollBack) && commit) throw e;
      });
    },
  };
}

/** One request's transactions (one per database service it uses) and the decision they follow. */
class RequestTransaction {
  decision: Decision = "statement";
  private readonly held = new Map<WithPgClient, Held>();

  /** The context's `withPgClient` for this request. */
  wrap(withPgClient: WithPgClient & WithPgTransaction): WithPgClient {
    return async (pgSettings, callback) => {
      if (this.decision === "statement") return withPgClient(pgSettings, callback);
      let held = this.held.get(withPgClient);
      if (held === undefined) {
        const options = { readOnly: this.decision === "snapshot", snapshot: this.decision === "snapshot" };
        this.held.set(withPgClient, (held = hold(withPgClient, pgSettings, options)));
      }
      return callback(await held.client);
    };
  }

  /** Ends the request's transactions: commits them when `commit`, else rolls them back. */
  async end(commit: boolean): Promise<void> {
    const held = [...this.held.values()];
    this.held.clear();
    const ends = await Promise.allSettled(held.map((h) => h.end(commit)));
    const failure = ends.find((e): e is PromiseRejectedResult => e.status === "rejected");
    if (failure) throw failure.reason;
  }
}

const requests = new WeakMap<object, RequestTransaction>();

/** A request's answer once its transaction ended: a commit the database refused fails it (nothing was written). */
async function endedWith(request: RequestTransaction, result: ExecutionResult): Promise<ExecutionResult> {
  if (result.errors?.length) {
    await request.end(false);
    return result;
  }
  try {
    await request.end(true);
  } catch (e) {
    const error = e instanceof Error ? e : new Error(String(e));
    return { data: null, errors: [new GraphQLError(error.message, { originalError: error })] };
  }
  return result;
}

/** A streamed answer's transaction ends with its last payload. */
async function* endedAfter<T>(request: RequestTransaction, payloads: AsyncIterable<T>): AsyncGenerator<T> {
  let complete = false;
  try {
    for await (const payload of payloads) yield payload;
    complete = true;
  } finally {
    await request.end(complete);
  }
}

/** See the top of this file. */
export const PgGqlTransactionPlugin: GraphileConfig.Plugin = {
  name: "PgGqlTransactionPlugin",
  description:
    "One transaction per GraphQL request: reads on one snapshot, a mutation committed once answered",
  version: "0.1.0",
  // Its client wrapper goes under the mutations plugin's (prepareArgs middleware of later plugins wraps first),
  // and a commit the database refuses is answered by the errors plugin.
  after: ["PgGqlMutationsPlugin", "PgGqlErrorsPlugin"],
  grafast: {
    middleware: {
      async prepareArgs(next, event) {
        const args = await next();
        const context = args.contextValue as unknown as Record<string, unknown>;
        const request = new RequestTransaction();
        const services = args.resolvedPreset?.pgServices ?? event.args.resolvedPreset?.pgServices ?? [];
        for (const { withPgClientKey } of services) {
          const withPgClient = context[withPgClientKey];
          if (typeof withPgClient === "function") {
            context[withPgClientKey] = request.wrap(withPgClient as WithPgClient & WithPgTransaction);
          }
        }
        requests.set(context, request);
        return args;
      },
      establishOperationPlan(next, event) {
        const plan = next();
        const request = requests.get(event.context as object);
        if (request) request.decision = decisionOf(plan);
        return plan;
      },
      async execute(next, event) {
        const request = requests.get(event.args.contextValue as object);
        if (request === undefined) return next();
        let result: Awaited<ReturnType<typeof next>>;
        try {
          result = await next();
        } catch (e) {
          await request.end(false);
          throw e;
        }
        if (Symbol.asyncIterator in result) return endedAfter(request, result as AsyncIterable<never>);
        return endedWith(request, result as ExecutionResult);
      },
    },
  },
};
