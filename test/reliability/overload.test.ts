import { startTestServer, type TestServer } from "../helpers/server";
import { waitForTable } from "../rest/fixtures";

/** Bounded waits: a runaway query ends at its role's timeout, a request that gets no connection says so. */
describe("Overload", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ DATA_POOL_WAIT_MS: "1000" });
    await server.sql(`
      create table marker (id int);
      create function slow(seconds float8) returns int language sql as 'select 1 from pg_sleep(seconds)';
      grant execute on function slow(float8) to anon, service_role;
    `);
    await waitForTable(server, "marker");
  });
  afterAll(() => server.stop());

  const call = (key: string, seconds: number) =>
    fetch(`${server.url}/rest/v1/rpc/slow`, {
      method: "POST",
      headers: { apikey: key, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ seconds }),
    });

  it("ends an anon query at the anon role's statement timeout", async () => {
    const res = await call(server.anonKey, 30);
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(((await res.json()) as { code: string }).code).toBe("57014");
    // Nothing of it is left running in the database.
    const { rows } = await server.sql(
      "select count(*)::int as n from pg_stat_activity where query like '%pg_sleep(seconds)%' and state = 'active' and pid <> pg_backend_pid()",
    );
    expect(rows[0].n).toBe(0);
  });

  it("answers 503 in each API's format when every data connection stays busy past the wait", async () => {
    // service_role has no statement timeout: ten calls hold the project's ten data connections.
    const holders = Array.from({ length: 10 }, () => call(server.serviceKey, 3));
    await new Promise((r) => setTimeout(r, 300));
    const rest = await fetch(`${server.url}/rest/v1/marker`, { headers: { apikey: server.anonKey } });
    const graphql = await fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ markerCollection { edges { node { id } } } }" }),
    });
    expect(rest.status).toBe(503);
    expect(((await rest.json()) as { code: string }).code).toBe("53300");
    expect(graphql.status).toBe(503);
    expect(((await graphql.json()) as { errors: { message: string }[] }).errors[0].message).toMatch(
      /connection/,
    );
    expect((await Promise.all(holders)).map((r) => r.status)).toEqual(Array(10).fill(200));
    // And the next request is served again.
    expect(
      (await fetch(`${server.url}/rest/v1/marker`, { headers: { apikey: server.anonKey } })).status,
    ).toBe(200);
  });
});
