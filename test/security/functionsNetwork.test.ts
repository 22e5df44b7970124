import { lookup } from "node:dns/promises";
import { readFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { denoBinary } from "../../src/functions/deno";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";

/**
 * Edge functions reach the internet, never this machine nor the networks around it, and listen on no
 * port; they still reach their own project's API at SUPABASE_URL. What they print is recorded without
 * this machine's paths. Attempts go through the Management API deploy and /functions/v1 invoke; the
 * refusals are shown by a local server that sees no connection and by the permission error each attempt
 * gets (no timeout: Deno refuses before connecting).
 */

function deployment(server: TestServer, slug: string, files: Record<string, string>) {
  const form = new FormData();
  form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: slug, verify_jwt: false }));
  for (const [name, content] of Object.entries(files)) form.append("file", new Blob([content]), name);
  return fetch(`${server.url}/v1/projects/${server.ref}/functions/deploy?slug=${slug}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.managementToken}` },
    body: form,
  });
}

async function deploy(server: TestServer, slug: string, files: Record<string, string>) {
  expect((await deployment(server, slug, files)).status).toBe(201);
}

const invoke = (server: TestServer, slug: string, body?: unknown) =>
  fetch(`${server.url}/functions/v1/${slug}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/**
 * Runs each attempt it is sent (`[name, source of an async function]`) and answers how each ended:
 * "ok: ..." or the error's name and message.
 */
const PROBE = `
Deno.serve(async (req) => {
  const attempts: [string, string][] = await req.json();
  const results: Record<string, string> = {};
  for (const [name, source] of attempts) {
    try {
      results[name] = "ok: " + String(await (0, eval)("(" + source + ")")()).slice(0, 100);
    } catch (e) {
      const cause = (e as { cause?: Error }).cause;
      results[name] = (e as Error).name + ": " + (e as Error).message + (cause ? " / " + cause.message : "");
    }
  }
  return Response.json(results);
});
`;

/** A permission refusal as Deno words it, for a connection, a listen or an import. */
const REFUSED = /NotCapable|Requires (net|import) access/;

describe("Edge functions' network", () => {
  let server: TestServer;
  /** A local server every refused attempt aims at: it must never see a connection. */
  let target: net.Server;
  let targetPort: number;
  let connections = 0;

  beforeAll(async () => {
    server = await startTestServer();
    target = net.createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => target.listen(0, "0.0.0.0", resolve));
    targetPort = (target.address() as net.AddressInfo).port;
    await deploy(server, "probe", { "index.ts": PROBE });
  });
  afterAll(async () => {
    target.close();
    await server.stop();
  });

  async function probe(attempts: Record<string, string>): Promise<Record<string, string>> {
    const res = await invoke(server, "probe", Object.entries(attempts));
    expect(res.status).toBe(200);
    return res.json();
  }

  it("refuses loopback, private, link-local and the host's own addresses, by address and by name", async () => {
    const P = targetPort;
    const fetchOf = (url: string) => `() => fetch(${JSON.stringify(url)}).then((r) => r.status)`;
    const attempts: Record<string, string> = {
      loopback: fetchOf(`http://127.0.0.1:${P}/`),
      localhost: fetchOf(`http://localhost:${P}/`),
      shortLoopback: fetchOf(`http://127.1:${P}/`),
      otherLoopback: fetchOf(`http://127.0.0.2:${P}/`),
      decimalLoopback: fetchOf(`http://2130706433:${P}/`),
      ipv6Loopback: fetchOf(`http://[::1]:${P}/`),
      mappedLoopback: fetchOf(`http://[::ffff:127.0.0.1]:${P}/`),
      anyAddress: fetchOf(`http://0.0.0.0:${P}/`),
      private10: fetchOf("http://10.0.0.1/"),
      private192: fetchOf("http://192.168.1.1/"),
      metadata: fetchOf("http://169.254.169.254/latest/meta-data/"),
      websocket: `() => new Promise((resolve, reject) => {
        const ws = new WebSocket("ws://localhost:${P}/");
        ws.onopen = () => resolve("open");
        ws.onerror = (e) => reject(new Error(e.message));
      })`,
      importLoopback: `() => import("http://127.0.0.1:${P}/module.js")`,
      importByName: `() => import("http://localhost:${P}/module.json", { with: { type: "json" } })`,
      dnsServerOnLoopback: `() => Deno.resolveDns("example.com", "A", { nameServer: { ipAddr: "127.0.0.1", port: ${P} } })`,
      nodeNet: `async () => {
        const net = await import("node:net");
        return new Promise((resolve, reject) => {
          const socket = net.connect({ host: "localhost", port: ${P} }, () => resolve("connected"));
          socket.on("error", reject);
        });
      }`,
    };
    for (const a of Object.values(os.networkInterfaces()).flatMap((list) => list ?? [])) {
      const host = a.family === "IPv6" ? `[${a.address.split("%")[0]}]` : a.address;
      attempts[`own ${host}`] =
        `() => Deno.connect({ hostname: ${JSON.stringify(a.address.split("%")[0])}, port: ${P} })`;
    }
    // The host's name, where it resolves to this machine (/etc/hosts): a name Deno checks by its address.
    const self = await lookup(os.hostname()).catch(() => undefined);
    if (self) attempts.hostname = fetchOf(`http://${os.hostname()}:${P}/`);

    const results = await probe(attempts);
    for (const [name, result] of Object.entries(results)) {
      expect(`${name}: ${result}`).toMatch(REFUSED);
    }
    expect(results.localhost).toContain(`127.0.0.1:${P}`);
    expect(connections).toBe(0);
  });

  it("refuses the database cluster's port, whatever the function knows of it", async () => {
    const db = new URL(server.dbUrl);
    const results = await probe({
      cluster: `() => Deno.connect({ hostname: ${JSON.stringify(db.hostname)}, port: ${db.port || 5432} })`,
      clusterByName: `() => Deno.connect({ hostname: "localhost", port: ${db.port || 5432} })`,
    });
    expect(results.cluster).toMatch(/^NotCapable: Requires net access/);
    expect(results.clusterByName).toMatch(/^NotCapable: Requires net access/);
  });

  it("listens on no port: Deno.listen and node:net refused, Deno.serve({ port }) served on the worker's socket", async () => {
    const own = Object.values(os.networkInterfaces())
      .flatMap((list) => list ?? [])
      .filter((a) => a.family === "IPv4" && !a.internal)
      .map((a) => a.address);
    const listenOn = (hostname: string) =>
      `() => { const l = Deno.listen({ hostname: ${JSON.stringify(hostname)}, port: 0 }); l.close(); return "listening"; }`;
    const attempts: Record<string, string> = {
      allInterfaces: listenOn("0.0.0.0"),
      allInterfacesV6: listenOn("::"),
      loopback: listenOn("127.0.0.1"),
      defaultHost: `() => { const l = Deno.listen({ port: 0 }); l.close(); return "listening"; }`,
      nodeListen: `async () => {
        const net = await import("node:net");
        return new Promise((resolve, reject) => {
          const s = net.createServer();
          s.on("error", reject);
          s.listen(0, () => { s.close(); resolve("listening"); });
        });
      }`,
      vsock: `() => Deno.listen({ transport: "vsock", cid: -1, port: 1234 })`,
    };
    for (const address of own) attempts[`own ${address}`] = listenOn(address);
    const results = await probe(attempts);
    for (const [name, result] of Object.entries(results)) expect(`${name}: ${result}`).toMatch(/NotCapable/);

    // A function written for a port still serves, on the worker's socket: nothing listens on its port.
    const port = await new Promise<number>((resolve) => {
      const free = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (free.address() as net.AddressInfo).port;
        free.close(() => resolve(p));
      });
    });
    await deploy(server, "ported", {
      "index.ts": `Deno.serve({ port: ${port}, hostname: "0.0.0.0" }, () => new Response("served"))`,
    });
    const res = await invoke(server, "ported");
    expect(await res.text()).toBe("served");
    const reached = await new Promise<string>((resolve) => {
      const socket = net.connect({ host: "127.0.0.1", port }, () => resolve("connected"));
      socket.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
    });
    expect(reached).toBe("ECONNREFUSED");
  });

  it("keeps proxies from being a way around: no SOCKS or vsock proxy, proxy variables ignored", async () => {
    const P = targetPort;
    const results = await probe({
      socks: `() => fetch("http://example.com/", { client: Deno.createHttpClient({ proxy: { transport: "socks5", url: "socks5://localhost:${P}" } }) })`,
      socksByUrl: `() => Deno.createHttpClient({ proxy: { url: "socks5h://localhost:${P}" } })`,
      vsockProxy: `() => Deno.createHttpClient({ proxy: { transport: "vsock", cid: 2, port: ${P} } })`,
      httpProxyByName: `() => fetch("http://example.com/", { client: Deno.createHttpClient({ proxy: { url: "http://localhost:${P}" } }) })`,
      tcpProxyByName: `() => fetch("http://example.com/", { client: Deno.createHttpClient({ proxy: { transport: "tcp", hostname: "localhost", port: ${P} } }) })`,
      proxyVariable: `() => { Deno.env.set("ALL_PROXY", "socks5://localhost:${P}"); return String(Deno.env.get("ALL_PROXY")); }`,
      internals: `() => typeof Deno[Deno.internal]`,
    });
    expect(results.socks).toMatch(/^NotCapable: SOCKS/);
    expect(results.socksByUrl).toMatch(/^NotCapable: SOCKS/);
    expect(results.vsockProxy).toMatch(/^NotCapable/);
    expect(results.httpProxyByName).toMatch(REFUSED);
    expect(results.tcpProxyByName).toMatch(REFUSED);
    expect(results.proxyVariable).toBe("ok: undefined");
    expect(results.internals).toBe("ok: undefined");

    // A project secret is the function's variable, not the Deno process's, where Deno would take it for
    // its proxy.
    const secret = [{ name: "ALL_PROXY", value: `socks5://localhost:${P}` }];
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/secrets`, { body: secret })).status).toBe(
      201,
    );
    const withSecret = await probe({
      proxied: `() => fetch("http://93.184.215.14/", { signal: AbortSignal.timeout(5000) }).then((r) => r.status)`,
      variable: `() => String(Deno.env.get("ALL_PROXY"))`,
    });
    expect(withSecret.proxied).not.toMatch(/SOCKS|socks|Invalid response version/);
    expect(withSecret.variable).toBe("ok: undefined");
    await mgmt(server, "DELETE", `/v1/projects/${server.ref}/secrets`, { body: ["ALL_PROXY"] });
    expect(connections).toBe(0);
  });

  it("refuses a deployment naming its own npm registry, which Deno would fetch from outside the rules", async () => {
    const res = await deployment(server, "registry", {
      "deno.json": "{}",
      ".npmrc": `registry=http://127.0.0.1:${targetPort}/`,
      "index.ts": "import pad from 'npm:left-pad@1.3.0';\nDeno.serve(() => new Response(pad('x', 3)))",
    });
    expect(res.status).toBe(400);
    expect((await res.json()).message).toMatch(/\.npmrc files are not supported/);
    const { rows } = await server.controlSql("select 1 from platform.edge_functions where slug = 'registry'");
    expect(rows).toEqual([]);
    expect(connections).toBe(0);
  });

  it("lets a function reach public addresses: no permission refusal", async () => {
    // There may be no internet here: whatever happens (an answer, a connection failure), it is not a refusal.
    const results = await probe({
      publicAddress: `() => fetch("http://93.184.215.14/", { signal: AbortSignal.timeout(5000) }).then((r) => r.status)`,
      publicConnect: `() => Deno.connect({ hostname: "93.184.215.14", port: 80 }).then((c) => { c.close(); return "connected"; })`,
    });
    expect(results.publicAddress).not.toMatch(REFUSED);
    expect(results.publicConnect).not.toMatch(REFUSED);
  });

  it("reaches its own project's API at SUPABASE_URL through supabase-js: REST and realtime", async () => {
    await server.sql(`create table public.fn_notes (id int primary key, body text not null);
      insert into public.fn_notes values (1, 'written through SQL');
      grant select on public.fn_notes to anon;
      notify pgrst, 'reload schema';`);
    const supabaseJs = readFileSync(require.resolve("@supabase/supabase-js/dist/umd/supabase.js"), "utf8");
    await deploy(server, "own-api", {
      "supabase.js": `${supabaseJs}\nexport const createClient = supabase.createClient;`,
      "index.ts": `
        import { createClient } from "./supabase.js";
        Deno.serve(async () => {
          const url = Deno.env.get("SUPABASE_URL")!;
          const client = createClient(url, Deno.env.get("SUPABASE_ANON_KEY")!);
          const { data, error } = await client.from("fn_notes").select("id, body");
          const realtime = await new Promise((resolve) => {
            const channel = client.channel("fn-room");
            channel.subscribe((status) => {
              if (status === "SUBSCRIBED" || status === "CHANNEL_ERROR" || status === "TIMED_OUT") {
                resolve(status);
                client.removeChannel(channel);
              }
            });
          });
          // A body through the socket too: this project's other function, called at SUPABASE_URL.
          const other = await fetch(url + "/functions/v1/probe", {
            method: "POST",
            body: new Blob([JSON.stringify([["sum", "() => 1 + 1"]])]).stream(),
          }).then((r) => r.json());
          return Response.json({ url, data, error, realtime, other });
        });`,
    });
    const res = await invoke(server, "own-api");
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toEqual({
      url: `http://${server.ref}.localhost:${new URL(server.url).port}`,
      data: [{ id: 1, body: "written through SQL" }],
      error: null,
      realtime: "SUBSCRIBED",
      other: { sum: "ok: 2" },
    });
  });

  it("records function output and errors without this machine's paths", async () => {
    const dataDir = server.strata.ctx.config.dataDir;
    await deploy(server, "leaky", {
      "index.ts": `
        import { where } from "./lib/where.ts";
        Deno.serve(async (req) => {
          console.log("module " + import.meta.url);
          console.log("lib " + where());
          console.log("cwd " + Deno.cwd() + " temp " + (await Deno.makeTempFile()));
          console.log("deno " + Deno.execPath());
          if (new URL(req.url).searchParams.has("throw")) throw new Error("thrown on purpose");
          return new Response("fine");
        });`,
      "lib/where.ts": "export const where = () => new Error('here').stack;",
    });
    await deploy(server, "unbootable", {
      "index.ts": "import './missing.ts';\nDeno.serve(() => new Response('x'))",
    });
    const fine = await invoke(server, "leaky");
    expect(await fine.text()).toBe("fine");
    const thrown = await fetch(`${server.url}/functions/v1/leaky?throw`);
    const unbootable = await invoke(server, "unbootable");
    const answers = [await thrown.text(), await unbootable.text()];
    expect(thrown.status).toBe(500);
    expect(unbootable.status).toBe(503);

    let lines: string[] = [];
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const { rows } = await server.controlSql(
        "select slug, message from platform.function_logs where slug in ('leaky', 'unbootable') and kind = 'console'",
      );
      lines = rows.map((r) => `${r.slug}: ${r.message}`);
      if (lines.some((l) => l.includes("thrown on purpose")) && lines.some((l) => l.startsWith("unbootable")))
        break;
    }
    const text = [...lines, ...answers].join("\n");
    expect(text).toContain("module file:///var/tmp/sb-compile-edge-runtime/source/index.ts");
    expect(text).toContain("file:///var/tmp/sb-compile-edge-runtime/source/lib/where.ts");
    expect(text).toContain("cwd /tmp temp /tmp/");
    expect(text).toContain("thrown on purpose");
    expect(text).toContain("file:///var/tmp/sb-compile-edge-runtime/source/missing.ts");
    for (const hostPath of [dataDir, path.join(os.tmpdir(), "strata-fn-"), path.dirname(denoBinary())]) {
      expect(text).not.toContain(hostPath);
    }
  });
});
