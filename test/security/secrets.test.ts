import { mkdtempSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadKek } from "../../src/platform/kek";
import { startTestServer, TEST_JWT_SECRET, type TestServer } from "../helpers/server";
import { mgmt, waitForStatus } from "../management/client";

describe("Secrets at rest", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("keeps no secret's value in the control plane's tables", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "sealed", organization_slug: "default-org", db_pass: "sealed-project-password" },
    });
    const ref = created.body.ref as string;
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");
    expect(
      (
        await mgmt(server, "POST", `/v1/projects/${ref}/secrets`, {
          body: [{ name: "STRIPE", value: "sk_live_sealed" }],
        })
      ).status,
    ).toBe(201);
    const values = [
      TEST_JWT_SECRET,
      (await mgmt(server, "GET", `/v1/projects/${ref}/postgrest`)).body.jwt_secret,
      (await mgmt(server, "GET", `/v1/projects/${ref}/pgsodium`)).body.root_key,
      "strata-test-authenticator",
      "sealed-project-password",
      server.dbUrl,
    ];
    expect(values.every((v) => typeof v === "string" && v.length >= 16)).toBe(true);

    // Everything the control plane stores, as text: what a dump of its schema would hold.
    const tables = await server.sql(
      "select format('%I.%I', schemaname, tablename) as t from pg_tables where schemaname = 'platform'",
    );
    let dump = "";
    for (const { t } of tables.rows) {
      const rows = await server.sql(
        `select coalesce(string_agg(row_to_json(x)::text, E'\\n'), '') as d from ${t} x`,
      );
      dump += rows.rows[0].d + "\n";
    }
    for (const value of values) expect(dump.includes(value)).toBe(false);
    expect(dump).not.toContain("sk_live_sealed");
    const sealed = await server.sql(
      `select jwt_secret, sql_role_password, read_role_password from platform.projects where ref = $1`,
      [ref],
    );
    for (const v of Object.values(sealed.rows[0])) expect(String(v)).toMatch(/^kek1:/);

    // And the secrets still work: the new project answers its own keys.
    const keys = await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`);
    expect(keys.status).toBe(200);
  });

  it("makes the key file of a data directory readable by its owner only", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "strata-kek-"));
    const kek = loadKek(dir, undefined);
    expect(statSync(path.join(dir, "kek")).mode & 0o777).toBe(0o600);
    const sealed = kek.seal("value", "purpose");
    expect(loadKek(dir, undefined).open(sealed, "purpose")).toBe("value");
    expect(() => kek.open(sealed, "another purpose")).toThrow();
  });
});
