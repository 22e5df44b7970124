import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { until } from "../helpers/until";

/**
 * The project's owner may create functions in `public`. One whose argument types match a call better than the
 * built-in (`format(text, variadic text[])` for `format($1, variadic $2::text[])`, `lower(name)` or
 * `quote_ident(name)` for a catalog name) is chosen over pg_catalog's wherever `public` is on the search path.
 * Strata's superuser sessions on a project's database resolve names in pg_catalog only: these record any
 * call, and none may come from a superuser, whatever Strata does on the project's database.
 */
describe("Tenant functions that shadow built-ins", () => {
  let server: TestServer;
  const api = (method: string, path: string, body?: unknown) =>
    mgmt(server, method, `/v1/projects/${server.ref}${path}`, body === undefined ? {} : { body });

  beforeAll(async () => {
    server = await startTestServer();
    const made = await api("POST", "/database/query", {
      query: `
        create table public.hijack (fn text, who text, su boolean);
        grant insert on public.hijack to public;
        create function public.format(fmt text, variadic args text[]) returns text language plpgsql as $$
        begin
          insert into public.hijack values ('format', current_user, (select rolsuper from pg_roles where rolname = current_user));
          return pg_catalog.format(fmt, variadic args);
        end $$;
        create function public.lower(n name) returns text language plpgsql as $$
        begin
          insert into public.hijack values ('lower', current_user, (select rolsuper from pg_roles where rolname = current_user));
          return pg_catalog.lower(n::text);
        end $$;
        create function public.quote_ident(n name) returns text language plpgsql as $$
        begin
          insert into public.hijack values ('quote_ident', current_user, (select rolsuper from pg_roles where rolname = current_user));
          return pg_catalog.quote_ident(n::text);
        end $$;
        grant execute on function public.format(text, text[]), public.lower(name), public.quote_ident(name) to public;
        create table public.notes (id int primary key, body text);`,
    });
    expect(made.status).toBe(201);
  });
  afterAll(() => server.stop());

  it("are never run by Strata's superuser", async () => {
    // The tenant's own call resolves to its function: the trap works.
    await api("POST", "/database/query", { query: "select format('%s', 'x')" });
    expect(
      (await server.sql("select count(*)::int as n from public.hijack where fn = 'format'")).rows[0].n,
    ).toBe(1);

    // Opening the project again (bootstrap, roles), a backup, read-only mode, a temporary login, the catalog
    // readers (GraphQL, REST, types, advisors).
    expect((await api("POST", "/restart")).status).toBeLessThan(300);
    await fetch(`${server.url}/rest/v1/notes`, { headers: { apikey: server.anonKey } });
    await fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    const backup = await api("POST", "/database/backups", {});
    expect(backup.status).toBeLessThan(300);
    await until(
      async () =>
        (await api("GET", "/database/backups")).body.backups.find(
          (b: { status: string }) => b.status === "COMPLETED",
        ),
      60_000,
    );
    expect((await api("PUT", "/readonly", { enabled: true })).status).toBe(200);
    expect((await api("PUT", "/readonly", { enabled: false })).status).toBe(200);
    expect((await api("POST", "/cli/login-role", { read_only: false })).status).toBe(201);
    expect((await api("GET", "/types/typescript")).status).toBe(200);
    expect((await api("GET", "/advisors/security")).status).toBe(200);

    const { rows } = await server.sql("select fn, who from public.hijack where su order by fn");
    expect(rows).toEqual([]);
  });
});
