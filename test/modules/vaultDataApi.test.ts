import type { SupabaseClient } from "@supabase/supabase-js";
import { vaultSessionRow } from "../../src/modules/vault";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql } from "../graphql/client";
import { mgmt } from "../management/client";
import { clientFor, userToken } from "../rest/fixtures";
import { tenantSql } from "./sql";

/**
 * vault.decrypted_secrets in the data API's sessions (src/modules/vault.ts, openDataVaultSession): supabase-js
 * (and GraphQL) with the service key reads a secret through the tenant's function, and anyone through the owner's
 * security-definer function; anon and authenticated are refused, on the very connection that just served
 * service_role, and tenant code running as them there reaches no key. Checked as the superuser too: the key is
 * in no table of the database, and no statement of any session shows it.
 */
describe("vault in the data API's sessions", () => {
  let server: TestServer;
  const plain = "sk_live_" + Math.random().toString(36).slice(2);
  let authenticatedToken = "";

  const client = (key: string, token?: string) =>
    clientFor(server, key, token) as SupabaseClient<any, any, any>;

  beforeAll(async () => {
    server = await startTestServer();
    // One connection in the data pool: every request below runs on the same backend, in turn.
    const pooler = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/database/pooler`, {
      body: { default_pool_size: 1 },
    });
    expect(pooler.status).toBe(200);
    await tenantSql(
      server,
      `select vault.create_secret('${plain}', 'stripe', 'the API key');
       create function public.peek() returns text language sql as $$
         select decrypted_secret from vault.decrypted_secrets where name = 'stripe'
       $$;
       create function public.peek_definer() returns text language sql security definer
         set search_path = pg_catalog as $$
         select decrypted_secret from vault.decrypted_secrets where name = 'stripe'
       $$;
       create function public.backend() returns int language sql as $$ select pg_backend_pid() $$;
       -- The worst a tenant could give anon: any SQL, run as the caller (an owner's mistake, not a hole).
       create function public.run(q text) returns text language plpgsql as $$
         declare answer text;
         begin execute q into answer; return answer; end $$;
       grant execute on function public.peek(), public.peek_definer(), public.backend(), public.run(text)
         to anon, authenticated, service_role;
       notify pgrst, 'reload schema';`,
    );
    authenticatedToken = await userToken(server, "11111111-1111-4111-8111-111111111111");
    // The pool of one, and the functions in the REST schema cache.
    for (let i = 0; i < 100; i++) {
      const runtime = await server.strata.ctx.registry.get(server.ref);
      const { error } = await client(server.serviceKey).rpc("backend");
      if (runtime!.dataPool.options.max === 1 && !error) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  afterAll(() => server.stop());

  it("decrypts for service_role, and for anyone through the owner's security-definer function", async () => {
    const service = await client(server.serviceKey).rpc("peek");
    expect(service.error).toBeNull();
    expect(service.data).toBe(plain);
    for (const caller of [client(server.anonKey), client(server.anonKey, authenticatedToken)]) {
      const definer = await caller.rpc("peek_definer");
      expect(definer.error).toBeNull();
      expect(definer.data).toBe(plain);
    }
  });

  it("decrypts through GraphQL for service_role and refuses anon there", async () => {
    expect(await graphql(server, "mutation { peek }", { key: server.serviceKey })).toEqual({
      data: { peek: plain },
    });
    const anon = await graphql(server, "mutation { peek }");
    expect(JSON.stringify(anon)).not.toContain(plain);
    expect(anon.errors?.[0].message).toMatch(/permission denied/);
  });

  it("refuses anon and authenticated on the connection that just served service_role", async () => {
    for (const caller of [client(server.anonKey), client(server.anonKey, authenticatedToken)]) {
      const { data: servicePid } = await client(server.serviceKey).rpc("backend");
      expect((await client(server.serviceKey).rpc("peek")).data).toBe(plain);
      expect((await caller.rpc("backend")).data).toBe(servicePid);
      const refused = await caller.rpc("peek");
      expect(refused.data).toBeNull();
      expect(refused.error?.code).toBe("42501");
      expect(refused.error?.message).toMatch(/permission denied/);
      expect(JSON.stringify(refused)).not.toContain(plain);
      // Tenant SQL running as them in that session reaches neither the values nor the key.
      for (const q of [
        "select decrypted_secret from vault.decrypted_secrets",
        "select vault._decrypt(secret, id) from vault.secrets",
        "select key::text from pg_temp.strata_vault_session",
        "select vault._session_key()::text",
        "select vault._pgp_decrypt(''::bytea, ''::bytea)",
        "select vault._strata_session_seal()::text",
        "grant select on pg_temp.strata_vault_session to public",
      ]) {
        const { data, error } = await caller.rpc("run", { q });
        expect(data).toBeNull();
        expect(error?.message).toMatch(/permission denied/);
      }
      // No setting holds it either.
      const settings = await caller.rpc("run", {
        q: "select string_agg(name || '=' || setting, ',') from pg_settings",
      });
      expect(settings.error).toBeNull();
      const keyHex = await privateKeyHex();
      expect(String(settings.data)).not.toContain(keyHex.slice(0, 64));
      // service_role still reads on the same connection afterwards.
      expect((await client(server.serviceKey).rpc("peek")).data).toBe(plain);
    }
  });

  /** The project's private key as hex, as Strata loads it into sessions. */
  async function privateKeyHex(): Promise<string> {
    const runtime = await server.strata.ctx.registry.get(server.ref);
    return (await vaultSessionRow(runtime!)).trim().replace(/^\\\\x/, "");
  }

  it("keeps the key in no table of the database and out of every session's statement (as the superuser)", async () => {
    expect((await client(server.serviceKey).rpc("peek")).data).toBe(plain);
    const keyHex = await privateKeyHex();
    expect(keyHex).toMatch(/^[0-9a-f]{1000,}$/);
    // From the secret half (the key packet's end: d, p, q, u), not the public half the database rightly holds.
    const needle = keyHex.slice(-200, -136);
    const { rows: tables } = await server.sql(
      `select c.oid::regclass::text as name from pg_class c
        where c.relkind in ('r', 'm', 'p') and c.relpersistence <> 't'`,
    );
    expect(tables.length).toBeGreaterThan(10);
    const holding: string[] = [];
    for (const { name } of tables) {
      const { rows } = await server.sql(`select exists (select from ${name} x where x::text ~* $1) as has`, [
        needle,
      ]);
      if (rows[0].has) holding.push(name);
    }
    expect(holding).toEqual([]);
    // The data pool's session holds it in a temporary table of strata_vault's, readable by no other role.
    const { rows: keyTables } = await server.sql(
      `select c.relowner::regrole::text as owner, c.relacl::text as acl from pg_class c
        where c.relname = 'strata_vault_session'`,
    );
    expect(keyTables.length).toBeGreaterThan(0);
    for (const t of keyTables) {
      expect(t.owner).toBe("strata_vault");
      expect(t.acl ?? "").not.toMatch(/authenticator|anon|authenticated|service_role|postgres_/);
    }
    const { rows: statements } = await server.sql(
      "select count(*)::int as n from pg_stat_activity where query ~* $1",
      [needle],
    );
    expect(statements).toEqual([{ n: 0 }]);
  });
});
