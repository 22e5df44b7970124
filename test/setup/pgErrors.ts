import pg from "pg";

/**
 * Tests drop databases with `force`, pause projects and stop clusters while other files' connections may
 * still sit idle in a pool. An idle connection ended by the server emits `error`; without a listener Node
 * throws it into whichever test file runs at that moment. The server's own pools and clients listen for
 * it (src/); this gives every pool and client a test creates the same treatment, reported on stderr.
 */
const report = (e: Error) => process.stderr.write(`[test] idle database connection ended: ${e.message}\n`);

const connectClient = pg.Client.prototype.connect;
pg.Client.prototype.connect = function (this: pg.Client, ...args: unknown[]) {
  // A pool adds its own listener once the client is connected: only a client nobody else listens to reports.
  if (this.listenerCount("error") === 0) {
    this.on("error", function (this: pg.Client, e: Error) {
      if (this.listenerCount("error") === 1) report(e);
    });
  }
  return (connectClient as (...a: unknown[]) => unknown).apply(this, args);
} as typeof connectClient;

const connectPool = pg.Pool.prototype.connect;
pg.Pool.prototype.connect = function (this: pg.Pool, ...args: unknown[]) {
  if (this.listenerCount("error") === 0) this.on("error", report);
  return (connectPool as (...a: unknown[]) => unknown).apply(this, args);
} as typeof connectPool;
