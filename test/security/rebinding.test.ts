import http from "node:http";
import type { AddressInfo } from "node:net";
import { allowLoopbackForTests, fetchPublicJson } from "../../src/net/outbound";

// The check's DNS answer for `rebind.test` is this machine; the system resolver knows no such name. A fetch
// that resolved the name again (where a rebinding answer could differ) would fail to connect at all.
jest.mock("node:dns/promises", () => {
  const actual = jest.requireActual("node:dns/promises");
  return {
    ...actual,
    lookup: (host: string, options: unknown) =>
      host === "rebind.test"
        ? Promise.resolve([{ address: "127.0.0.1", family: 4 }])
        : actual.lookup(host, options),
  };
});

// The answer is loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

describe("Fetching a third party's keys, against DNS rebinding", () => {
  let server: http.Server;
  let port = 0;
  beforeAll(async () => {
    server = http.createServer((req, res) => res.end(JSON.stringify({ keys: [], host: req.headers.host })));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("connects to the address its check approved, without resolving the name again", async () => {
    expect(await fetchPublicJson(`http://rebind.test:${port}/jwks`)).toEqual({
      keys: [],
      host: `rebind.test:${port}`,
    });
  });
});
