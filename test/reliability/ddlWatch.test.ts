import { startTestServer, type TestServer } from "../helpers/server";
import { waitForTable } from "../rest/fixtures";

/** The DDL watch rebuilds a project's schema caches for changes the APIs can see, once per burst. */
describe("DDL watch", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(`
      create table visible (id int);
      create function scratch() returns int language plpgsql as $$
      begin
        create temp table if not exists scratch_rows (n int) on commit drop;
        insert into scratch_rows values (1);
        return (select count(*) from scratch_rows);
      end $$;
      grant execute on function scratch() to anon;
    `);
    await waitForTable(server, "visible");
  });
  afterAll(() => server.stop());

  /** Schema rebuilds of the default project while `work` runs (and a moment after, for the notices). */
  async function rebuildsDuring(work: () => Promise<void>): Promise<string[]> {
    // Start-up settles first (the notices of the set-up DDL).
    await new Promise((r) => setTimeout(r, 1000));
    const runtime = await server.strata.ctx.registry.getDefault();
    const reasons: string[] = [];
    const record = (reason: string) => reasons.push(reason);
    runtime.events.on("schema-changed", record);
    try {
      await work();
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      runtime.events.off("schema-changed", record);
    }
    expect(await server.strata.ctx.registry.getDefault()).toBe(runtime);
    return reasons;
  }

  it("ignores temporary tables that functions make on every call", async () => {
    const reasons = await rebuildsDuring(async () => {
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${server.url}/rest/v1/rpc/scratch`, {
          method: "POST",
          headers: { apikey: server.anonKey, "content-type": "application/json" },
          body: "{}",
        });
        expect(res.status).toBe(200);
      }
    });
    expect(reasons).toEqual([]);
  });

  it("rebuilds once for a burst of DDL statements, and the change is visible", async () => {
    const reasons = await rebuildsDuring(async () => {
      await server.sql(
        Array.from({ length: 20 }, (_, i) => `alter table visible add column c${i} int;`).join("\n"),
      );
    });
    expect(reasons).toHaveLength(1);
    const res = await fetch(`${server.url}/rest/v1/visible?select=c19`, {
      headers: { apikey: server.anonKey },
    });
    expect(res.status).toBe(200);
  });
});
