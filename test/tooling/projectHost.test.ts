import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { startTestServer, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { mgmt } from "../management/client";
import { platformCli, type Cli } from "./clients";

/**
 * The platform's CLI reaching a project at its own hosts, as on the platform: `https://<ref>.<project_host>` (port
 * 443: `link`'s version probes, `storage ls|cp|mv|rm`) and `db.<ref>.<project_host>:5432` (`--linked` database
 * commands). The CLI takes no port for either, so the test gives the names a loopback address of their own
 * (a hosts file mounted over /etc/hosts in the CLI's own mount namespace, as an operator's DNS answers them):
 * Strata's database listener listens there on 5432, and port 443 there forwards to Strata's HTTPS listener, as
 * an operator maps it. The CLI trusts the listener's self-signed certificate through SSL_CERT_FILE.
 */

jest.setTimeout(600_000);

const DOMAIN = "strata.test";
/** Running the CLI in a mount namespace of its own needs root and unshare(1). */
const canMountHosts = process.getuid?.() === 0 && existsSync("/usr/bin/unshare");

/** Forwards every connection to `address:listenPort` to Strata's `port` on the loopback. */
function forward(address: string, listenPort: number, port: number): Promise<net.Server> {
  const server = net.createServer((socket) => {
    const upstream = net.connect(port, "127.0.0.1");
    socket.pipe(upstream).pipe(socket);
    const end = () => {
      socket.destroy();
      upstream.destroy();
    };
    socket.on("error", end);
    upstream.on("error", end);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(listenPort, address, () => resolve(server));
  });
}

(canMountHosts ? describe : describe.skip)("the platform's CLI at the project's own hosts", () => {
  // A loopback address of this run's own, so that ports 443 and 5432 are free there.
  const address = `127.36.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
  let server: TestServer;
  let https: net.Server;
  let cli: Cli;
  let ref: string;
  /** Runs SQL in the linked project's database (`db query --linked`); its rows. */
  const linkedQuery = async (sql: string) =>
    JSON.parse(await cli.ok(["db", "query", sql, "--linked", "-o", "json"]));

  beforeAll(async () => {
    server = await startTestServer({
      STRATA_DOMAIN: DOMAIN,
      STRATA_DB_PORT: "5432",
      STRATA_DB_LISTEN: address,
      STRATA_HTTPS_PORT: "0",
    });
    ref = server.ref;
    https = await forward(address, 443, server.strata.httpsPort!);
    const hosts = path.join(testTempDir("strata-hosts-"), "hosts");
    // The pooler's host too (db.<domain>): the CLI reaches a linked branch through it.
    writeFileSync(
      hosts,
      `127.0.0.1 localhost\n${address} ${ref}.${DOMAIN} db.${ref}.${DOMAIN} db.${DOMAIN}\n`,
    );
    const certificate = path.join(server.strata.ctx.config.dataDir, "db-listener", "server.crt");
    cli = await platformCli(server, {
      projectHost: DOMAIN,
      hostsFile: hosts,
      // Its Go part reads SSL_CERT_FILE, its Bun part NODE_EXTRA_CA_CERTS.
      env: { SSL_CERT_FILE: certificate, NODE_EXTRA_CA_CERTS: certificate },
    });
  });
  afterAll(async () => {
    https?.close();
    await server?.stop();
  });

  it("links the project: its services' versions read at https://<ref>.<domain>, the pooler's address", async () => {
    expect(await cli.ok(["link", "--project-ref", ref])).toMatch(/Finished supabase link/);
    const temp = (file: string) => readFileSync(path.join(cli.dir, "supabase", ".temp", file), "utf8");
    expect(temp("project-ref")).toBe(ref);
    // Storage answers its version bare, auth with a `v`: the CLI writes both with one.
    const version = await (await fetch(`${server.url}/storage/v1/version`)).text();
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(temp("storage-version")).toBe(`v${version}`);
    expect(temp("gotrue-version")).toBe(`v${version}`);
    expect(temp("rest-version")).toMatch(/^v\d+/);
    // The pooler's address (the database listener's), its password placeholder dropped.
    expect(temp("pooler-url")).toBe(`postgresql://postgres.${ref}@db.${DOMAIN}:5432/postgres`);
  });

  it("runs database commands with --linked through db.<ref>.<domain>:5432", async () => {
    const migrations = path.join(cli.dir, "supabase", "migrations");
    mkdirSync(migrations, { recursive: true });
    writeFileSync(
      path.join(migrations, "20260101000000_linked.sql"),
      "create table public.linked_notes (id int primary key, body text);",
    );
    expect(await cli.ok(["db", "push", "--linked", "--yes"])).toMatch(/Finished supabase db push/);
    expect(
      (await server.sql("select version from supabase_migrations.schema_migrations")).rows,
    ).toContainEqual({ version: "20260101000000" });
    expect((await server.sql("select to_regclass('public.linked_notes') as t")).rows[0].t).toBe(
      "linked_notes",
    );
    expect(await cli.ok(["migration", "list", "--linked"])).toMatch(/20260101000000.*\|.*20260101000000/);
    const stats = await cli.ok(["inspect", "db", "table-stats", "--linked"]);
    expect(stats).toMatch(/linked_notes/);
  });

  it("lists, copies, moves and removes objects at https://<ref>.<domain> (storage)", async () => {
    const bucket = await fetch(`${server.url}/storage/v1/bucket`, {
      method: "POST",
      headers: {
        apikey: server.serviceKey,
        authorization: `Bearer ${server.serviceKey}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ id: "cli-files", name: "cli-files" }),
    });
    expect(bucket.status).toBe(200);
    const local = path.join(cli.dir, "hello.txt");
    writeFileSync(local, "hello from the CLI");
    const storage = (...args: string[]) => cli.ok(["storage", ...args, "--experimental", "--linked"]);
    expect(await storage("ls", "ss:///")).toMatch(/cli-files\//);
    await storage("cp", local, "ss:///cli-files/in/hello.txt");
    const { rows } = await server.sql(
      "select name from storage.objects where bucket_id = 'cli-files' order by name",
    );
    expect(rows).toEqual([{ name: "in/hello.txt" }]);
    expect(await storage("ls", "ss:///cli-files/in/")).toMatch(/hello\.txt/);
    await storage("mv", "ss:///cli-files/in/hello.txt", "ss:///cli-files/out/hello.txt");
    const back = path.join(cli.dir, "back.txt");
    await storage("cp", "ss:///cli-files/out/hello.txt", back);
    expect(readFileSync(back, "utf8")).toBe("hello from the CLI");
    // Without --yes the CLI's confirmation answers no.
    await storage("rm", "ss:///cli-files/out/hello.txt", "--yes");
    expect(
      (await server.sql("select count(*)::int as n from storage.objects where bucket_id = 'cli-files'")).rows,
    ).toEqual([{ n: 0 }]);
  });
  it("applies, resets and repairs migrations with --linked (migration up, down, repair; db reset)", async () => {
    const history = async () =>
      (
        await server.sql("select version from supabase_migrations.schema_migrations order by version")
      ).rows.map((r) => r.version as string);
    writeFileSync(
      path.join(cli.dir, "supabase", "migrations", "20260102000000_second.sql"),
      "create table public.second_notes (id int);",
    );
    await cli.ok(["migration", "up", "--linked"]);
    expect(await history()).toEqual(["20260101000000", "20260102000000"]);
    expect((await server.sql("select to_regclass('public.second_notes') as t")).rows[0].t).toBe(
      "second_notes",
    );

    // The user's objects outside the migrations, made as the owner; a user of auth, a bucket of storage.
    const made = await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, {
      body: {
        query: `create schema scratch; create table scratch.t (id int);
                create function public.answer() returns int language sql as 'select 42';
                create type public.mood as enum ('ok');
                create policy "kept files" on storage.objects for select using (bucket_id = 'kept-files');
                insert into public.linked_notes values (1, 'gone with the reset')`,
      },
    });
    expect(made.status).toBe(201);
    const service = { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}` };
    const user = await fetch(`${server.url}/auth/v1/admin/users`, {
      method: "POST",
      headers: { ...service, "content-type": "application/json" },
      body: JSON.stringify({ email: "kept@example.com", password: "Kept-pass-1", email_confirm: true }),
    });
    expect(user.status).toBe(200);
    const bucket = await fetch(`${server.url}/storage/v1/bucket`, {
      method: "POST",
      headers: { ...service, "content-type": "application/json" },
      body: JSON.stringify({ id: "kept-files", name: "kept-files" }),
    });
    expect(bucket.status).toBe(200);
    const schemas = async () =>
      (await server.sql("select nspname from pg_namespace order by nspname")).rows.map((r) => r.nspname);
    const before = await schemas();

    // The CLI's reset (shared with `db reset --linked`) empties the user's objects, then applies the migrations up
    // to the one before the last; Strata's schemas and the project's auth users and buckets stay.
    await cli.ok(["migration", "down", "--linked", "--last", "1", "--yes"]);
    expect(await history()).toEqual(["20260101000000"]);
    const { rows } = await server.sql(
      `select to_regclass('public.linked_notes')::text as linked, to_regclass('public.second_notes')::text as second,
              (select count(*)::int from public.linked_notes) as notes, to_regprocedure('public.answer()')::text as fn,
              to_regtype('public.mood')::text as mood,
              (select count(*)::int from auth.users where email = 'kept@example.com') as users,
              (select count(*)::int from storage.buckets where id = 'kept-files') as buckets,
              (select count(*)::int from pg_policies where policyname = 'kept files') as policies,
              (select count(*)::int from pg_policies where schemaname = 'cron') as cron_policies`,
    );
    expect(rows).toEqual([
      {
        linked: "linked_notes",
        second: null,
        notes: 0,
        fn: null,
        mood: null,
        users: 1,
        buckets: 1,
        policies: 0,
        cron_policies: 4,
      },
    ]);
    expect(await schemas()).toEqual(before.filter((name) => name !== "scratch"));

    // The project still serves its data API and auth.
    const rest = await fetch(`${server.url}/rest/v1/linked_notes?select=id`, { headers: service });
    expect(rest.status).toBe(200);
    expect(await rest.json()).toEqual([]);
    const token = await fetch(`${server.url}/auth/v1/token?grant_type=password`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ email: "kept@example.com", password: "Kept-pass-1" }),
    });
    expect(token.status).toBe(200);

    await cli.ok(["migration", "repair", "--status", "reverted", "20260102000000", "--linked"]);
    expect(await history()).toEqual(["20260101000000"]);
    expect(await cli.ok(["migration", "list", "--linked"])).toMatch(/20260102000000.*\|\s*` `/);

    // `db reset` runs the same reset in a transaction of its own, then applies every local migration.
    await cli.ok(["db", "reset", "--linked", "--yes"]);
    expect(await history()).toEqual(["20260101000000", "20260102000000"]);
    const { rows: after } = await server.sql(
      `select to_regclass('public.second_notes')::text as second,
              (select count(*)::int from auth.users where email = 'kept@example.com') as users`,
    );
    expect(after).toEqual([{ second: "second_notes", users: 1 }]);
  });

  it("creates the buckets of config.toml (seed buckets), reads snippets, adds a SAML provider from a file", async () => {
    const toml = path.join(cli.dir, "supabase", "config.toml");
    writeFileSync(toml, `${readFileSync(toml, "utf8")}\n[storage.buckets.seeded]\npublic = true\n`);
    await cli.ok(["seed", "buckets", "--linked"]);
    expect((await server.sql("select public from storage.buckets where id = 'seeded'")).rows).toEqual([
      { public: true },
    ]);

    const made = await fetch(`${server.url}/v1/snippets`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "one", sql: "select 41 + 1", project_ref: ref }),
    });
    const { id } = await made.json();
    expect(await cli.ok(["snippets", "list"])).toMatch(new RegExp(`${id} \\| one`));
    expect(await cli.ok(["snippets", "download", id])).toBe("select 41 + 1\n");

    const certificate = readFileSync(
      path.join(server.strata.ctx.config.dataDir, "db-listener", "server.crt"),
      "utf8",
    ).replace(/-----[^-]+-----|\s/g, "");
    const metadata = path.join(cli.dir, "idp.xml");
    writeFileSync(
      metadata,
      `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://idp.example.test/metadata">` +
        `<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
        `<md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data>` +
        `<ds:X509Certificate>${certificate}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>` +
        `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example.test/sso"/>` +
        `</md:IDPSSODescriptor></md:EntityDescriptor>`,
    );
    const added = JSON.parse(
      await cli.ok([
        "sso",
        "add",
        "--type",
        "saml",
        "--metadata-file",
        metadata,
        "--domains",
        "example.com",
        "--project-ref",
        ref,
        "-o",
        "json",
      ]),
    );
    expect(added).toMatchObject({ saml: { entity_id: "https://idp.example.test/metadata" } });
    const listed = await fetch(`${server.url}/v1/projects/${ref}/config/auth/sso/providers`, {
      headers: { authorization: `Bearer ${server.managementToken}` },
    });
    expect((await listed.json()).items).toEqual([
      expect.objectContaining({
        id: added.id,
        domains: [expect.objectContaining({ domain: "example.com" })],
      }),
    ]);
    const stored = async () =>
      (
        await server.controlSql(
          "select value from platform.project_settings where project_ref = $1 and kind = 'sso_providers'",
          [ref],
        )
      ).rows[0].value.items;
    const sso = (...args: string[]) => cli.ok(["sso", ...args, "--project-ref", ref]);
    expect(JSON.parse(await sso("show", added.id, "-o", "json"))).toMatchObject({ id: added.id });
    expect(await sso("show", added.id, "--metadata")).toContain(
      'entityID="https://idp.example.test/metadata"',
    );
    const emailFormat = "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress";
    await sso("update", added.id, "--add-domains", "example.net", "--name-id-format", emailFormat);
    const [updated] = await stored();
    expect(updated.domains.map((d: { domain: string }) => d.domain).sort()).toEqual([
      "example.com",
      "example.net",
    ]);
    expect(JSON.stringify(updated)).toContain(emailFormat);
    await sso("remove", added.id);
    expect(await stored()).toEqual([]);
  });

  it("queries, lints and types the linked database, reads the services' versions", async () => {
    await linkedQuery("create table public.by_query (id int primary key)");
    expect((await server.sql("select to_regclass('public.by_query') as t")).rows[0].t).toBe("by_query");
    expect(await linkedQuery("select 41 + 1 as answer")).toEqual([{ answer: 42 }]);
    // `db advisors --linked` and `gen types --linked` ask the Management API.
    expect(JSON.parse(await cli.ok(["db", "advisors", "--linked"]))).toContainEqual(
      expect.objectContaining({ cache_key: "rls_disabled_in_public_public_by_query" }),
    );
    expect(await cli.ok(["gen", "types", "--linked"])).toMatch(/by_query: \{/);
    // The LINKED column: storage's version read at https://<ref>.<domain>.
    const version = await (await fetch(`${server.url}/storage/v1/version`)).text();
    expect(await cli.ok(["services"])).toMatch(
      new RegExp(`supabase/storage-api .*\\| v${version.replace(/\./g, "\\.")}`),
    );
  });

  it("links a branch by its name and runs SQL in its database, then unlinks", async () => {
    await cli.ok(["branches", "create", "linked-dev"]);
    const branch = async () =>
      (await mgmt(server, "GET", `/v1/projects/${ref}/branches`)).body.find(
        (b: { name: string }) => b.name === "linked-dev",
      );
    for (let i = 0; i < 300 && (await branch()).preview_project_status !== "ACTIVE_HEALTHY"; i++)
      await new Promise((r) => setTimeout(r, 200));
    const branchRef = (await branch()).project_ref;
    // The branch's direct connection is the database listener's, as the pooler's (the CLI names it `postgres`).
    const env = JSON.parse(await cli.ok(["branches", "get", "linked-dev", "-o", "json"]));
    expect(env.POSTGRES_URL_NON_POOLING).toMatch(
      new RegExp(
        `^postgresql://postgres\\.${branchRef}:[^@]*@db\\.${DOMAIN.replace(".", "\\.")}:5432/postgres`,
      ),
    );
    expect(await cli.ok(["link", "--project-ref", "linked-dev"])).toMatch(/Finished supabase link/);
    const temp = path.join(cli.dir, "supabase", ".temp", "project-ref");
    expect(readFileSync(temp, "utf8")).toBe(branchRef);
    expect(await linkedQuery("select current_user as who")).toEqual([{ who: `postgres_${branchRef}` }]);
    expect(await cli.ok(["unlink"])).toMatch(/Finished supabase unlink/);
    expect(existsSync(temp)).toBe(false);
  });
});
