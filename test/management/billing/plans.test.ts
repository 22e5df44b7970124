import { setOrganizationPlan } from "../../../src/management/billing/plans";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt, waitForStatus } from "../client";

describe("organization plans, entitlements and add-ons", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
  });
  afterAll(() => server.stop());

  const setPlan = (plan: "free" | "pro" | "team" | "enterprise") =>
    setOrganizationPlan(server.strata.ctx.platformPool, "default-org", plan);
  const connectionLimit = async () =>
    (await server.sql("select rolconnlimit from pg_roles where rolname = $1", [`postgres_${server.ref}`]))
      .rows[0].rolconnlimit;
  /** The data pool's size as the project's runtime opened it (after the add-on's change reached it). */
  const dataPoolMax = async () => {
    const runtime = await server.strata.ctx.registry.get(server.ref);
    return (runtime!.dataPool as unknown as { options: { max: number } }).options.max;
  };

  it("puts the installation's organization on enterprise and new organizations on free", async () => {
    const own = await mgmt(server, "GET", "/v1/organizations/default-org");
    expect(own.body.plan).toBe("enterprise");
    const entitlements = (await mgmt(server, "GET", "/v1/organizations/default-org/entitlements")).body
      .entitlements;
    expect(entitlements.every((e: any) => e.hasAccess)).toBe(true);

    const created = (await mgmt(server, "POST", "/v1/organizations", { body: { name: "Free Co" } })).body;
    expect((await mgmt(server, "GET", `/v1/organizations/${created.slug}`)).body.plan).toBe("free");
    const free = (await mgmt(server, "GET", `/v1/organizations/${created.slug}/entitlements`)).body
      .entitlements;
    const access = Object.fromEntries(free.map((e: any) => [e.feature.key, e.hasAccess]));
    expect(access).toMatchObject({ "projects.create": true, branching: false, log_drains: false });
    expect(free.find((e: any) => e.feature.key === "log.retention_days").config.value).toBe(1);
  });

  it("refuses with 402 what the free plan lacks, and allows it once the plan changes", async () => {
    const ref = server.ref;
    await setPlan("free");
    const drain = {
      body: {
        data: {
          attributes: { name: "d", backend_type: "webhook", config: { url: "http://127.0.0.1:9/x" } },
        },
      },
    };
    const refused = [
      await mgmt(server, "POST", `/v2/projects/${ref}/analytics/log-drains`, drain),
      await mgmt(server, "POST", `/v1/projects/${ref}/branches`, { body: { branch_name: "nope" } }),
      await mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/initialize`, {
        body: { custom_hostname: "api.example.org" },
      }),
      await mgmt(server, "GET", `/v1/projects/${ref}/database/backups/schedule`),
      await mgmt(server, "PATCH", `/v1/projects/${ref}/billing/addons`, {
        body: { addon_type: "custom_domain", addon_variant: "cd_default" },
      }),
    ];
    expect(refused.map((r) => r.status)).toEqual([402, 402, 402, 402, 402]);
    for (const r of refused) expect(r.body.message).toMatch(/^Payment required: .*free plan/);
    // The spec lists 400 for the vanity subdomain on a plan without it.
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/vanity-subdomain`)).status).toBe(400);
    // Logs older than the free plan's day of retention.
    const end = new Date(Date.now() - 36 * 3600_000);
    const old = await mgmt(
      server,
      "GET",
      `/v1/projects/${ref}/analytics/endpoints/logs?iso_timestamp_start=${new Date(end.getTime() - 3600_000).toISOString()}&iso_timestamp_end=${end.toISOString()}`,
    );
    expect(old.status).toBe(402);
    // Nothing was written by the refusals.
    const { rows } = await server.controlSql(
      "select (select count(*)::int from platform.log_drains where project_ref = $1) as drains, (select count(*)::int from platform.project_hostnames where project_ref = $1) as hostnames",
      [ref],
    );
    expect(rows[0]).toEqual({ drains: 0, hostnames: 0 });

    // The free plan's 100 edge functions per project (the rows stand for deployed ones).
    await server.controlSql(
      "insert into platform.edge_functions (project_ref, slug, name) select $1, 'f' || i, 'f' || i from generate_series(1, 100) i",
      [ref],
    );
    const deploy = await fetch(`${server.url}/v1/projects/${ref}/functions?slug=one-more`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${server.managementToken}`,
        "content-type": "application/typescript",
      },
      body: "Deno.serve(() => new Response('hi'));",
    });
    expect(deploy.status).toBe(402);
    expect((await deploy.json()).message).toMatch(/100 edge functions/);
    await server.controlSql("delete from platform.edge_functions where project_ref = $1", [ref]);

    await setPlan("pro");
    const created = await mgmt(server, "POST", `/v2/projects/${ref}/analytics/log-drains`, drain);
    expect(created.status).toBe(201);
    await mgmt(server, "DELETE", `/v2/projects/${ref}/analytics/log-drains/${created.body.data.id}`);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/vanity-subdomain`)).status).toBe(200);
    // Pro does not include custom domains: the add-on opens them, and removing it stops serving the name.
    const init = (body?: unknown) =>
      mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/initialize`, {
        body: body ?? { custom_hostname: "api.example.org" },
      });
    expect((await init()).status).toBe(402);
    const addon = await mgmt(server, "PATCH", `/v1/projects/${ref}/billing/addons`, {
      body: { addon_type: "custom_domain", addon_variant: "cd_default" },
    });
    expect(addon).toMatchObject({ status: 200, body: {} });
    expect((await init()).status).toBe(201);
    const listed = (await mgmt(server, "GET", `/v1/projects/${ref}/billing/addons`)).body;
    expect(listed.selected_addons).toEqual([
      expect.objectContaining({
        type: "custom_domain",
        variant: expect.objectContaining({ id: "cd_default" }),
      }),
    ]);
    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}/billing/addons/cd_default`)).status).toBe(200);
    expect(
      (
        await server.controlSql(
          "select count(*)::int as n from platform.project_hostnames where project_ref = $1",
          [ref],
        )
      ).rows[0].n,
    ).toBe(0);
    expect((await init()).status).toBe(402);
    await setPlan("enterprise");
  });

  it("sizes the project's data pool and its owner's connection limit by the compute add-on", async () => {
    const ref = server.ref;
    const compute = (variant: string) =>
      mgmt(server, "PATCH", `/v1/projects/${ref}/billing/addons`, {
        body: { addon_type: "compute_instance", addon_variant: variant },
      });
    const pooler = async () =>
      (await mgmt(server, "GET", `/v1/projects/${ref}/config/database/pooler`)).body[0].default_pool_size;
    expect(await connectionLimit()).toBe(-1);
    expect(await dataPoolMax()).toBe(10);

    await setPlan("free");
    expect((await compute("ci_large")).status).toBe(402);
    expect(await connectionLimit()).toBe(-1);
    expect((await compute("ci_micro")).status).toBe(200);
    expect(await connectionLimit()).toBe(60);
    expect(await pooler()).toBe(15);

    await setPlan("pro");
    expect((await compute("ci_large")).status).toBe(200);
    expect(await connectionLimit()).toBe(160);
    expect(await pooler()).toBe(20);
    expect(await dataPoolMax()).toBe(20);
    // A free organization cannot hold a project with a paid add-on: the transfer is refused, nothing moves.
    const target = (await mgmt(server, "POST", "/v1/organizations", { body: { name: "Free Target" } })).body;
    const to = {
      body: { data: { type: "project_transfer", attributes: { target_organization_slug: target.slug } } },
    };
    const preview = await mgmt(server, "POST", `/v2/projects/${ref}/transfers/previews`, to);
    expect(preview.body.data.attributes).toMatchObject({ valid: false, errors: [{ key: "addons" }] });
    expect((await mgmt(server, "POST", `/v2/projects/${ref}/transfers`, to)).status).toBe(400);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).body.organization_slug).toBe("default-org");

    // Removing the size rolls back to the previous one, then to Strata's baseline.
    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}/billing/addons/ci_large`)).status).toBe(200);
    expect(await connectionLimit()).toBe(60);
    expect(await dataPoolMax()).toBe(15);
    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}/billing/addons/ci_micro`)).status).toBe(200);
    expect(await connectionLimit()).toBe(-1);
    expect(await dataPoolMax()).toBe(10);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/billing/addons`)).body.selected_addons).toEqual(
      [],
    );

    // A new project's desired_instance_size is its compute add-on from the start.
    const create = (org: string, size: string) =>
      mgmt(server, "POST", "/v1/projects", {
        body: {
          name: `sized ${size}`,
          organization_slug: org,
          db_pass: "Sized-pw-123",
          desired_instance_size: size,
        },
      });
    const freeOrg = (await mgmt(server, "POST", "/v1/organizations", { body: { name: "Small Budget" } }))
      .body;
    expect((await create(freeOrg.slug, "large")).status).toBe(402);
    expect((await create("default-org", "huge")).status).toBe(400);
    const sized = await create("default-org", "small");
    expect(sized.status).toBe(201);
    await waitForStatus(server, sized.body.ref, "ACTIVE_HEALTHY");
    const limit = await server.sql("select rolconnlimit from pg_roles where rolname = $1", [
      `postgres_${sized.body.ref}`,
    ]);
    expect(limit.rows[0].rolconnlimit).toBe(90);
    const addons = (await mgmt(server, "GET", `/v1/projects/${sized.body.ref}/billing/addons`)).body;
    expect(addons.selected_addons.map((a: any) => a.variant.id)).toEqual(["ci_small"]);
    expect((await mgmt(server, "DELETE", `/v1/projects/${sized.body.ref}`)).status).toBe(200);

    const bad = [
      await compute("ci_nonsense"),
      await mgmt(server, "PATCH", `/v1/projects/${ref}/billing/addons`, { body: { addon_type: "ipv4" } }),
      await mgmt(server, "DELETE", `/v1/projects/${ref}/billing/addons/ci_large`),
    ];
    expect(bad.map((r) => r.status)).toEqual([400, 400, 404]);
    await setPlan("enterprise");
  });
});
