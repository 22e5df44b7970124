import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import path from "node:path";
import pg from "pg";
import { V1ProxyProtocol, INETProtocol, Peer } from "proxy-protocol-js";
import { freePort } from "../../src/db/physical";
import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { mgmt, waitForStatus } from "../management/client";
import { HAPROXY } from "../setup/haproxy";

/**
 * The database listener behind Debian's HAProxy (deploy/haproxy-db.cfg, PROXY protocol v2): with the proxy in
 * STRATA_TRUSTED_PROXIES the listener takes the client's address from the header, so a project's network
 * restrictions admit or refuse each client, not the proxy. 127.0.0.2 and 127.0.0.3 stand for two other hosts
 * (the proxy is 127.0.0.1). A header from anyone else is no startup message and gets nobody in.
 */

const ROOT = path.join(__dirname, "../..");
const PASSWORD = "proxied-owner-password-1";

let server: TestServer;
let proxy: ChildProcess | undefined;
let listenerPort: number;
let proxyPort: number;
let ref: string;
/** The project owner's role, which a connection as `postgres.<ref>` becomes. */
let owner: string;

/** A socket that connects from `from` (pg's `stream` option) and may send `header` first. */
function socketFrom(from: string, header?: string): () => net.Socket {
  return () => {
    const socket = new net.Socket();
    const connect = socket.connect.bind(socket) as (o: net.TcpNetConnectOpts, cb?: () => void) => net.Socket;
    (socket as unknown as { connect: unknown }).connect = (port: number, host: string) =>
      connect({ port, host, localAddress: from }, () => header && socket.write(header));
    return socket;
  };
}

/** Connects as the project's owner to `port` from `from`; answers the role it became or the error. */
async function outcome(port: number, from: string, header?: string): Promise<string> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: `postgres.${ref}`,
    password: PASSWORD,
    database: "postgres",
    ssl: false,
    stream: socketFrom(from, header),
    connectionTimeoutMillis: 20_000,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    return (await client.query<{ who: string }>("select current_user as who")).rows[0].who;
  } catch (e) {
    return (e as Error).message;
  } finally {
    await client.end().catch(() => {});
  }
}

beforeAll(async () => {
  server = await startTestServer({
    STRATA_DB_PORT: "0",
    STRATA_TRUSTED_PROXIES: "127.0.0.1",
    MANAGEMENT_RATE_LIMIT: "100000",
  });
  listenerPort = (server.strata.ctx.dbListener as { port: number }).port;
  const created = await mgmt(server, "POST", "/v1/projects", {
    body: { name: "proxied", organization_slug: "default-org", db_pass: PASSWORD, region: "us-east-1" },
  });
  expect(created.status).toBe(201);
  ref = created.body.ref;
  await waitForStatus(server, ref, "ACTIVE_HEALTHY");
  owner = (await server.strata.ctx.registry.get(ref))!.record.ownerRole;
  // Only the host 127.0.0.2 may connect to the project's database.
  const applied = await mgmt(server, "POST", `/v1/projects/${ref}/network-restrictions/apply`, {
    body: { dbAllowedCidrs: ["127.0.0.2/32"] },
  });
  expect(applied.status).toBe(201);

  proxyPort = await freePort();
  const node = `127.0.0.1:${listenerPort}`;
  proxy = spawn(HAPROXY, ["-f", path.join(ROOT, "deploy/haproxy-db.cfg"), "-db"], {
    env: {
      ...process.env,
      STRATA_PROXY_DB_BIND: `127.0.0.1:${proxyPort}`,
      STRATA_DB_NODE1: node,
      STRATA_DB_NODE2: node,
      STRATA_DB_NODE3: node,
    },
    stdio: "ignore",
  });
}, 180_000);

afterAll(async () => {
  proxy?.kill("SIGKILL");
  if (ref) await mgmt(server, "DELETE", `/v1/projects/${ref}`);
  await server?.stop();
}, 120_000);

it("admits and refuses each client behind the proxy by the client's own address", async () => {
  // Once the proxy listens and has checked the node.
  await until(async () => ((await outcome(proxyPort, "127.0.0.2")) === owner ? true : undefined), 30_000);
  expect(await outcome(proxyPort, "127.0.0.3")).toMatch(/Address not in tenant allow_list/);
  // Straight to the listener, each host is itself; the proxy's own address, sending no header, is refused.
  expect(await outcome(listenerPort, "127.0.0.2")).toBe(owner);
  expect(await outcome(listenerPort, "127.0.0.3")).toMatch(/Address not in tenant allow_list/);
  expect(await outcome(listenerPort, "127.0.0.1")).toMatch(/Address not in tenant allow_list/);
});

it("reads a PROXY header from a trusted proxy only", async () => {
  const naming = (address: string) =>
    new V1ProxyProtocol(
      INETProtocol.TCP4,
      new Peer(address, 40000),
      new Peer("127.0.0.1", listenerPort),
    ).build();
  // The trusted proxy's v1 header is read as well as HAProxy's v2.
  expect(await outcome(listenerPort, "127.0.0.1", naming("127.0.0.2"))).toBe(owner);
  expect(await outcome(listenerPort, "127.0.0.1", naming("127.0.0.3"))).toMatch(/allow_list/);
  // Another host naming the allowed one gets nowhere: its header is no startup message.
  const forged = await outcome(listenerPort, "127.0.0.3", naming("127.0.0.2"));
  expect(forged).not.toBe(owner);
  // The listener still serves everyone afterwards.
  expect(await outcome(proxyPort, "127.0.0.2")).toBe(owner);
});
