import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { applyBootstrap } from "../../src/db/bootstrap";
import { createLogger } from "../../src/log";
import { ensureFirstStart } from "../../src/platform/firstStart";
import { loadKek } from "../../src/platform/kek";
import { adminQuery, controlUrlOf, createTestDatabase, dropTestDatabase } from "../helpers/db";
import { TEST_AUTHENTICATOR_PASSWORD, TEST_KEK, TEST_MANAGEMENT_TOKEN } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

/**
 * Installations made before the control plane had its own database kept it in the main database's
 * `platform` schema. Built here the way those versions built it (the same bootstrap files and first-start
 * rows, in the main database), then started with this version.
 */
async function oldLayout(url: string, dataDir: string): Promise<{ ref: string; jwtSecret: string }> {
  // The control-plane files that existed before it had its own database (up to 899), and the users' admin flag
  // that today's first-start code (which makes the old installation here) writes.
  await applyBootstrap(url, ["platform"], (version) => version < "900" || version === "940");
  const kek = loadKek("", TEST_KEK);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const first = await ensureFirstStart(client, kek, {
      adminUrl: url,
      managementToken: TEST_MANAGEMENT_TOKEN,
      authenticatorPassword: TEST_AUTHENTICATOR_PASSWORD,
      dataDir,
    });
    await client.query(
      `with o as (insert into platform.organizations (slug, name) values ('kept-org', 'Kept') returning id)
       insert into platform.organization_members (organization_id, user_id, role_name)
       select o.id, u.id, 'Owner' from o, platform.users u where u.email = 'admin@strata.local'`,
    );
    await client.query("create table public.kept (id int primary key, body text)");
    await client.query("insert into public.kept values (1, 'still here')");
    const { rows } = await client.query("select jwt_secret from platform.projects where is_default");
    return {
      ref: first.defaultRef,
      jwtSecret: kek.open(rows[0].jwt_secret, "platform.projects.jwt_secret"),
    };
  } finally {
    await client.end();
  }
}

function start(url: string, dataDir: string): Promise<RunningStrata> {
  return startStrata(
    loadConfig({
      DATABASE_URL: url,
      PORT: "0",
      STRATA_DATA_DIR: dataDir,
      STRATA_KEK: TEST_KEK,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
    }),
    createLogger("silent"),
  );
}

describe("The control plane's own database", () => {
  let url: string;
  const dataDir = testTempDir("strata-control-");
  beforeAll(async () => {
    url = await createTestDatabase({ withControl: false });
  });
  afterAll(() => dropTestDatabase(url));

  it("takes over an installation that kept the control plane in the main database, every key and row intact", async () => {
    const before = await oldLayout(url, dataDir);
    let strata = await start(url, dataDir);
    try {
      expect(strata.info.ref).toBe(before.ref);
      expect(strata.info.jwt_secret).toBe(before.jwtSecret);
      // The keys made from the kept secret still open the project's data.
      const rest = await fetch(`http://127.0.0.1:${strata.port}/rest/v1/kept?select=body`, {
        headers: { apikey: strata.info.service_role_key },
      });
      expect(await rest.json()).toEqual([{ body: "still here" }]);
      const orgs = await fetch(`http://127.0.0.1:${strata.port}/v1/organizations`, {
        headers: { authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}` },
      });
      expect(((await orgs.json()) as { slug: string }[]).map((o) => o.slug).sort()).toEqual([
        "default-org",
        "kept-org",
      ]);
    } finally {
      await strata.stop();
    }
    // Second channel: the rows are in the control database, and the main database keeps nothing of it.
    const moved = await adminQuery(
      "select (select count(*)::int from platform.organizations) as orgs, (select ref from platform.projects where is_default) as ref",
      [],
      controlUrlOf(url),
    );
    expect(moved.rows).toEqual([{ orgs: 2, ref: before.ref }]);
    const main = await adminQuery(
      "select to_regnamespace('platform') as schema, (select count(*)::int from _strata.bootstrap where set_name = 'platform') as files",
      [],
      url,
    );
    expect(main.rows).toEqual([{ schema: null, files: 0 }]);

    // A second start finds the new layout and changes nothing.
    strata = await start(url, dataDir);
    expect(strata.info.ref).toBe(before.ref);
    await strata.stop();
  });

  it("lets no role but Strata's own superuser and the log queries' reader connect to it", async () => {
    const { rows } = await adminQuery(
      `select r.rolname from pg_roles r
        where has_database_privilege(r.oid, $1, 'connect') and not r.rolsuper order by 1`,
      [`${new URL(url).pathname.slice(1)}_control`],
    );
    // The reader reads only the log views (test/security/logQueries.test.ts).
    expect(rows).toEqual([{ rolname: "strata_log_reader" }]);
  });
});
