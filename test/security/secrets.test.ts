import { execFile } from "node:child_process";
import { statSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { loadKek } from "../../src/platform/kek";
import { startTestServer, TEST_JWT_SECRET, TEST_KEK, type TestServer } from "../helpers/server";
import { mgmt, waitForStatus } from "../management/client";
import { testTempDir } from "../helpers/tempDir";

describe("Secrets at rest", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("opens sealed secrets on every control-plane connection, including those opened before start-up sealed", async () => {
    // Parallel calls check out every connection of the control-plane pool.
    const created = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        mgmt(server, "POST", `/v1/projects/${server.ref}/secrets`, {
          body: [{ name: `PARALLEL_${i}`, value: "v" }],
        }),
      ),
    );
    expect(created.map((r) => r.status)).toEqual(Array(8).fill(201));
  });

  it("keeps no secret's value in the control plane's tables", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "sealed", organization_slug: "default-org", db_pass: "sealed-project-password" },
    });
    const ref = created.body.ref as string;
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");
    expect(
      (
        await mgmt(server, "PATCH", `/v1/projects/${ref}/config/auth`, {
          body: { smtp_pass: "smtp-password-sealed", external_keycloak_secret: "oidc-client-secret-sealed" },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await mgmt(server, "POST", `/v1/projects/${ref}/secrets`, {
          body: [{ name: "STRIPE", value: "sk_live_sealed" }],
        })
      ).status,
    ).toBe(201);
    const secretKey = await mgmt(server, "POST", `/v1/projects/${ref}/api-keys?reveal=true`, {
      body: { type: "secret", name: "sealed_key" },
    });
    expect(secretKey.body.api_key).toMatch(/^sb_secret_/);
    const withKey = await mgmt(
      server,
      "GET",
      `/v1/projects/${ref}/api-keys/${secretKey.body.id}?reveal=true`,
    );
    expect(withKey.body.api_key).toBe(secretKey.body.api_key);
    const values = [
      secretKey.body.api_key,
      TEST_JWT_SECRET,
      (await mgmt(server, "GET", `/v1/projects/${ref}/postgrest`)).body.jwt_secret,
      (await mgmt(server, "GET", `/v1/projects/${ref}/pgsodium`)).body.root_key,
      "strata-test-authenticator",
      "sealed-project-password",
      "smtp-password-sealed",
      "oidc-client-secret-sealed",
      server.dbUrl,
    ];
    expect(values.every((v) => typeof v === "string" && v.length >= 16)).toBe(true);

    // Everything the control plane's database stores, as text: what a dump of it would hold.
    const tables = await server.controlSql(
      `select format('%I.%I', schemaname, tablename) as t from pg_tables
        where schemaname not in ('pg_catalog', 'information_schema')`,
    );
    let dump = "";
    for (const { t } of tables.rows) {
      const rows = await server.controlSql(
        `select coalesce(string_agg(row_to_json(x)::text, E'\\n'), '') as d from ${t} x`,
      );
      dump += rows.rows[0].d + "\n";
    }
    expect(dump).toContain(ref);
    for (const value of values) expect(dump.includes(value)).toBe(false);
    expect(dump).not.toContain("sk_live_sealed");
    const signing = await mgmt(server, "POST", `/v1/projects/${ref}/config/auth/signing-keys`, {
      body: { algorithm: "ES256" },
    });
    expect(signing.status).toBe(201);
    const jwks = await server.controlSql("select private_jwk from platform.signing_keys where id = $1", [
      signing.body.id,
    ]);
    expect(jwks.rows[0].private_jwk).toMatch(/^kek1:/);

    const sealed = await server.controlSql(
      `select jwt_secret, sql_role_password, read_role_password from platform.projects where ref = $1`,
      [ref],
    );
    for (const v of Object.values(sealed.rows[0])) expect(String(v)).toMatch(/^kek1:/);

    // And the secrets still work: the new project answers its own keys.
    const keys = await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`);
    expect(keys.status).toBe(200);
  });

  it("re-seals every secret under a new key from the command line, and refuses to start with a wrong key", async () => {
    // A server of its own: nothing else of this file's work touches its secrets while they are re-sealed.
    const own = await startTestServer();
    const cli = (env: Record<string, string>) =>
      promisify(execFile)(
        path.resolve("node_modules/.bin/node"),
        ["--import", "tsx", "src/cli/main.ts", "kek", "rotate"],
        {
          env: {
            ...process.env,
            DATABASE_URL: own.dbUrl,
            AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
            STRATA_DATA_DIR: testTempDir("strata-rotate-"),
            ...env,
          },
        },
      );
    // Without the installation's key (a fresh key file): refused, with the fix named.
    const wrong = await cli({}).catch((e: { stderr: string }) => e);
    expect((wrong as { stderr: string }).stderr).toMatch(
      /key-encryption key does not open this installation's secrets/,
    );

    const smtp = await mgmt(own, "PATCH", `/v1/projects/${own.ref}/config/auth`, {
      body: { smtp_pass: "smtp-password-to-reseal" },
    });
    expect(smtp.status).toBe(200);

    const next = "the-next-key-encryption-key-of-32-chars";
    await cli({ STRATA_KEK: TEST_KEK, STRATA_NEW_KEK: next });
    const auth = await own.controlSql(
      "select config->>'smtp_pass' as pass from platform.auth_config where project_ref = $1",
      [own.ref],
    );
    expect(loadKek("", next).open(auth.rows[0].pass, "platform.auth_config.smtp_pass")).toBe(
      "smtp-password-to-reseal",
    );
    const { rows } = await own.controlSql("select jwt_secret from platform.projects where is_default");
    expect(loadKek("", next).open(rows[0].jwt_secret, "platform.projects.jwt_secret")).toBe(TEST_JWT_SECRET);
    expect(() => loadKek("", TEST_KEK).open(rows[0].jwt_secret, "platform.projects.jwt_secret")).toThrow();
    await own.stop();
  });

  it("makes the key file of a data directory readable by its owner only", () => {
    const dir = testTempDir("strata-kek-");
    const kek = loadKek(dir, undefined);
    expect(statSync(path.join(dir, "kek")).mode & 0o777).toBe(0o600);
    const sealed = kek.seal("value", "purpose");
    expect(loadKek(dir, undefined).open(sealed, "purpose")).toBe("value");
    expect(() => kek.open(sealed, "another purpose")).toThrow();
  });
});
