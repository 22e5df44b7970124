import { startTestServer, type TestServer } from "../helpers/server";
import { clientFor, waitForTable } from "./fixtures";

describe("REST function calls", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(`
      create table cities (id int primary key, name text, population int);
      insert into cities values (1, 'Oslo', 700000), (2, 'Bergen', 290000), (3, 'Tromso', 77000);
      create function greet(who text default 'world') returns text language sql stable as $$ select 'Hello ' || who $$;
      create function doubled(nums int[]) returns int[] language sql immutable as $$ select array(select n * 2 from unnest(nums) n) $$;
      create function big_cities(min_pop int) returns setof cities language sql stable as $$ select * from cities where population >= min_pop $$;
      create function add_city(name text) returns int language sql volatile as $$ insert into cities values (4, name, 1) returning id $$;
      create function nothing() returns void language sql as $$ select $$;
    `);
    await waitForTable(server, "cities");
  });
  afterAll(() => server.stop());

  it("calls scalar functions with named, defaulted and array arguments", async () => {
    const supabase = clientFor(server);
    expect((await supabase.rpc("greet")).data).toBe("Hello world");
    expect((await supabase.rpc("greet", { who: "Oslo" })).data).toBe("Hello Oslo");
    expect((await supabase.rpc("doubled", { nums: [1, 2, 3] })).data).toEqual([2, 4, 6]);
    expect((await supabase.rpc("greet", { who: "GET" }, { get: true })).data).toBe("Hello GET");
    expect((await supabase.rpc("nothing")).status).toBe(204);
  });

  it("filters, orders and shapes the rows of set-returning functions", async () => {
    const { data } = await clientFor(server)
      .rpc("big_cities", { min_pop: 100000 })
      .select("name")
      .order("population");
    expect(data).toEqual([{ name: "Bergen" }, { name: "Oslo" }]);
    const one = await clientFor(server).rpc("big_cities", { min_pop: 0 }).eq("id", 3).single();
    expect(one.data).toEqual({ id: 3, name: "Tromso", population: 77000 });
  });

  it("runs GET calls read-only and reports unknown functions", async () => {
    const readOnly = await clientFor(server).rpc("add_city", { name: "X" }, { get: true });
    expect(readOnly.status).toBe(405);
    expect(readOnly.error?.code).toBe("25006");
    const written = await clientFor(server).rpc("add_city", { name: "Alta" });
    expect(written.data).toBe(4);
    const missing = await clientFor(server).rpc("no_such_fn", { a: 1 });
    expect(missing.status).toBe(404);
    expect(missing.error?.code).toBe("PGRST202");
  });
});
