import { loadConfig } from "../../src/config";
import { startTestServer, type TestServer } from "../helpers/server";

// The test connects over loopback: 127.0.0.1 is the trusted proxy, ::1 a client that is not one.
const LIMIT = 50;

describe("client addresses behind a trusted proxy (STRATA_TRUSTED_PROXIES)", () => {
  let server: TestServer;
  let port: string;
  beforeAll(async () => {
    server = await startTestServer({
      STRATA_TRUSTED_PROXIES: "127.0.0.1, 10.0.0.0/8",
      MANAGEMENT_RATE_LIMIT: String(LIMIT),
    });
    port = new URL(server.url).port;
  });
  afterAll(() => server.stop());

  /** An unauthenticated Management API call (counted by address) from `host` with an X-Forwarded-For. */
  async function callFrom(host: string, forwardedFor: string): Promise<number> {
    const res = await fetch(`http://${host}:${port}/v1/organizations`, {
      headers: { "x-forwarded-for": forwardedFor },
    });
    await res.text();
    expect(res.status).toBe(401);
    return Number(res.headers.get("x-ratelimit-remaining"));
  }

  /** The addresses the shared rate-limit counters are kept under, seen in the control database. */
  async function countedAddresses(): Promise<string[]> {
    const { rows } = await server.controlSql(
      "select key from platform.rate_limits where key like 'mgmt:ip:%' order by key",
    );
    return rows.map((row: { key: string }) => row.key);
  }

  it("takes the right-most untrusted X-Forwarded-For entry of a request from a trusted proxy", async () => {
    expect(await callFrom("127.0.0.1", "203.0.113.7")).toBe(LIMIT - 1);
    // A client's own spoofed entry (left of what the proxy appended) and the proxies' entries are skipped.
    expect(await callFrom("127.0.0.1", "198.51.100.1, 203.0.113.7, 10.1.2.3")).toBe(LIMIT - 2);
    expect(await callFrom("127.0.0.1", "203.0.113.8")).toBe(LIMIT - 1);
    const keys = await countedAddresses();
    expect(keys.some((key) => key.includes("ip:203.0.113.7:"))).toBe(true);
    expect(keys.some((key) => key.includes("ip:203.0.113.8:"))).toBe(true);
    expect(keys.some((key) => key.includes("198.51.100.1"))).toBe(false);
  });

  it("ignores the header from an address that is not a trusted proxy", async () => {
    const first = await callFrom("[::1]", "203.0.113.9");
    const second = await callFrom("[::1]", "203.0.113.10");
    expect(second).toBe(first - 1);
    const keys = await countedAddresses();
    expect(keys.some((key) => key.includes("ip:::1:"))).toBe(true);
    expect(keys.some((key) => key.includes("203.0.113.9") || key.includes("203.0.113.10"))).toBe(false);
  });

  it("counts auth's per-address limits for the forwarded client, and a client cannot spoof its way out", async () => {
    const patched = await fetch(`${server.url}/v1/projects/${server.ref}/config/auth`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
      body: JSON.stringify({ rate_limit_verify: 2 }),
    });
    expect(patched.status).toBe(200);
    /** A failing OTP verification (limited per address) from `host` with an X-Forwarded-For. */
    const verifyFrom = async (host: string, forwardedFor: string) => {
      const res = await fetch(`http://${host}:${port}/auth/v1/verify`, {
        method: "POST",
        headers: {
          apikey: server.anonKey,
          "content-type": "application/json",
          "x-forwarded-for": forwardedFor,
        },
        body: JSON.stringify({ type: "email", email: "nobody@example.invalid", token: "000000" }),
      });
      await res.text();
      return res.status;
    };
    // Untrusted: a new forged address each time is still the one socket's address, refused on the third.
    const spoofed = [];
    for (const forged of ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
      spoofed.push(await verifyFrom("[::1]", forged));
    expect(spoofed.slice(0, 2)).not.toContain(429);
    expect(spoofed[2]).toBe(429);
    // Through the trusted proxy, each client has its own count; the same client is refused on its third.
    const proxied = [];
    for (const client of ["203.0.113.21", "203.0.113.22", "203.0.113.21", "203.0.113.21"])
      proxied.push(await verifyFrom("127.0.0.1", client));
    expect(proxied.slice(0, 3)).not.toContain(429);
    expect(proxied[3]).toBe(429);
    const { rows } = await server.controlSql(
      "select key from platform.rate_limits where key like 'auth-verify-%' order by key",
    );
    const keys = rows.map((row: { key: string }) => row.key);
    expect(keys.filter((key) => key.endsWith(`${server.ref}:203.0.113.21`))).toHaveLength(1);
    expect(keys.filter((key) => key.endsWith(`${server.ref}:::1`))).toHaveLength(1);
    expect(keys.some((key) => key.includes("192.0.2."))).toBe(false);
  });

  it("refuses a setting that is not a list of addresses or CIDRs", () => {
    for (const value of ["loopback", "10.0.0.1/8", "127.0.0.1;10.0.0.0/8", "300.1.1.1"]) {
      expect(() =>
        loadConfig({
          DATABASE_URL: "postgres://localhost/x",
          JWT_SECRET: "x".repeat(32),
          STRATA_TRUSTED_PROXIES: value,
        }),
      ).toThrow(/STRATA_TRUSTED_PROXIES/);
    }
  });
});
