import { startTestServer, type TestServer } from "../helpers/server";
import { authenticatorStatementsDuring } from "../helpers/statements";
import { mgmt } from "../management/client";
import { clientFor, rest, waitForTable } from "./fixtures";

describe("REST writes through the JavaScript client", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(`
      create table teams (id int primary key, name text not null unique);
      create table players (id serial primary key, name text not null, team_id int references teams,
                            rating int not null default 1000, created_at timestamptz default now());
      insert into teams values (1, 'Red'), (2, 'Blue');
    `);
    await waitForTable(server, "players");
  });
  afterAll(() => server.stop());

  it("inserts one or many rows and returns them with embeds when asked", async () => {
    const quiet = await clientFor(server).from("players").insert({ name: "Ada", team_id: 1 });
    expect(quiet).toMatchObject({ status: 201, data: null, error: null });
    const { data, status } = await clientFor(server)
      .from("players")
      .insert([
        { name: "Bo", team_id: 2 },
        { name: "Cy", team_id: 1 },
      ])
      .select("name, rating, teams(name)");
    expect(status).toBe(201);
    expect(data).toEqual([
      { name: "Bo", rating: 1000, teams: { name: "Blue" } },
      { name: "Cy", rating: 1000, teams: { name: "Red" } },
    ]);
  });

  it("sends a write with its settings in one round trip, committed by itself", async () => {
    await clientFor(server).from("players").insert({ name: "Warm", team_id: 2 });
    let status = 0;
    const roundTrips = await authenticatorStatementsDuring(async () => {
      ({ status } = await clientFor(server).from("players").insert({ name: "Once", team_id: 2 }));
    });
    expect(status).toBe(201);
    expect(roundTrips).toHaveLength(1);
    expect(roundTrips[0]).toMatch(/insert into/i);
    expect((await server.sql("select 1 from players where name = 'Once'")).rows).toHaveLength(1);
  });

  it("fills missing keys with NULL, or with column defaults when asked", async () => {
    const nulls = await clientFor(server)
      .from("players")
      .insert([{ name: "Di", rating: 1200 }, { name: "Ed" }])
      .select("name, rating");
    expect(nulls.error?.code).toBe("23502"); // rating is NOT NULL and the missing key became NULL
    const defaults = await clientFor(server)
      .from("players")
      .insert([{ name: "Di", rating: 1200 }, { name: "Ed" }], { defaultToNull: false })
      .select("name, rating");
    expect(defaults.data).toEqual([
      { name: "Di", rating: 1200 },
      { name: "Ed", rating: 1000 },
    ]);
    const rows = await server.sql("select count(*)::int as n from players where name in ('Di', 'Ed')");
    expect(rows.rows[0].n).toBe(2);
  });

  it("upserts on the primary key or another unique column", async () => {
    const merged = await clientFor(server).from("teams").upsert({ id: 1, name: "Crimson" }).select();
    expect(merged.status).toBe(200);
    expect(merged.data).toEqual([{ id: 1, name: "Crimson" }]);
    const inserted = await clientFor(server).from("teams").upsert({ id: 3, name: "Green" }).select();
    expect(inserted.status).toBe(201);
    const byName = await clientFor(server)
      .from("teams")
      .upsert({ id: 9, name: "Green" }, { onConflict: "name", ignoreDuplicates: true })
      .select();
    expect(byName.data).toEqual([]);
    expect((await server.sql("select name from teams order by id")).rows.map((r) => r.name)).toEqual([
      "Crimson",
      "Blue",
      "Green",
    ]);
  });

  it("updates and deletes the filtered rows", async () => {
    const updated = await clientFor(server)
      .from("players")
      .update({ rating: 1500 })
      .eq("name", "Ada")
      .select("name, rating");
    expect(updated.data).toEqual([{ name: "Ada", rating: 1500 }]);
    const none = await clientFor(server).from("players").update({ rating: 1 }).eq("name", "nobody").select();
    expect(none).toMatchObject({ status: 200, data: [] });
    const removed = await clientFor(server)
      .from("players")
      .delete({ count: "exact" })
      .in("name", ["Di", "Ed"]);
    expect(removed).toMatchObject({ status: 204, count: 2 });
  });

  it("writes each request's own payload when it repeats another write's URL and columns", async () => {
    const players = () => clientFor(server).from("players");
    for (const [name, rating] of [
      ["Kept1", 1101],
      ["Kept2", 1102],
    ] as const) {
      const { data } = await players().insert({ name, team_id: 1, rating }).select("name, rating");
      expect(data).toEqual([{ name, rating }]);
    }
    // The same columns in another order, and other columns: statements of their own.
    await players().insert({ rating: 1103, name: "Kept3", team_id: 2 });
    await players().insert({ name: "Kept4" });
    for (const rating of [1201, 1202]) {
      const { data } = await players().update({ rating }).like("name", "Kept%").select("name");
      expect(data).toHaveLength(4);
      const written = await server.sql("select distinct rating from players where name like 'Kept%'");
      expect(written.rows).toEqual([{ rating }]);
    }
    // A filter value equal to the payload's JSON: the payload is bound, not the filter's value.
    const json = JSON.stringify({ name: "Kept1" });
    for (let i = 0; i < 2; i++) {
      const res = await rest(server, `/players?name=eq.${encodeURIComponent(json)}`, {
        method: "PATCH",
        headers: { "content-type": "application/json", prefer: "return=representation" },
        body: json,
      });
      expect(await res.json()).toEqual([]);
    }
    const removed = await players().delete({ count: "exact" }).like("name", "Kept%");
    expect(removed).toMatchObject({ status: 204, count: 4 });
    const left = await players().delete({ count: "exact" }).like("name", "Kept%");
    expect(left).toMatchObject({ status: 204, count: 0 });
    expect((await server.sql("select 1 from players where name like 'Kept%'")).rows).toEqual([]);
  });

  it("rolls a singular write back when it touches other than one row", async () => {
    const res = await rest(server, "/players?team_id=eq.1", {
      method: "PATCH",
      headers: {
        "content-type": "application/json",
        Prefer: "return=representation",
        Accept: "application/vnd.pgrst.object+json",
      },
      body: JSON.stringify({ rating: 1 }),
    });
    expect(res.status).toBe(406);
    expect(((await res.json()) as any).code).toBe("PGRST116");
    const ratings = await server.sql("select rating from players where team_id = 1");
    expect(ratings.rows.every((r) => r.rating !== 1)).toBe(true);
  });

  it("maps constraint violations to PostgREST's statuses", async () => {
    const dup = await clientFor(server).from("teams").insert({ id: 2, name: "Again" });
    expect(dup.status).toBe(409);
    expect(dup.error).toMatchObject({ code: "23505", details: "Key (id)=(2) already exists." });
    const fk = await clientFor(server).from("players").insert({ name: "Zed", team_id: 99 });
    expect(fk.status).toBe(409);
    expect(fk.error?.code).toBe("23503");
    const unknown = await clientFor(server).from("players").insert({ name: "Zed", height: 2 });
    expect(unknown.status).toBe(400);
    expect(unknown.error?.code).toBe("PGRST204");
  });
  it("answers EXPLAIN ANALYZE of a write with its plan, once plans are enabled, and writes nothing", async () => {
    const explain = () =>
      rest(server, "/teams", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: 'application/vnd.pgrst.plan+json; for="application/json"; options=analyze|verbose',
        },
        body: JSON.stringify({ id: 99, name: "Explained" }),
      });
    // Off by default: a plan would show anyone table sizes and policies.
    const refused = await explain();
    expect(refused.status).toBe(406);
    expect(((await refused.json()) as { code: string }).code).toBe("PGRST107");
    const enable = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/postgrest`, {
      body: { db_plan_enabled: true },
    });
    expect(enable.body.db_plan_enabled).toBe(true);
    const res = await explain();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/vnd.pgrst.plan+json");
    const plan = (await res.json()) as { Plan: { "Actual Rows"?: number } }[];
    expect(plan[0].Plan["Actual Rows"]).toBeDefined();
    expect((await server.sql("select count(*)::int as n from teams where id = 99")).rows[0].n).toBe(0);
  });

  it("reads CSV rows whose values hold commas and quotes", async () => {
    const res = await rest(server, "/teams", {
      method: "POST",
      headers: { "content-type": "text/csv", prefer: "return=minimal" },
      body: 'id,name\n41,"Green, ""the"" team"\n42,Gold\n',
    });
    expect(res.status).toBe(201);
    const { rows } = await server.sql("select id, name from teams where id in (41, 42) order by id");
    expect(rows).toEqual([
      { id: 41, name: 'Green, "the" team' },
      { id: 42, name: "Gold" },
    ]);
    const csv = await rest(server, "/teams?id=in.(41,42)&order=id", { headers: { accept: "text/csv" } });
    expect(await csv.text()).toBe('id,name\n41,"Green, ""the"" team"\n42,Gold');
  });
});
