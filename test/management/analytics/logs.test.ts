import http from "node:http";
import type { AddressInfo } from "node:net";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt, waitForStatus } from "../client";
import { allowLoopbackForTests } from "../../../src/net/outbound";

// The drain's sink listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

interface Delivery {
  status: number;
  headers: http.IncomingHttpHeaders;
  events: { event_message: string; source: string }[];
}

/** A local HTTP receiver for log drains; answers `failures` deliveries with 500 before accepting. */
function receiver() {
  const deliveries: Delivery[] = [];
  let failures = 0;
  const server = http.createServer((req, res) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => {
      const status = failures > 0 ? 500 : 200;
      if (failures > 0) failures--;
      deliveries.push({ status, headers: req.headers, events: JSON.parse(text) });
      res.writeHead(status).end();
    });
  });
  return {
    server,
    deliveries,
    failNext(n: number) {
      failures = n;
    },
  };
}

async function until<T>(what: string, check: () => T | undefined | false): Promise<T> {
  for (let i = 0; i < 150; i++) {
    const value = check();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("Logs and log drains", () => {
  let server: TestServer;
  const sink = receiver();
  let sinkUrl: string;
  const range = () => ({
    iso_timestamp_start: new Date(Date.now() - 10 * 60_000).toISOString(),
    iso_timestamp_end: new Date(Date.now() + 60_000).toISOString(),
  });
  const logs = (sql: string, ref = server.ref) =>
    mgmt(
      server,
      "GET",
      `/v1/projects/${ref}/analytics/endpoints/logs?${new URLSearchParams({ sql, ...range() })}`,
    );
  const rest = (path: string) =>
    fetch(`${server.url}/rest/v1/${path}`, { headers: { apikey: server.anonKey } });

  beforeAll(async () => {
    await new Promise<void>((r) => sink.server.listen(0, "127.0.0.1", () => r()));
    sinkUrl = `http://127.0.0.1:${(sink.server.address() as AddressInfo).port}/ingest`;
    server = await startTestServer();
    await server.sql("create table marker (id int); grant select on marker to anon");
  });
  afterAll(async () => {
    await server.stop();
    sink.server.close();
  });

  it("answers a log query with the requests just made, from the project's own events only", async () => {
    await until("the table", async () => (await rest("marker")).status === 200 || undefined);
    expect((await rest("marker?select=id&apikey=not-logged")).status).toBe(200);
    expect((await rest("no_such_table")).status).toBe(404);
    const res = await logs(
      "select event_message, metadata -> 'response' ->> 'status_code' as status from edge_logs where event_message like '%/rest/v1/%' order by timestamp",
    );
    expect(res.status).toBe(200);
    expect(res.body.error).toBeNull();
    expect(res.body.result).toEqual(
      expect.arrayContaining([
        { event_message: "GET | 200 | /rest/v1/marker", status: "200" },
        { event_message: "GET | 404 | /rest/v1/no_such_table", status: "404" },
      ]),
    );
    // No query string (it may hold a key) is kept; the second channel is the control database itself.
    const stored = await server.controlSql(
      "select count(*)::int as n, bool_or(event_message like '%not-logged%' or metadata::text like '%not-logged%') as leaked from platform.log_events where project_ref = $1",
      [server.ref],
    );
    expect(stored.rows[0].n).toBeGreaterThanOrEqual(3);
    expect(stored.rows[0].leaked).toBe(false);

    // Another project's query sees none of these events.
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "other", organization_slug: "default-org", db_pass: "other-password-1" },
    });
    await waitForStatus(server, created.body.ref, "ACTIVE_HEALTHY");
    expect((await logs("select count(*)::int as n from edge_logs", created.body.ref)).body.result).toEqual([
      { n: 0 },
    ]);
  });

  it("deletes the events older than the retention when it sweeps, and keeps the others", async () => {
    const insert = (marker: string, age: string) =>
      server.controlSql(
        `insert into platform.log_events (project_ref, source, timestamp, event_message)
         values ($1, 'edge_logs', now() - $2::interval, $3)`,
        [server.ref, age, marker],
      );
    await insert("sweep-expired", "3 days");
    await insert("sweep-kept", "1 minute");
    await server.strata.ctx.logs!.expire();
    const left = await server.controlSql(
      "select event_message from platform.log_events where event_message like 'sweep-%' order by 1",
    );
    expect(left.rows).toEqual([{ event_message: "sweep-kept" }]);
  });

  it("refuses what is not a query over the log sources, and ranges over 24 hours", async () => {
    for (const sql of [
      "select jwt_secret from platform.projects",
      "select set_config('role', 'postgres', true)",
      "select set_config('strata.log_ref', 'abcdefghijabcdefghij', true)",
      "reset role",
      "select 1; select 2",
      "select pg_read_file('/etc/passwd')",
    ]) {
      const res = await logs(sql);
      expect({ sql, status: res.status }).toEqual({ sql, status: 400 });
      expect(res.body.message).toEqual(expect.any(String));
    }
    const long = await mgmt(
      server,
      "GET",
      `/v1/projects/${server.ref}/analytics/endpoints/logs?${new URLSearchParams({
        sql: "select 1",
        iso_timestamp_start: new Date(Date.now() - 48 * 3600_000).toISOString(),
        iso_timestamp_end: new Date().toISOString(),
      })}`,
    );
    expect(long.status).toBe(400);
  });

  it("forwards new events to a drain in batches, retrying a failed delivery, until it is deleted", async () => {
    const bad = await mgmt(server, "POST", `/v2/projects/${server.ref}/analytics/log-drains`, {
      body: { data: { attributes: { name: "dd", backend_type: "datadog", config: { api_key: "x" } } } },
    });
    expect(bad.status).toBe(400);
    sink.failNext(1);
    const created = await mgmt(server, "POST", `/v2/projects/${server.ref}/analytics/log-drains`, {
      body: {
        data: {
          attributes: {
            name: "sink",
            backend_type: "webhook",
            config: { url: sinkUrl, headers: { "x-drain-token": "drain-secret-123" } },
          },
        },
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    const listed = await mgmt(server, "GET", `/v2/projects/${server.ref}/analytics/log-drains`);
    expect(JSON.stringify(listed.body)).not.toContain("drain-secret-123");
    expect(listed.body.data[0].attributes.config.headers).toEqual(["x-drain-token"]);
    const sealed = await server.controlSql("select config from platform.log_drains where id = $1", [id]);
    expect(sealed.rows[0].config).not.toContain("drain-secret-123");

    expect((await rest("marker?select=id")).status).toBe(200);
    const accepted = await until("a delivery accepted", () =>
      sink.deliveries.find(
        (d) => d.status === 200 && d.events.some((e) => e.event_message === "GET | 200 | /rest/v1/marker"),
      ),
    );
    // The first attempt was refused (500): the same events came again.
    expect(sink.deliveries[0].status).toBe(500);
    expect(sink.deliveries[0].events[0]).toEqual(accepted.events[0]);
    expect(accepted.headers["x-drain-token"]).toBe("drain-secret-123");
    expect(accepted.events.every((e) => e.source === "edge_logs")).toBe(true);

    expect(
      (await mgmt(server, "DELETE", `/v2/projects/${server.ref}/analytics/log-drains/${id}`)).status,
    ).toBe(204);
    const count = sink.deliveries.length;
    expect((await rest("marker")).status).toBe(200);
    await new Promise((r) => setTimeout(r, 3000));
    expect(sink.deliveries.length).toBe(count);
  });

  it("refuses log queries over more than 24 hours", async () => {
    const end = new Date();
    const start = new Date(end.getTime() - 48 * 3600e3);
    const res = await mgmt(
      server,
      "GET",
      `/v1/projects/${server.ref}/analytics/endpoints/logs?iso_timestamp_start=${start.toISOString()}&iso_timestamp_end=${end.toISOString()}`,
    );
    expect(res.status).toBe(400);
  });
});
