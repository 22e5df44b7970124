import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";

/** A project adds its tables to realtime's publication with the SQL the platform's docs give. */
describe("The supabase_realtime publication", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("takes a table through the Management API's SQL endpoint (the project's owner role)", async () => {
    const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, {
      body: {
        query:
          "create table public.feed (id int primary key, body text); alter publication supabase_realtime add table public.feed;",
      },
    });
    expect(res.status).toBe(201);
    const { rows } = await server.sql(
      "select tablename from pg_publication_tables where pubname = 'supabase_realtime' and tablename = 'feed'",
    );
    expect(rows).toEqual([{ tablename: "feed" }]);
  });
});
