import { readFileSync } from "node:fs";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import pg from "pg";
import { startStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { withAdminTransaction } from "../../src/db/transaction";
import { withCredentials } from "../../src/db/urls";
import { createLogger } from "../../src/log";
import { KeyEncryptionKey, resealColumns } from "../../src/platform/kek";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_JWT_SECRET,
  TEST_KEK,
  type TestServer,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { until } from "../helpers/until";
import { atProjectHost, mgmt } from "../management/client";
import { tenantSql, tenantSqlError } from "./sql";

/**
 * vault through SQL: the owner creates, updates and reads its secrets; anon and authenticated reach nothing;
 * the database holds ciphertext only (read as the superuser, the relation's file included) and never the key,
 * which tenant SQL in the session that holds it cannot read either; a rotated key-encryption key still opens
 * the project's vault key.
 */
describe("vault", () => {
  let server: TestServer;
  const plain = "sk_live_" + Math.random().toString(36).slice(2);
  let id = "";

  /** A data request to the project's REST API with `key` (anon's or service_role's). */
  const rpc = (fn: string, apikey: string) =>
    atProjectHost(server, server.ref, `/rest/v1/rpc/${fn}`, { apikey, body: {} });

  beforeAll(async () => {
    server = await startTestServer();
    [{ create_secret: id }] = await tenantSql(
      server,
      `select vault.create_secret('${plain}', 'stripe', 'the API key')`,
    );
  });
  afterAll(() => server.stop());

  it("gives the owner its secrets, decrypted, and takes updates", async () => {
    expect(
      await tenantSql(server, "select id, name, description, decrypted_secret from vault.decrypted_secrets"),
    ).toEqual([{ id, name: "stripe", description: "the API key", decrypted_secret: plain }]);
    await tenantSql(server, `select vault.update_secret('${id}', 'rotated-${plain}')`);
    expect(
      await tenantSql(server, "select decrypted_secret from vault.decrypted_secrets where name = 'stripe'"),
    ).toEqual([{ decrypted_secret: `rotated-${plain}` }]);
    await tenantSql(server, `select vault.update_secret('${id}', '${plain}')`);
    // The owner may only read and delete rows, as on the platform: writing goes through the functions.
    expect(await tenantSqlError(server, "insert into vault.secrets (secret) values ('x')")).toMatch(
      /permission denied/,
    );
  });

  it("is unreadable to anon and authenticated, whichever way they ask", async () => {
    for (const role of ["anon", "authenticated"]) {
      for (const query of [
        "select * from vault.secrets",
        "select decrypted_secret from vault.decrypted_secrets",
        `select vault.create_secret('x')`,
        `select vault._decrypt(secret, id) from vault.secrets`,
      ])
        expect(await tenantSqlError(server, `set role ${role}; ${query}`)).toMatch(/permission denied/);
    }
    await tenantSql(
      server,
      `create function public.peek() returns text language sql as $$
         select decrypted_secret from vault.decrypted_secrets where name = 'stripe'
       $$;
       grant execute on function public.peek() to anon, authenticated, service_role;`,
    );
    const anon = await rpc("peek", server.anonKey);
    expect(anon.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(anon.body)).not.toContain(plain);
    expect(anon.body.code).toBe("42501");
    // service_role may read vault (the platform's grant): the data API's sessions hold the key
    // (test/modules/vaultDataApi.test.ts).
    const service = await rpc("peek", server.serviceKey);
    expect(service.status).toBe(200);
    expect(service.body).toBe(plain);
  });

  it("keeps no plain text in the database, and the key in no table, dump or reach of tenant SQL", async () => {
    const rows = (await server.sql("select s::text as row from vault.secrets s")).rows;
    expect(rows.length).toBe(1);
    expect(rows[0].row).not.toContain(plain);
    // On disk: the table's file after a checkpoint (as the superuser reads it).
    await server.sql("checkpoint");
    const file = (
      await server.sql("select pg_read_binary_file(pg_relation_filepath('vault.secrets')) as bytes")
    ).rows[0].bytes as Buffer;
    expect(file.length).toBeGreaterThan(0);
    expect(file.includes(Buffer.from(plain))).toBe(false);
    // A backup of the project (Strata's dump, the file as stored) holds none of it.
    const started = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/backups`);
    expect(started.status).toBe(201);
    const location = await until(async () => {
      const { rows } = await server.controlSql(
        "select location from platform.database_backups where id = $1 and status = 'COMPLETED'",
        [started.body.id],
      );
      return rows[0]?.location as string | undefined;
    });
    const dump = gunzipSync(
      readFileSync(path.join(server.strata.ctx.config.dataDir, "backups", location)),
    ).toString();
    expect(dump).toContain("peek");
    expect(dump).not.toContain(plain);
    expect(dump).not.toMatch(/"vault"\.|_strata_public_key/);
    // The private key is sealed in the control plane; the project's database has the public half only.
    const keys = (
      await server.controlSql("select private_key from platform.vault_keys where project_ref = $1", [
        server.ref,
      ])
    ).rows;
    expect(keys[0].private_key).toMatch(/^kek1:/);

    // Tenant SQL in the session that holds the key (the SQL editor's) cannot read it...
    for (const query of [
      "select * from pg_temp.strata_vault_session",
      "reset role; copy pg_temp.strata_vault_session to stdout",
      "reset role; select * from pg_temp.strata_vault_session",
      "select vault._session_key()",
      "reset role; select vault._session_key()",
      "grant select on pg_temp.strata_vault_session to public",
      "alter table pg_temp.strata_vault_session owner to current_user",
    ])
      expect(await tenantSqlError(server, query)).toMatch(/permission denied|must be owner/);
    // ...nor catch it with functions of pgcrypto's names ahead of the real ones.
    await tenantSql(
      server,
      `create schema evil;
       create table evil.captured (what bytea);
       create function evil.pgp_pub_decrypt(message bytea, key bytea) returns text language plpgsql as $$
       begin insert into evil.captured values (key); return 'caught'; end $$;
       create function evil.decode(text, text) returns bytea language plpgsql as $$
       begin insert into evil.captured values (null); return null; end $$;`,
    );
    expect(
      await tenantSql(
        server,
        "set search_path = evil, pg_catalog, public; select decrypted_secret from vault.decrypted_secrets",
      ),
    ).toEqual([{ decrypted_secret: plain }]);
    expect((await server.sql("select count(*)::int as n from evil.captured")).rows[0].n).toBe(0);
  });

  it("encrypts in any session, and decrypts only in the sessions Strata opens for the owner", async () => {
    const password = "owner-password-vault-1";
    expect(
      (await mgmt(server, "PATCH", `/v1/projects/${server.ref}/database/password`, { body: { password } }))
        .status,
    ).toBe(200);
    const direct = new pg.Client({
      connectionString: withCredentials(server.dbUrl, `postgres_${server.ref}`, password),
    });
    await direct.connect();
    try {
      const made = await direct.query("select vault.create_secret('made-directly', 'direct') as id");
      expect(made.rows[0].id).toEqual(expect.any(String));
      await expect(direct.query("select decrypted_secret from vault.decrypted_secrets")).rejects.toThrow(
        /this session cannot decrypt/,
      );
    } finally {
      await direct.end();
    }
    expect(
      await tenantSql(server, "select decrypted_secret from vault.decrypted_secrets where name = 'direct'"),
    ).toEqual([{ decrypted_secret: "made-directly" }]);
  });

  it("opens the vault key with the new key-encryption key after a rotation", async () => {
    const next = "rotated-key-encryption-key-of-32-chars-or-more";
    const control = new pg.Pool({ connectionString: server.dbUrl.replace(/\/([^/]+)$/, "/$1_control") });
    try {
      await withAdminTransaction(control, (client) =>
        resealColumns(
          client,
          new KeyEncryptionKey(Buffer.from(next)),
          new KeyEncryptionKey(Buffer.from(TEST_KEK)),
        ),
      );
    } finally {
      await control.end();
    }
    const rotated = await startStrata(
      loadConfig({
        DATABASE_URL: server.dbUrl,
        PORT: "0",
        JWT_SECRET: TEST_JWT_SECRET,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        STRATA_KEK: next,
        STRATA_DATA_DIR: testTempDir("strata-rotated-"),
      }),
      createLogger("silent"),
    );
    try {
      const res = await fetch(`http://127.0.0.1:${rotated.port}/v1/projects/${server.ref}/database/query`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
        body: JSON.stringify({
          query: "select decrypted_secret from vault.decrypted_secrets where name = 'stripe'",
        }),
      });
      expect(await res.json()).toEqual([{ decrypted_secret: plain }]);
    } finally {
      await rotated.stop();
    }
  });
});
