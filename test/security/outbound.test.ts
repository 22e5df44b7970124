import http from "node:http";
import type { AddressInfo } from "node:net";
import { mgmt } from "../management/client";
import { startMailbox } from "../auth/mailbox";
import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import {
  allowLoopbackForTests,
  approvedAddress,
  fetchOutbound,
  fetchPublicJson,
  fetchPublicText,
} from "../../src/net/outbound";

// Names a tenant could point at this machine or its network (the system resolver knows none of them).
jest.mock("node:dns/promises", () => {
  const actual = jest.requireActual("node:dns/promises");
  const answers: Record<string, string[]> = {
    "loopback.test": ["127.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "mixed.test": ["93.184.215.14", "10.0.0.1"],
  };
  return {
    ...actual,
    lookup: (host: string, options: unknown) =>
      answers[host]
        ? Promise.resolve(
            answers[host].map((address) => ({ address, family: address.includes(":") ? 6 : 4 })),
          )
        : actual.lookup(host, options),
  };
});
// This machine as if it had a public address of its own (a host without NAT).
jest.mock("node:os", () => {
  const actual = jest.requireActual("node:os");
  return {
    ...actual,
    networkInterfaces: () => ({
      ...actual.networkInterfaces(),
      public0: [{ address: "93.184.215.99", family: "IPv4", internal: false }],
    }),
  };
});

/** Every form of an internal address a tenant could write in a URL (the receiver's port where it matters). */
const internalHosts = (port: number) => [
  `127.0.0.1:${port}`,
  `localhost:${port}`,
  `127.1:${port}`,
  `0.0.0.0:${port}`,
  `[::1]:${port}`,
  `[::ffff:127.0.0.1]:${port}`,
  `2130706433:${port}`,
  `loopback.test:${port}`,
  "10.1.2.3",
  "192.168.1.1",
  "169.254.169.254",
];

/** A local HTTP server on every loopback address that keeps what reaches it. */
async function receiver(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const requests: { url: string; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      requests.push({ url: req.url!, body });
      answer(req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "::", r));
  const port = (server.address() as AddressInfo).port;
  return { requests, port, close: () => new Promise((r) => server.close(r)) };
}

describe("The outbound policy", () => {
  it("refuses loopback, private, link-local, reserved and mapped forms, and the machine's own address", async () => {
    allowLoopbackForTests(false);
    for (const host of [
      "127.0.0.1",
      "127.255.0.1",
      "localhost",
      "0.0.0.0",
      "::1",
      "[::1]",
      "::",
      "::ffff:127.0.0.1",
      "::ffff:a9fe:a9fe",
      "64:ff9b::7f00:1",
      "2002:7f00:1::",
      "10.0.0.1",
      "172.16.5.4",
      "192.168.1.1",
      "100.64.0.1",
      "169.254.169.254",
      "fe80::1",
      "fd00::2",
      "fec0::1",
      "224.0.0.1",
      "ff02::1",
      "255.255.255.255",
      "240.0.0.1",
      "192.0.2.10",
      "198.18.0.1",
      "2001:db8::1",
      "2001::1",
      "loopback.test",
      "metadata.test",
      "mixed.test",
      "93.184.215.99",
    ]) {
      await expect(approvedAddress(host)).rejects.toMatchObject({
        refused: true,
        message: expect.stringMatching(/private or internal/),
      });
    }
    // Public addresses pass, in every form that carries one.
    for (const host of [
      "93.184.215.14",
      "2606:2800:21f:cb07::1",
      "::ffff:93.184.215.14",
      "64:ff9b::5db8:d70e",
    ]) {
      expect((await approvedAddress(host)).address).toBe(host);
    }
  });

  it("refuses what needs https over http, other schemes and credentials in the URL", async () => {
    allowLoopbackForTests(false);
    await expect(fetchPublicJson("http://93.184.215.14/jwks")).rejects.toThrow(/must use https/);
    await expect(fetchOutbound("file:///etc/passwd", { allowHttp: true })).rejects.toThrow(/not allowed/);
    await expect(fetchOutbound("gopher://93.184.215.14/", { allowHttp: true })).rejects.toThrow(
      /not allowed/,
    );
    await expect(fetchOutbound("https://user:pw@93.184.215.14/", { allowHttp: true })).rejects.toThrow(
      /credentials/,
    );
  });

  it("answers a name under .invalid as unresolvable without asking the resolver (RFC 6761)", async () => {
    for (const host of ["docs.invalid", "a.b.INVALID", "invalid", "x.invalid."])
      await expect(approvedAddress(host)).rejects.toThrow(/does not resolve/);
    await expect(fetchOutbound("https://docs.invalid/x", { timeoutMs: 60_000 })).rejects.toThrow(
      /does not resolve/,
    );
  });

  it("checks every redirect: a URL it may reach that redirects inward is refused", async () => {
    let received = 0;
    const local = await receiver((req, res) => {
      received++;
      if (req.url === "/to-metadata") res.writeHead(302, { location: "http://metadata.test/latest" }).end();
      else if (req.url === "/to-loopback") {
        // The first hop stood for a public site; from here on the policy is production's.
        allowLoopbackForTests(false);
        res.writeHead(302, { location: `http://127.0.0.1:${local.port}/secret` }).end();
      } else res.end(JSON.stringify({ secret: true }));
    });
    try {
      allowLoopbackForTests(true);
      await expect(fetchPublicJson(`http://127.0.0.1:${local.port}/to-metadata`)).rejects.toThrow(
        /metadata.test is a private or internal address/,
      );
      await expect(fetchPublicText(`http://127.0.0.1:${local.port}/to-loopback`)).rejects.toThrow(
        /127.0.0.1 is a private or internal address/,
      );
      expect(received).toBe(2);
      expect(local.requests.map((r) => r.url)).toEqual(["/to-metadata", "/to-loopback"]);
    } finally {
      allowLoopbackForTests(false);
      await local.close();
    }
  });

  it("cannot be switched to loopback outside tests", () => {
    const env = process.env.NODE_ENV;
    process.env.NODE_ENV = "production";
    try {
      expect(() => allowLoopbackForTests()).toThrow(/only for tests/);
    } finally {
      process.env.NODE_ENV = env;
    }
  });
});

describe("Tenant-supplied URLs with the loopback switch off", () => {
  let server: TestServer;
  let local: Awaited<ReturnType<typeof receiver>>;
  const tenantSql = async (query: string) => {
    const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, { body: { query } });
    expect(res.status).toBe(201);
    return res.body;
  };
  const config = (changes: Record<string, unknown>) =>
    mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/auth`, { body: changes });
  const signUp = (email: string) =>
    fetch(`${server.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ email, password: "Outbound-pass-1234" }),
    }).then(async (r) => ({ status: r.status, body: await r.json() }));

  beforeAll(async () => {
    allowLoopbackForTests(false);
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
    local = await receiver((_req, res) => res.end(JSON.stringify({ keys: [] })));
  });
  afterAll(async () => {
    await server.stop();
    await local.close();
  });

  it("database webhooks: every internal form is refused, recorded as the request's error, and nothing arrives", async () => {
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/database/webhooks/enable`)).status).toBe(
      201,
    );
    const urls = internalHosts(local.port).map((host) => `http://${host}/hook`);
    await tenantSql(`
      create table public.targets (id int primary key);
      ${urls
        .map(
          (
            url,
            i,
          ) => `create trigger t${String(i).padStart(2, "0")} after insert on public.targets for each row
            execute function supabase_functions.http_request('${url}', 'POST', '{}', '{}', '1000');`,
        )
        .join("\n")}
      insert into public.targets values (1);
    `);
    const recorded = await until(async () => {
      const { rows } = await server.sql(
        `select h.hook_name, r.status_code, r.error_msg, r.attempts
           from supabase_functions.hooks h join supabase_functions.http_responses r on r.id = h.request_id
          order by h.hook_name`,
      );
      return rows.length === urls.length ? rows : undefined;
    });
    for (const row of recorded) {
      expect(row).toMatchObject({ status_code: null, attempts: 1 });
      expect(row.error_msg).toMatch(/is a private or internal address$/);
    }
    expect(
      (await server.sql("select count(*)::int as n from supabase_functions.http_request_queue")).rows,
    ).toEqual([{ n: 0 }]);
    expect(local.requests).toEqual([]);
  });

  it("log drains: an internal endpoint is refused (the drain's last error says so) and receives nothing", async () => {
    const drains: string[] = [];
    for (const host of [`127.0.0.1:${local.port}`, `loopback.test:${local.port}`, "169.254.169.254"]) {
      const created = await mgmt(server, "POST", `/v2/projects/${server.ref}/analytics/log-drains`, {
        body: {
          data: {
            attributes: {
              name: `drain ${host}`,
              backend_type: "webhook",
              config: { url: `http://${host}/ingest` },
            },
          },
        },
      });
      expect(created.status).toBe(201);
      drains.push(created.body.data.id);
    }
    await server.sql("create table public.marker (id int); grant select on public.marker to anon");
    const errors = await until(async () => {
      await fetch(`${server.url}/rest/v1/marker`, { headers: { apikey: server.anonKey } });
      const { rows } = await server.controlSql(
        "select last_error from platform.log_drains where id = any($1) and last_error is not null",
        [drains],
      );
      return rows.length === drains.length ? rows : undefined;
    });
    for (const { last_error } of errors) expect(last_error).toMatch(/private or internal address/);
    expect(local.requests.filter((r) => r.url === "/ingest")).toEqual([]);
  });

  it("auth hooks: an internal hook URI fails the sign-up, and the hook is never called", async () => {
    for (const host of internalHosts(local.port)) {
      expect(
        (
          await config({
            hook_custom_access_token_enabled: true,
            hook_custom_access_token_uri: `http://${host}/hook`,
            hook_custom_access_token_secrets: "v1,whsec_" + Buffer.alloc(32, 7).toString("base64"),
          })
        ).status,
      ).toBe(200);
      const res = await signUp(`hook-${Math.random()}@example.test`);
      expect(res).toMatchObject({ status: 500, body: { error_code: "unexpected_failure" } });
    }
    await config({ hook_custom_access_token_enabled: false });
    expect(local.requests.filter((r) => r.url === "/hook")).toEqual([]);
  });

  it("third-party JWKS and OIDC discovery: an internal URL resolves no keys and is never fetched", async () => {
    for (const host of internalHosts(local.port)) {
      for (const body of [
        { jwks_url: `http://${host}/jwks` },
        { oidc_issuer_url: `http://${host}/issuer` },
      ]) {
        const created = await mgmt(
          server,
          "POST",
          `/v1/projects/${server.ref}/config/auth/third-party-auth`,
          {
            body,
          },
        );
        expect(created.status).toBe(201);
        expect(created.body.resolved_jwks).toBeNull();
      }
    }
    expect(local.requests).toEqual([]);
  });

  it("SAML metadata_url: an internal URL is a 400 that names the reason, and is never fetched", async () => {
    for (const host of internalHosts(local.port)) {
      const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/config/auth/sso/providers`, {
        body: { type: "saml", metadata_url: `http://${host}/metadata` },
      });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/metadata_url: .* is a private or internal address/);
    }
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}/config/auth/sso/providers`)).body).toEqual({
      items: [],
    });
    expect(local.requests).toEqual([]);
  });

  it("OAuth provider: an internal realm URL is never asked for the token or the user", async () => {
    for (const host of [`127.0.0.1:${local.port}`, `loopback.test:${local.port}`, "169.254.169.254"]) {
      await config({
        external_keycloak_enabled: true,
        external_keycloak_client_id: "rp",
        external_keycloak_secret: "rp-secret",
        external_keycloak_url: `http://${host}/realms/test`,
        uri_allow_list: "http://localhost:3000/**",
      });
      const started = await fetch(
        `${server.url}/auth/v1/authorize?provider=keycloak&redirect_to=http://localhost:3000/done`,
        { redirect: "manual" },
      );
      const state = new URL(started.headers.get("location")!).searchParams.get("state")!;
      const back = await fetch(
        `${server.url}/auth/v1/callback?code=the-code&state=${encodeURIComponent(state)}`,
        {
          redirect: "manual",
        },
      );
      expect(back.headers.get("location")).toMatch(/error_code=bad_oauth_callback/);
    }
    expect(local.requests.filter((r) => r.url.startsWith("/realms"))).toEqual([]);
  });

  it("SMTP: a mail relay on this machine is reached (a local MTA), never through link-local or reserved addresses", async () => {
    const mailbox = await startMailbox({ user: "u", pass: "p" });
    const send = async (host: string) => {
      await config({
        smtp_host: host,
        smtp_port: String(mailbox.port),
        smtp_user: "u",
        smtp_pass: "p",
        smtp_admin_email: "auth@example.test",
        smtp_max_frequency: 0,
        rate_limit_email_sent: 1000,
        mailer_autoconfirm: false,
      });
      return signUp(`mail-${Math.random()}@example.test`);
    };
    // 0.0.0.0 would reach the same receiver; the others are the metadata address and other reserved nets.
    for (const host of ["0.0.0.0", "169.254.169.254", "100.64.0.1", "[::]", "240.0.0.1"])
      expect(await send(host)).toMatchObject({ status: 500, body: { error_code: "unexpected_failure" } });
    expect(mailbox.mails).toEqual([]);
    for (const host of ["127.0.0.1", "localhost", "loopback.test"])
      expect((await send(host)).status).toBe(200);
    expect(mailbox.mails.length).toBe(3);
    await mailbox.close();
  });

  it("branch notify_url: an internal URL is never told of the branch's status", async () => {
    const created = await mgmt(server, "POST", `/v1/projects/${server.ref}/branches`, {
      body: { branch_name: "notify-inward", notify_url: `http://127.0.0.1:${local.port}/branches` },
    });
    expect(created.status).toBe(201);
    const ref: string = created.body.project_ref;
    const [run] = (await mgmt(server, "GET", `/v1/projects/${ref}/actions`)).body;
    // The run's statuses are the ones a notify_url is told of: all set once every step has exited.
    await until(async () => {
      const steps = (await mgmt(server, "GET", `/v1/projects/${ref}/actions/${run.id}`)).body.run_steps;
      return steps.every((s: { status: string }) => s.status === "EXITED") ? true : undefined;
    }, 60_000);
    expect((await mgmt(server, "DELETE", `/v1/branches/${ref}`)).status).toBe(200);
    expect(local.requests.filter((r) => r.url === "/branches")).toEqual([]);
  });

  it("with the switch on, the same flows reach the local receivers", async () => {
    allowLoopbackForTests(true);
    try {
      await tenantSql(`
        create table public.allowed (id int primary key);
        create trigger allowed_hook after insert on public.allowed for each row
          execute function supabase_functions.http_request('http://localhost:${local.port}/allowed', 'POST', '{}', '{}', '1000');
        insert into public.allowed values (7);
      `);
      const delivered = await until(() => local.requests.find((r) => r.url === "/allowed"));
      expect(JSON.parse(delivered.body)).toMatchObject({ type: "INSERT", record: { id: 7 } });
      const created = await mgmt(server, "POST", `/v1/projects/${server.ref}/config/auth/third-party-auth`, {
        body: { jwks_url: `http://127.0.0.1:${local.port}/jwks` },
      });
      expect(created.body.resolved_jwks).toEqual({ keys: [] });
    } finally {
      allowLoopbackForTests(false);
    }
  });
});
