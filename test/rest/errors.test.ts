import { startTestServer, type TestServer } from "../helpers/server";
import { rest, waitForTable } from "./fixtures";

describe("REST errors and hostile input", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(
      `create table notes (id int primary key, body text); insert into notes values (1, 'kept');`,
    );
    await waitForTable(server, "notes");
  });
  afterAll(() => server.stop());

  async function expectError(path: string, status: number, code: string, init: RequestInit = {}) {
    const res = await rest(server, path, init);
    const body = (await res.json()) as Record<string, unknown>;
    expect({ status: res.status, code: body.code }).toEqual({ status, code });
    expect(Object.keys(body).sort()).toEqual(["code", "details", "hint", "message"]);
    expect(JSON.stringify(body)).not.toMatch(/\bat \w+ \(|select .* from/i);
    return body;
  }

  it.each([
    ["/notes?or=(id.eq.1,body.eq.x", 400, "PGRST100"],
    ["/notes?id=between.1", 400, "PGRST100"],
    ["/notes?order=id.sideways", 400, "PGRST100"],
    ["/notes?limit=many", 400, "PGRST100"],
    ["/notes?select=id::text;drop table notes", 400, "PGRST100"],
  ])("answers %s with %i %s", async (path, status, code) => {
    await expectError(path, status, code);
  });

  it("treats hostile identifiers and values as names and data, never as SQL", async () => {
    const hostile = [
      `/notes?select=${encodeURIComponent('"id""; drop table notes; --"')}`,
      `/notes?${encodeURIComponent('id"); drop table notes; --')}=eq.1`,
      `/notes?body=eq.${encodeURIComponent("'; drop table notes; --")}`,
      `/notes?id=in.(${encodeURIComponent("1); drop table notes; --")})`,
      `/${encodeURIComponent('notes"; drop table notes; --')}`,
    ];
    for (const path of hostile) {
      const res = await rest(server, path);
      expect(res.status).toBeGreaterThanOrEqual(200);
      expect(res.status).toBeLessThan(500);
      if (res.status >= 400) expect(Object.keys((await res.json()) as object)).toContain("code");
    }
    expect((await server.sql("select body from notes")).rows).toEqual([{ body: "kept" }]);
  });

  it("matches values holding quotes, backslashes and placeholder-like text exactly", async () => {
    const tricky = [`it's`, `say "hi"`, "back\\slash", "$1", "'; select 1; --", "E'\\x'"];
    for (const [i, body] of tricky.entries()) {
      await server.sql("insert into notes values ($1, $2)", [100 + i, body]);
      const res = await rest(server, `/notes?select=id&body=eq.${encodeURIComponent(body)}`);
      expect(await res.json()).toEqual([{ id: 100 + i }]);
    }
    await server.sql("delete from notes where id >= 100");
  });

  it("reports unknown tables, columns and embeds", async () => {
    await expectError("/nope", 404, "PGRST205");
    await expectError("/notes?select=nope", 400, "42703");
    await expectError("/notes?select=id,authors(*)", 400, "PGRST200");
  });

  it("answers bad JSON bodies and negative limits as PostgREST does", async () => {
    await expectError("/notes", 400, "PGRST102", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    await expectError("/notes?limit=-1", 416, "PGRST103");
  });

  it("refuses requests without a valid API key", async () => {
    const missing = await fetch(`${server.url}/rest/v1/notes`);
    expect(missing.status).toBe(401);
    const wrong = await fetch(`${server.url}/rest/v1/notes?apikey=wrong`);
    expect(wrong.status).toBe(401);
  });

  it("tells an unexposed schema apart from an unknown table", async () => {
    await expectError("/notes", 406, "PGRST106", { headers: { "Accept-Profile": "platform" } });
  });
});
