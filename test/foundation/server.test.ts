import { startTestServer, type TestServer } from "../helpers/server";

describe("the server", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("reports health with database reachability", async () => {
    const res = await fetch(`${server.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", database: "reachable" });
  });

  it("answers GraphQL with the anon key", async () => {
    const res = await fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { "content-type": "application/json", apiKey: server.anonKey },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ data: { __typename: "Query" } });
  });

  it("refuses data requests without a valid API key", async () => {
    const post = (headers: Record<string, string>) =>
      fetch(`${server.url}/graphql/v1`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ query: "{ __typename }" }),
      });
    const missing = await post({});
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as any).message).toMatch(/No API key/);
    const wrong = await post({ apikey: "not-a-key" });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as any).message).toMatch(/Invalid API key/);
  });

  it("serves Prometheus metrics", async () => {
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    // The requests of the test before: GraphQL answered 401, counted and timed under their interface.
    expect(text).toMatch(/^strata_http_requests_total\{interface="graphql",status="401"\} [1-9]\d*$/m);
    expect(text).toMatch(/^strata_http_request_duration_seconds_count\{interface="graphql"\} [1-9]\d*$/m);
    expect(text).toMatch(
      /^strata_http_request_duration_seconds_bucket\{le="\+Inf",interface="graphql"\} [1-9]\d*$/m,
    );
  });

  it("prints the default project's keys: legacy keys are HS256 JWTs of the project secret", async () => {
    const [header, payload] = server.anonKey
      .split(".")
      .slice(0, 2)
      .map((p) => JSON.parse(Buffer.from(p, "base64url").toString() || "{}"));
    expect(header).toMatchObject({ alg: "HS256", typ: "JWT" });
    expect(payload).toMatchObject({ role: "anon", iss: "strata" });
    expect(payload.exp).toBeGreaterThan(payload.iat);
    expect(server.ref).toMatch(/^[a-z]{20}$/);
  });
});
