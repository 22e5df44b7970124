import http from "node:http";
import type { AddressInfo } from "node:net";
import { allowLoopbackForTests, fetchPublicJson } from "../../src/net/outbound";

// The receiver listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

/** The fetch behind third-party JWKS and OIDC discovery: what it refuses to reach. */
describe("Fetching a third party's keys", () => {
  let server: http.Server;
  let base: string;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === "/jwks") res.end(JSON.stringify({ keys: [] }));
      else if (req.url === "/to-metadata")
        res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data" }).end();
      else if (req.url === "/huge") res.end(JSON.stringify({ keys: [], pad: "x".repeat(1024 * 1024) }));
      else res.writeHead(404).end("secret internal page");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("reads a JSON document from this machine's loopback (local providers, with the tests' switch)", async () => {
    expect(await fetchPublicJson(`${base}/jwks`)).toEqual({ keys: [] });
  });

  it("refuses internal addresses, plain http elsewhere, other schemes, bad redirects and huge answers", async () => {
    await expect(fetchPublicJson("http://169.254.169.254/latest/meta-data")).rejects.toThrow(
      /private or internal/,
    );
    await expect(fetchPublicJson("https://10.1.2.3/jwks")).rejects.toThrow(/private or internal/);
    await expect(fetchPublicJson("https://[fd00::1]/jwks")).rejects.toThrow(/private or internal/);
    await expect(fetchPublicJson("http://93.184.215.14/jwks")).rejects.toThrow(/must use https/);
    await expect(fetchPublicJson("file:///etc/passwd")).rejects.toThrow(/not allowed/);
    await expect(fetchPublicJson(`${base}/to-metadata`)).rejects.toThrow(/private or internal/);
    await expect(fetchPublicJson(`${base}/huge`)).rejects.toThrow(/larger than/);
    // What answered is never echoed.
    await expect(fetchPublicJson(`${base}/missing`)).rejects.toThrow(/answered 404$/);
  });
});
