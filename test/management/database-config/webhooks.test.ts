import http from "node:http";
import type { AddressInfo } from "node:net";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt, waitForStatus } from "../client";
import { clientFor } from "../../rest/fixtures";
import { allowLoopbackForTests } from "../../../src/net/outbound";

// The webhook receiver listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** Database webhooks fire for real: a row change reaches an HTTP endpoint, with retries, and is recorded. */
describe("Database webhooks", () => {
  let server: TestServer;
  let receiver: http.Server;
  let base = "";
  const received: Received[] = [];
  let failuresLeft = 0;

  beforeAll(async () => {
    server = await startTestServer();
    receiver = http.createServer((req, res) => {
      let text = "";
      req.on("data", (c) => (text += c));
      req.on("end", () => {
        received.push({
          method: req.method!,
          url: req.url!,
          headers: req.headers,
          body: text ? JSON.parse(text) : null,
        });
        if (failuresLeft > 0) {
          failuresLeft--;
          res.writeHead(503).end("try again");
        } else res.writeHead(200, { "content-type": "text/plain" }).end("thanks");
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await server.stop();
    await new Promise((resolve) => receiver.close(resolve));
  });

  async function until<T>(read: () => Promise<T | undefined> | T | undefined): Promise<T> {
    for (let i = 0; i < 100; i++) {
      const value = await read();
      if (value !== undefined) return value;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error("timed out waiting");
  }

  it("sends each change of a hooked table to its URL and records the answer, retrying a failed send", async () => {
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/database/webhooks/enable`)).status).toBe(
      201,
    );
    await server.sql(`
      create table public.orders (id int primary key, item text);
      grant all on public.orders to anon;
      create trigger orders_hook after insert or update or delete on public.orders for each row
        execute function supabase_functions.http_request('${base}/hook', 'POST',
          '{"Content-Type": "application/json", "X-Secret": "s3"}', '{"source": "db"}', '2000');
    `);
    // Through the data API, as an app would write: the trigger fires as the anon role.
    const client = clientFor(server);
    expect((await client.from("orders").insert({ id: 1, item: "book" })).error).toBeNull();
    const insert = await until(() => received.find((r) => r.body?.type === "INSERT"));
    expect(insert.method).toBe("POST");
    expect(insert.url).toBe("/hook?source=db");
    expect(insert.headers["x-secret"]).toBe("s3");
    expect(insert.body).toEqual({
      type: "INSERT",
      table: "orders",
      schema: "public",
      record: { id: 1, item: "book" },
      old_record: null,
    });

    failuresLeft = 1;
    await server.sql("update public.orders set item = 'pen' where id = 1");
    const updates = await until(() => {
      const found = received.filter((r) => r.body?.type === "UPDATE");
      return found.length >= 2 ? found : undefined;
    });
    expect(updates[1].body).toMatchObject({
      record: { id: 1, item: "pen" },
      old_record: { id: 1, item: "book" },
    });

    await server.sql("delete from public.orders where id = 1");
    await until(() => received.find((r) => r.body?.type === "DELETE"));
    const responses = await until(async () => {
      const { rows } = await server.sql(
        `select h.hook_name, r.status_code, r.content, r.attempts from supabase_functions.hooks h
           join supabase_functions.http_responses r on r.id = h.request_id order by h.id`,
      );
      return rows.length === 3 ? rows : undefined;
    });
    expect(responses).toEqual([
      { hook_name: "orders_hook", status_code: 200, content: "thanks", attempts: 1 },
      { hook_name: "orders_hook", status_code: 200, content: "thanks", attempts: 2 },
      { hook_name: "orders_hook", status_code: 200, content: "thanks", attempts: 1 },
    ]);
    expect(
      (await server.sql("select count(*)::int as n from supabase_functions.http_request_queue")).rows,
    ).toEqual([{ n: 0 }]);
  });

  it("records why a request could not be sent after its last attempt", async () => {
    await server.sql(`
      create table public.pings (id int primary key);
      create trigger pings_hook after insert on public.pings for each row
        execute function supabase_functions.http_request('http://127.0.0.1:1/nowhere', 'GET', '{}', '{}', '500');
      insert into public.pings values (1);
    `);
    const failed = await until(async () => {
      const { rows } = await server.sql(
        `select r.status_code, r.error_msg, r.attempts from supabase_functions.hooks h
           join supabase_functions.http_responses r on r.id = h.request_id where h.hook_name = 'pings_hook'`,
      );
      return rows[0];
    });
    expect(failed).toMatchObject({ status_code: null, attempts: 3 });
    expect(failed.error_msg).toEqual(expect.any(String));
  }, 30_000);

  it("sends one project's webhooks while another project's endpoint holds its request", async () => {
    let held: { res: http.ServerResponse; open: boolean } | undefined;
    const holder = http.createServer((_req, res) => {
      held = { res, open: true };
      res.on("close", () => (held!.open = false));
    });
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: {
        name: "other",
        organization_slug: "default-org",
        db_pass: "a-strong-password",
        region: "us-east-1",
      },
    });
    const other: string = created.body.ref;
    await waitForStatus(server, other, "ACTIVE_HEALTHY");
    for (const ref of [server.ref, other])
      expect((await mgmt(server, "POST", `/v1/projects/${ref}/database/webhooks/enable`)).status).toBe(201);
    try {
      await server.sql(`
        create table public.slow (id int primary key);
        create trigger slow_hook after insert on public.slow for each row execute function
          supabase_functions.http_request('http://127.0.0.1:${(holder.address() as AddressInfo).port}/', 'POST', '{}', '{}', '10000');
        insert into public.slow values (1);
      `);
      await until(() => held);
      const query = `
        create table public.quick (id int primary key);
        create trigger quick_hook after insert on public.quick for each row
          execute function supabase_functions.http_request('${base}/quick', 'POST', '{}', '{}', '2000');
        insert into public.quick values (1);`;
      expect(
        (await mgmt(server, "POST", `/v1/projects/${other}/database/query`, { body: { query } })).status,
      ).toBe(201);
      await until(() => received.find((r) => r.url === "/quick"));
      // Delivered while the first project's request was still waiting for its answer.
      expect(held!.open).toBe(true);
    } finally {
      held?.res.end();
      await new Promise((resolve) => holder.close(resolve));
      await mgmt(server, "DELETE", `/v1/projects/${other}`);
    }
  });
});
