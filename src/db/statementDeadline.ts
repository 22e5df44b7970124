import net from "node:net";
import type pg from "pg";

/**
 * The database did not answer a statement in time: the server hangs or is stopped (SIGSTOP, a frozen VM, a
 * dead network path), which no server-side timeout notices. Its code is no SQLSTATE, as a Node network
 * error's is not, so every API answers it as the database being out of reach (503).
 */
export class StatementDeadlineExceeded extends Error {
  readonly code = "ETIMEDOUT";
  constructor(ms: number) {
    super(
      `The database did not answer within ${ms} ms: the statement was cancelled and its connection dropped`,
    );
  }
}

/** What of a connected pg client the deadline reads: public fields of pg's Client that its types omit. */
interface ClientState {
  /** False from the moment a statement is sent until the server's ReadyForQuery. */
  readyForQuery: boolean;
  processID: number | null;
  secretKey: number | null;
  host: string;
  port: number;
  connection: { stream: net.Socket; on(event: "readyForQuery", listener: () => void): unknown };
}

/** How long a cancel request waits for a stopped server to take it before it is given up. */
const CANCEL_WAIT_MS = 60_000;
/** The protocol's CancelRequest code (1234 5678). */
const CANCEL_REQUEST_CODE = 80877102;

/**
 * A client-side deadline on every connection of `pool`: a statement the server has not answered within `ms`
 * fails with StatementDeadlineExceeded, a cancel request is sent for it (so the backend stops once the
 * server runs again), and the connection is destroyed, so the statements queued behind it (the rollback)
 * fail at once and the pool drops it when it is released. The time is counted from a statement's sending
 * to the server's ReadyForQuery; a connection idle in a transaction is not timed.
 */
export function enforceStatementDeadline(pool: pg.Pool, ms: number): void {
  pool.on("connect", (client) => watch(client, ms));
}

function watch(client: pg.PoolClient, ms: number): void {
  const state = client as unknown as ClientState;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(expire, ms);
    timer.unref();
  };
  const expire = () => {
    timer = undefined;
    if (state.readyForQuery) return;
    sendCancel(state);
    state.connection.stream.destroy(new StatementDeadlineExceeded(ms));
  };
  client.query = function (this: pg.PoolClient, ...args: unknown[]) {
    if (!timer) arm();
    // pg's own method, looked up at each call (a wrapper put on the prototype later is kept).
    const { query } = Object.getPrototypeOf(this) as { query: (...a: unknown[]) => unknown };
    return query.apply(this, args);
  } as typeof client.query;
  // Heard after pg's own listener, which has sent the next queued statement by then (if any).
  state.connection.on("readyForQuery", () => {
    clearTimeout(timer);
    timer = undefined;
    if (!state.readyForQuery) arm();
  });
  client.once("end", () => clearTimeout(timer));
  // The error of a connection lost while it is lent out reaches its statements; pg also emits it on the
  // client, which the pool listens to only while the client is idle (unheard, it would be thrown).
  client.on("error", () => {});
}

/** Asks the server to cancel what the connection runs (a connection of its own, as libpq's PQcancel). */
function sendCancel(state: ClientState): void {
  if (state.processID === null || state.secretKey === null) return;
  const request = Buffer.alloc(16);
  request.writeInt32BE(16, 0);
  request.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  request.writeInt32BE(state.processID, 8);
  request.writeInt32BE(state.secretKey, 12);
  const socket = state.host.startsWith("/")
    ? net.connect(`${state.host}/.s.PGSQL.${state.port}`)
    : net.connect(state.port, state.host);
  socket.on("error", () => {});
  // A stopped server takes the request from its backlog when it runs again; the server then closes it.
  socket.setTimeout(CANCEL_WAIT_MS, () => socket.destroy());
  socket.unref();
  socket.end(request);
}
