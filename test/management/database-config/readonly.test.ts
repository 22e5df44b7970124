import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";
import { AUTOSCALE_DEFAULTS, grownDiskSize } from "../../../src/management/database-config/autoscale";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("Management API: read-only mode and disk", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer({ PROJECT_DISK_QUOTA_MB: "1000", DISK_CHECK_MS: "200" });
    base = `/v1/projects/${server.ref}`;
    await server.sql("create table public.items (id serial primary key, v text)");
  });
  afterAll(() => server.stop());

  /** Writes a row through the REST API as anon: true when it was written. */
  async function restWrite(): Promise<boolean> {
    const before = (await server.sql("select count(*)::int as n from public.items")).rows[0].n;
    const res = await fetch(`${server.url}/rest/v1/items`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ v: "x" }),
    });
    const after = (await server.sql("select count(*)::int as n from public.items")).rows[0].n;
    expect(res.status === 201).toBe(after === before + 1);
    return res.status === 201;
  }
  /** Signs a new user up through the auth service: true when the user was written. */
  async function signUp(): Promise<boolean> {
    const email = `ro-${Math.random().toString(36).slice(2)}@example.test`;
    const res = await fetch(`${server.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ email, password: "a-long-password-1" }),
    });
    const { rows } = await server.sql("select count(*)::int as n from auth.users where email = $1", [email]);
    expect(res.status === 200).toBe(rows[0].n === 1);
    return res.status === 200;
  }
  async function until(enabled: boolean) {
    for (;;) {
      const got = await mgmt(server, "GET", `${base}/readonly`);
      if (got.body.enabled === enabled) return got.body;
      await sleep(100);
    }
  }

  it("measures the database and the volume for real", async () => {
    const util = await mgmt(server, "GET", `${base}/config/disk/util`);
    expect(util.status).toBe(200);
    const size = Number((await server.sql("select pg_database_size(current_database()) as s")).rows[0].s);
    expect(Math.abs(util.body.metrics.fs_used_bytes - size)).toBeLessThan(1024 * 1024);
    expect(util.body.metrics.fs_size_bytes).toBe(1000 * 1024 * 1024);
    expect(util.body.metrics.fs_avail_bytes).toBeLessThanOrEqual(
      1000 * 1024 * 1024 - util.body.metrics.fs_used_bytes,
    );
  });

  it("turns read-only on and off by the endpoint", async () => {
    expect((await mgmt(server, "GET", `${base}/readonly`)).body).toMatchObject({ enabled: false });
    expect(await restWrite()).toBe(true);
    const on = await mgmt(server, "PUT", `${base}/readonly`, { body: { enabled: true } });
    expect(on.body).toMatchObject({ enabled: true, override_enabled: false });
    expect(await restWrite()).toBe(false);
    expect(await signUp()).toBe(false);
    expect((await mgmt(server, "PUT", `${base}/readonly`, { body: { enabled: false } })).body.enabled).toBe(
      false,
    );
    expect(await restWrite()).toBe(true);
    expect(await signUp()).toBe(true);
    expect((await mgmt(server, "PUT", `${base}/readonly`, { body: { enabled: "yes" } })).status).toBe(400);
  });

  it("turns read-only on past the disk threshold; temporary-disable lifts it for 15 minutes", async () => {
    // A small quota: the database is a few megabytes under 95 % of it, then grows past it.
    const used = Number((await server.sql("select pg_database_size(current_database()) as s")).rows[0].s);
    server.strata.ctx.config.projectDiskQuotaBytes = Math.floor((used + 2 * 1024 * 1024) / 0.95);
    await sleep(600);
    expect((await mgmt(server, "GET", `${base}/readonly`)).body.enabled).toBe(false);
    await server.sql(
      "create table public.filler as select repeat(md5(i::text), 20) as t from generate_series(1, 8000) i",
    );
    await until(true);
    expect(await restWrite()).toBe(false);

    const lifted = await mgmt(server, "POST", `${base}/readonly/temporary-disable`);
    expect(lifted.status).toBe(201);
    const state = (await mgmt(server, "GET", `${base}/readonly`)).body;
    expect(state).toMatchObject({ enabled: false, override_enabled: true });
    const window = Date.parse(state.override_active_until) - Date.now();
    expect(window).toBeGreaterThan(14 * 60_000);
    expect(window).toBeLessThanOrEqual(15 * 60_000);
    expect(await restWrite()).toBe(true);

    // The window passes (moved into the past in the control plane): read-only mode comes back by itself.
    await server.controlSql(
      `update platform.project_settings set value = jsonb_set(value, '{override_active_until}', to_jsonb((now() - interval '1 second')::text))
        where project_ref = $1 and kind = 'readonly'`,
      [server.ref],
    );
    await sleep(600);
    const back = (await mgmt(server, "GET", `${base}/readonly`)).body;
    expect(back).toMatchObject({ enabled: true, override_enabled: false });
    expect(await restWrite()).toBe(false);

    // Space freed: the next check lifts it.
    server.strata.ctx.config.projectDiskQuotaBytes = 1000 * 1024 * 1024;
    await until(false);
    expect(await restWrite()).toBe(true);
  });

  it("records the disk config and refuses a smaller disk", async () => {
    expect((await mgmt(server, "GET", `${base}/config/disk`)).body.attributes.size_gb).toBe(8);
    const grow = await mgmt(server, "POST", `${base}/config/disk`, {
      body: {
        attributes: { size_gb: 12, type: "gp3" },
      },
    });
    expect(grow.status).toBe(201);
    expect((await mgmt(server, "GET", `${base}/config/disk`)).body.attributes).toMatchObject({ size_gb: 12 });
    const shrink = await mgmt(server, "POST", `${base}/config/disk`, {
      body: {
        attributes: { size_gb: 4, type: "gp3" },
      },
    });
    expect(shrink.status).toBe(400);
    expect(
      (
        await mgmt(server, "POST", `${base}/config/disk`, {
          body: { attributes: { size_gb: 20, type: "floppy" } },
        })
      ).status,
    ).toBe(400);
  });

  it("validates and stores the disk autoscale config", async () => {
    expect((await mgmt(server, "GET", `${base}/config/disk/autoscale`)).body).toEqual({
      growth_percent: 50,
      min_increment_gb: 4,
      max_size_gb: 60,
      enabled: false,
    });
    for (const body of [
      { growth_percent: -1 },
      { max_size_gb: 0 },
      { min_increment_gb: 1.5 },
      { enabled: "yes" },
      { unknown: 1 },
      // Smaller than the disk's size_gb (12, set above).
      { max_size_gb: 10 },
      { enabled: true, growth_percent: 0, min_increment_gb: 0 },
    ]) {
      const refused = await mgmt(server, "PUT", `${base}/config/disk/autoscale`, { body: body });
      expect(refused.status).toBe(400);
    }
    expect((await mgmt(server, "GET", `${base}/config/disk/autoscale`)).body.enabled).toBe(false);
    const put = await mgmt(server, "PUT", `${base}/config/disk/autoscale`, { body: { max_size_gb: 20 } });
    expect(put.status).toBe(200);
    expect((await mgmt(server, "GET", `${base}/config/disk/autoscale`)).body).toEqual({
      growth_percent: 50,
      min_increment_gb: 4,
      max_size_gb: 20,
      enabled: false,
    });
  });

  it("grows the disk instead of going read-only when autoscaling is on, up to its max", async () => {
    const on = await mgmt(server, "PUT", `${base}/config/disk/autoscale`, {
      body: {
        enabled: true,
        growth_percent: 50,
        min_increment_gb: 0,
      },
    });
    expect(on.body).toMatchObject({ enabled: true, growth_percent: 50, min_increment_gb: 0 });
    // A quota the database already fills past read-only mode's 95 %: the disk grows by half instead.
    const used = Number((await server.sql("select pg_database_size(current_database()) as s")).rows[0].s);
    const quota = Math.floor(used / 0.97);
    server.strata.ctx.config.projectDiskQuotaBytes = quota;
    let size = 0;
    for (let i = 0; i < 100 && size <= quota; i++) {
      size = (await mgmt(server, "GET", `${base}/config/disk/util`)).body.metrics.fs_size_bytes;
      if (size <= quota) await sleep(100);
    }
    expect(size).toBe(Math.floor(quota * 1.5));
    await sleep(600);
    expect((await mgmt(server, "GET", `${base}/readonly`)).body.enabled).toBe(false);
    expect(await restWrite()).toBe(true);
    const { rows } = await server.controlSql(
      "select value from platform.project_settings where project_ref = $1 and kind = 'disk_autoscaled'",
      [server.ref],
    );
    expect(rows[0].value.size_bytes).toBe(size);

    // Growth: by growth_percent, at least min_increment_gb, never past max_size_gb or the volume.
    const GIB = 1024 ** 3;
    const config = { ...AUTOSCALE_DEFAULTS, enabled: true, max_size_gb: 10 };
    expect(grownDiskSize(8 * GIB, { ...config, min_increment_gb: 0 }, 100 * GIB)).toBe(10 * GIB);
    expect(grownDiskSize(4 * GIB, { ...config, growth_percent: 10, min_increment_gb: 1 }, 100 * GIB)).toBe(
      5 * GIB,
    );
    expect(grownDiskSize(4 * GIB, { ...config, min_increment_gb: 0 }, 100 * GIB)).toBe(6 * GIB);
    expect(grownDiskSize(10 * GIB, config, 100 * GIB)).toBe(10 * GIB);
    expect(grownDiskSize(4 * GIB, { ...config, min_increment_gb: 0 }, 5 * GIB)).toBe(5 * GIB);
  });
});
