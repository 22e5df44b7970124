import net from "node:net";
import pg from "pg";
import { withDatabase } from "../../src/db/urls";
import { adminQuery } from "../helpers/db";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { tenantSql } from "./sql";

/**
 * vault.decrypted_secrets in the owner's own sessions through the database listener (src/pooler/vaultSession.ts):
 * psql-like clients logged in as `postgres.<ref>` read their secrets decrypted, as on the platform; the key is in
 * no table any role of the session may read, and no other role of the session decrypts. A client that sends
 * anything but its password before its session is ready is cut off. Checked through the listener and as the
 * cluster's superuser.
 */
describe("vault in the owner's sessions through the database listener", () => {
  let server: TestServer;
  let port: number;
  let ref: string;
  let database: string;
  const password = "listener-vault-Pass-1";
  const plain = "sk_live_" + Math.random().toString(36).slice(2);

  beforeAll(async () => {
    server = await startTestServer({ STRATA_DB_PORT: "0", MANAGEMENT_RATE_LIMIT: "100000" });
    port = server.strata.ctx.dbListener!.port;
    ref = server.ref;
    const set = await mgmt(server, "PATCH", `/v1/projects/${ref}/database/password`, { body: { password } });
    expect(set.status).toBe(200);
    database = new URL(server.dbUrl).pathname.slice(1);
    await tenantSql(server, `select vault.create_secret('${plain}', 'stripe', 'the API key')`, ref);
  });
  afterAll(() => server.stop());

  async function owner(): Promise<pg.Client> {
    const client = new pg.Client({ host: "127.0.0.1", port, user: `postgres.${ref}`, password, ssl: false });
    client.on("error", () => {});
    await client.connect();
    return client;
  }
  const error = (client: pg.Client, sql: string) =>
    client.query(sql).then(
      () => "no error",
      (e: Error) => e.message,
    );

  it("decrypts for the owner, and for no other role of the session; the key stays out of reach", async () => {
    const client = await owner();
    try {
      expect(
        (await client.query("select decrypted_secret from vault.decrypted_secrets where name = 'stripe'"))
          .rows,
      ).toEqual([{ decrypted_secret: plain }]);
      // The session is the client's as usual: its own statements, transactions and settings.
      expect((await client.query("select current_user, session_user")).rows[0]).toEqual({
        current_user: `postgres_${ref}`,
        session_user: `postgres_${ref}`,
      });
      for (const role of ["anon", "authenticated"]) {
        expect(
          await error(client, `set role ${role}; select decrypted_secret from vault.decrypted_secrets`),
        ).toMatch(/permission denied/);
        await client.query("reset role");
      }
      for (const sql of [
        "select * from pg_temp.strata_vault_session",
        "select vault._session_key()",
        "insert into pg_temp.strata_vault_session values ('\\x00')",
        "alter table pg_temp.strata_vault_session owner to current_user",
      ])
        expect(await error(client, sql)).toMatch(/permission denied|must be owner/);
      // As the superuser: the session's key table is strata_vault's, and no table of the database holds the key.
      const { rows } = await adminQuery(
        `select c.relowner::regrole::text as owner, c.relpersistence from pg_class c
          where c.relname = 'strata_vault_session'`,
        [],
        withDatabase(server.dbUrl, database),
      );
      expect(rows).toEqual([{ owner: "strata_vault", relpersistence: "t" }]);
    } finally {
      await client.end();
    }
  });

  it("cuts off a client that sends a query before its session is ready", async () => {
    const socket = net.connect(port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    const params = Buffer.from(`user\0postgres.${ref}\0database\0postgres\0\0`);
    const startup = Buffer.alloc(8);
    startup.writeInt32BE(8 + params.length, 0);
    startup.writeInt32BE(196608, 4);
    const query = Buffer.from("select 1\0");
    const head = Buffer.alloc(5);
    head.write("Q", 0, "latin1");
    head.writeInt32BE(4 + query.length, 1);
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.on("error", () => {});
    socket.resume();
    socket.write(Buffer.concat([startup, params, head, query]));
    await closed;
    // The owner still connects as usual.
    const client = await owner();
    expect((await client.query("select 1 as one")).rows).toEqual([{ one: 1 }]);
    await client.end();
  });
});
