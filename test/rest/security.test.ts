import { randomUUID } from "node:crypto";
import { startTestServer, type TestServer } from "../helpers/server";
import { clientFor, userToken, waitForTable } from "./fixtures";

describe("REST under grants and row level security", () => {
  let server: TestServer;
  const alice = randomUUID();
  const bob = randomUUID();
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(`
      create table todos (id serial primary key, owner uuid not null default auth.uid(), task text not null);
      alter table todos enable row level security;
      create policy own_rows on todos for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
      create table secrets (id int primary key, value text);
      revoke all on secrets from anon, authenticated;
      insert into secrets values (1, 'classified');
      create schema catalogue;
      grant usage on schema catalogue to anon, authenticated, service_role;
      create table catalogue.items (id int primary key, label text);
      grant select on catalogue.items to anon;
      insert into catalogue.items values (1, 'lamp');
    `);
    await waitForTable(server, "todos");
  });
  afterAll(() => server.stop());

  it("describes in its OpenAPI document only what the caller's role may use", async () => {
    const docOf = async (key: string) => {
      const res = await fetch(`${server.url}/rest/v1/`, {
        headers: { apikey: key, authorization: `Bearer ${key}` },
      });
      return (await res.json()) as { paths: Record<string, Record<string, unknown>> };
    };
    const anon = await docOf(server.anonKey);
    expect(Object.keys(anon.paths)).toContain("/todos");
    expect(Object.keys(anon.paths)).not.toContain("/secrets");
    const service = await docOf(server.serviceKey);
    expect(Object.keys(service.paths)).toContain("/secrets");
    await server.sql("revoke insert, update, delete on todos from anon");
    const readOnly = await docOf(server.anonKey);
    expect(Object.keys(readOnly.paths["/todos"]).sort()).toEqual(["get"]);
    await server.sql("grant insert, update, delete on todos to anon");
  });

  it("lets each signed-in user see and write only their own rows", async () => {
    const asAlice = clientFor(server, server.anonKey, await userToken(server, alice));
    const asBob = clientFor(server, server.anonKey, await userToken(server, bob));
    const created = await asAlice.from("todos").insert({ task: "water plants" }).select("owner, task");
    expect(created.data).toEqual([{ owner: alice, task: "water plants" }]);
    expect((await asBob.from("todos").select()).data).toEqual([]);
    expect((await asAlice.from("todos").select("task")).data).toEqual([{ task: "water plants" }]);
    const forged = await asBob.from("todos").insert({ task: "as alice", owner: alice });
    expect(forged.status).toBe(403);
    expect(forged.error?.code).toBe("42501");
    const service = clientFor(server, server.serviceKey);
    expect((await service.from("todos").select("task")).data).toHaveLength(1);
  });

  it("answers 401 to anon and 403 to a signed-in user without the privilege", async () => {
    const anon = await clientFor(server).from("secrets").select();
    expect(anon.status).toBe(401);
    expect(anon.error?.code).toBe("42501");
    const user = await clientFor(server, server.anonKey, await userToken(server, alice))
      .from("secrets")
      .select();
    expect(user.status).toBe(403);
  });

  it("reads a table once granted after a refused read, and reads it as each role sees it", async () => {
    // Reads travel on prepared statements: a refused one leaves nothing behind, and none serves another role.
    const read = () => clientFor(server).from("secrets").select("id, value");
    for (let i = 0; i < 3; i++) expect((await read()).error?.code).toBe("42501");
    await server.sql("grant select on secrets to anon");
    await server.sql("alter table secrets enable row level security");
    await server.sql("create policy nothing_for_anon on secrets for select to anon using (false)");
    for (let i = 0; i < 3; i++) expect((await read()).data).toEqual([]);
    const service = clientFor(server, server.serviceKey);
    for (let i = 0; i < 3; i++) {
      expect((await service.from("secrets").select("id, value")).data).toEqual([
        { id: 1, value: "classified" },
      ]);
    }
    await server.sql("drop policy nothing_for_anon on secrets");
    await server.sql("alter table secrets disable row level security");
    await server.sql("revoke select on secrets from anon");
  });

  it("serves another schema once the REST config exposes it, and caps reads at max_rows", async () => {
    const before = await clientFor(server).schema("catalogue").from("items").select();
    expect(before.error?.code).toBe("PGRST106");
    await server.controlSql(
      `insert into platform.restapi_config (project_ref, db_schema, max_rows) values ($1, 'public, catalogue', 1)
       on conflict (project_ref) do update set db_schema = excluded.db_schema, max_rows = excluded.max_rows`,
      [server.ref],
    );
    const restart = await fetch(`${server.url}/v1/projects/${server.ref}/restart`, {
      method: "POST",
      headers: { Authorization: `Bearer ${server.managementToken}` },
    });
    expect(restart.status).toBe(200);
    const after = await clientFor(server).schema("catalogue").from("items").select();
    expect(after.data).toEqual([{ id: 1, label: "lamp" }]);
    await server.sql("insert into catalogue.items values (2, 'desk')");
    expect((await clientFor(server).schema("catalogue").from("items").select()).data).toHaveLength(1);
  });
});
