import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

describe("Management API: advisors", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
  });
  afterAll(() => server.stop());

  it("reports real lints: an unindexed foreign key and a table without row level security", async () => {
    await server.sql(
      "create table owners (id int primary key); create table cars (id int primary key, owner_id int references owners)",
    );
    const perf = await mgmt(server, "GET", `${base}/advisors/performance`);
    expect(perf.body.lints).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: "unindexed_foreign_keys",
          metadata: expect.objectContaining({ name: "cars" }),
        }),
      ]),
    );
    const security = await mgmt(server, "GET", `${base}/advisors/security`);
    expect(security.body.lints.map((l: { cache_key: string }) => l.cache_key)).toEqual(
      expect.arrayContaining(["rls_disabled_in_public_public_cars", "rls_disabled_in_public_public_owners"]),
    );
    await server.sql("create index on cars (owner_id)");
    expect((await mgmt(server, "GET", `${base}/advisors/performance`)).body.lints).toEqual([]);
  });
});
