import http from "node:http";
import type { AddressInfo } from "node:net";
import { allowLoopbackForTests } from "../../src/net/outbound";
import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { atProjectHost } from "../management/client";
import { tenantSql, tenantSqlError } from "./sql";

// The receiver listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

/**
 * net through SQL (the Management API's SQL as the owner, a trigger fired by the data API as anon): requests go
 * out after their transaction commits, never after a rollback, and each answer is recorded in net._http_response.
 */
describe("net", () => {
  let server: TestServer;
  let receiver: http.Server;
  let base = "";
  const received: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];

  const responseOf = (id: number) =>
    until(
      async () => (await server.sql("select * from net._http_response where id = $1", [id])).rows[0],
      20_000,
    );

  beforeAll(async () => {
    server = await startTestServer();
    receiver = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        if (req.url?.startsWith("/slow")) return void setTimeout(() => res.writeHead(200).end("late"), 3000);
        if (req.url === "/redirect")
          return void res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
        res.writeHead(201, { "content-type": "application/json", "x-answer": "yes" }).end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    receiver.closeAllConnections();
    receiver.close();
    await server.stop();
  });

  it("sends a committed request and records its answer; a rolled-back one is never sent", async () => {
    const [rolledBack] = await tenantSql(
      server,
      `begin; select net.http_post('${base}/rolled-back', '{"n": 0}') as id; rollback;`,
    );
    const [posted] = await tenantSql(
      server,
      `select net.http_post('${base}/hook', '{"n": 1}'::jsonb, headers := '{"X-Key": "k1"}') as id`,
    );
    const answer = await responseOf(posted.id);
    expect(answer).toMatchObject({
      status_code: 201,
      content_type: "application/json",
      content: '{"ok":true}',
      timed_out: false,
      error_msg: null,
    });
    expect(answer.headers).toMatchObject({ "x-answer": "yes" });
    const hook = received.find((r) => r.url === "/hook")!;
    expect(hook).toMatchObject({ method: "POST", body: '{"n": 1}' });
    expect(hook.headers).toMatchObject({ "content-type": "application/json", "x-key": "k1" });
    // The rolled-back request was queued before the committed one: had it been sent, it would have come first.
    expect(Number(rolledBack.id)).toBeLessThan(Number(posted.id));
    expect(received.some((r) => r.url === "/rolled-back")).toBe(false);
    expect(
      (await server.sql("select count(*)::int as n from net._http_response where id = $1", [rolledBack.id]))
        .rows[0].n,
    ).toBe(0);
    expect((await server.sql("select count(*)::int as n from net.http_request_queue")).rows[0].n).toBe(0);

    const [got] = await tenantSql(
      server,
      `select net.http_get('${base}/search', params := '{"q": "a b&c"}') as id,
              net.http_delete('${base}/item/7') as deleted`,
    );
    expect((await responseOf(got.id)).status_code).toBe(201);
    expect((await responseOf(got.deleted)).status_code).toBe(201);
    expect(received.find((r) => r.url.startsWith("/search"))).toMatchObject({
      method: "GET",
      url: "/search?q=a%20b%26c",
    });
    expect(received.find((r) => r.url === "/item/7")).toMatchObject({ method: "DELETE" });
  });

  it("records timeouts, and addresses the outbound policy refuses, without sending", async () => {
    const [slow] = await tenantSql(
      server,
      `select net.http_get('${base}/slow', timeout_milliseconds := 500) as id`,
    );
    expect(await responseOf(slow.id)).toMatchObject({
      status_code: null,
      timed_out: true,
      error_msg: expect.stringMatching(/Timeout/),
    });
    for (const url of [
      "http://10.0.0.1/x",
      "http://169.254.169.254/latest/meta-data/",
      "http://[::ffff:192.168.1.1]/",
      "file:///etc/passwd",
      "gopher://127.0.0.1/",
    ]) {
      const [req] = await tenantSql(server, `select net.http_get('${url}') as id`);
      const answer = await responseOf(req.id);
      expect(answer).toMatchObject({ status_code: null, content: null });
      expect(answer.error_msg).toMatch(/is not allowed|private or internal address/);
    }
    expect(
      await tenantSqlError(
        server,
        `select net.http_post('${base}/x', headers := '{"Content-Type": "text/plain"}')`,
      ),
    ).toMatch(/Content-Type header must be "application\/json"/);
  });

  it("follows no redirect, and refuses what the queue's own rules refuse", async () => {
    const [redirect] = await tenantSql(server, `select net.http_get('${base}/redirect') as id`);
    expect(await responseOf(redirect.id)).toMatchObject({
      status_code: 302,
      headers: expect.objectContaining({ location: "http://169.254.169.254/latest/meta-data/" }),
    });
    const credentials = `http://user:secret@127.0.0.1:${new URL(base).port}/creds`;
    const [withCredentials] = await tenantSql(server, `select net.http_get('${credentials}') as id`);
    expect((await responseOf(withCredentials.id)).error_msg).toMatch(
      /credentials in the URL are not allowed/,
    );
    expect(received.some((r) => r.url === "/creds")).toBe(false);
    expect(
      await tenantSqlError(
        server,
        `insert into net.http_request_queue (method, url, timeout_milliseconds) values ('PUT', '${base}/put', 100)`,
      ),
    ).toMatch(/http_method/);
  });

  it("sends what a trigger queues on a data request as anon, and reaches the project's own API by its host", async () => {
    const port = new URL(server.url).port;
    await tenantSql(
      server,
      `create table public.orders (id serial primary key, item text);
       grant insert, select on public.orders to anon;
       grant usage on sequence public.orders_id_seq to anon;
       create function public.notify_order() returns trigger language plpgsql as $$
       begin
         perform net.http_post('${base}/orders', jsonb_build_object('item', new.item));
         return new;
       end $$;
       create trigger orders_notify after insert on public.orders for each row execute function public.notify_order();`,
    );
    const inserted = await atProjectHost(server, server.ref, "/rest/v1/orders", {
      apikey: server.anonKey,
      body: { item: "tea" },
    });
    expect(inserted.status).toBe(201);
    await until(() => (received.some((r) => r.url === "/orders") ? true : undefined));
    expect(JSON.parse(received.find((r) => r.url === "/orders")!.body)).toEqual({ item: "tea" });

    // The project's own host is this Strata: its data routes are served, the rest of the server is not.
    const own = `http://${server.ref}.localhost:${port}`;
    const [api] = await tenantSql(
      server,
      `select net.http_get('${own}/rest/v1/orders?select=item', headers := '{"apikey": "${server.anonKey}"}') as data,
              net.http_get('${own}/v1/projects', headers := '{"authorization": "Bearer ${server.managementToken}"}') as management`,
    );
    const data = await responseOf(api.data);
    expect(data).toMatchObject({ status_code: 200, error_msg: null });
    expect(JSON.parse(data.content)).toEqual([{ item: "tea" }]);
    const management = await responseOf(api.management);
    expect(management).toMatchObject({ status_code: null, content: null });
  });
});
