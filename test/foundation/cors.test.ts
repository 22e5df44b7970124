import { startTestServer, type TestServer } from "../helpers/server";

/** A browser app on another origin can call the data APIs, as on the platform; the Management API stays closed. */
describe("CORS", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  const preflight = (path: string) =>
    fetch(`${server.url}${path}`, {
      method: "OPTIONS",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "apikey,authorization,x-client-info,content-type,prefer",
      },
    });

  it("answers preflights of the data APIs for any origin, with the headers the clients send", async () => {
    for (const path of ["/rest/v1/notes", "/graphql/v1", "/auth/v1/token", "/storage/v1/object/b/x.png"]) {
      const res = await preflight(path);
      expect(res.status).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("access-control-allow-methods")).toContain("PATCH");
      expect(res.headers.get("access-control-allow-headers")).toBe(
        "apikey,authorization,x-client-info,content-type,prefer",
      );
    }
    const read = await fetch(`${server.url}/rest/v1/`, {
      headers: { origin: "https://app.example", apikey: server.anonKey },
    });
    expect(read.headers.get("access-control-allow-origin")).toBe("*");
    expect(read.headers.get("access-control-expose-headers")).toContain("content-range");
  });

  it("gives the Management API no CORS headers", async () => {
    const res = await preflight("/v1/projects");
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });
});
