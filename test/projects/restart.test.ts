import { startTestServer, type TestServer } from "../helpers/server";

/** A project's runtime is replaced on restart: requests already running on the old one must still succeed. */
describe("project restart under traffic", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(`
      create table note(id serial primary key, body text);
      insert into note(body) select 'note ' || g from generate_series(1, 50) g;
      grant select on note to anon;
    `);
  });
  afterAll(() => server.stop());

  const restart = () =>
    fetch(`${server.url}/v1/projects/${server.ref}/restart`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.managementToken}` },
    }).then((res) => res.status);

  const readThroughGraphql = () =>
    fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ noteCollection(first: 5) { edges { node { id } } } }" }),
    }).then(async (res) => ({ status: res.status, body: await res.json() }));

  const readThroughRest = () =>
    fetch(`${server.url}/rest/v1/note?select=id&limit=5`, { headers: { apikey: server.anonKey } }).then(
      async (res) => ({ status: res.status, body: await res.json() }),
    );

  it("answers every request while restarts replace the project's pools and schema", async () => {
    const requests: Promise<{ status: number; body: unknown }>[] = [];
    const restarts: Promise<number>[] = [];
    for (let round = 0; round < 6; round++) {
      restarts.push(restart());
      for (let i = 0; i < 5; i++) requests.push(readThroughGraphql(), readThroughRest());
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    expect(new Set(await Promise.all(restarts))).toEqual(new Set([200]));
    const results = await Promise.all(requests);
    for (const { status, body } of results) {
      expect(status).toBe(200);
      expect(JSON.stringify(body)).not.toContain("error");
    }
  });
});
