import { SignJWT } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";

/** Tokens the data APIs must refuse even though they carry the project's own signature. */
describe("Token checks", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  const sign = (header: Record<string, string>, expires: boolean) => {
    const jwt = new SignJWT({ role: "authenticated", sub: "00000000-0000-4000-8000-000000000001" })
      .setProtectedHeader({ alg: "HS256", typ: "JWT", ...header })
      .setIssuedAt();
    if (expires) jwt.setExpirationTime("1h");
    return jwt.sign(new TextEncoder().encode(server.jwtSecret));
  };
  const statuses = async (token: string) => {
    const headers = { apikey: server.anonKey, authorization: `Bearer ${token}` };
    const rest = await fetch(`${server.url}/rest/v1/`, { headers });
    const graphql = await fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    return { rest: rest.status, graphql: graphql.status };
  };

  it("accepts a token signed with the JWT secret that expires", async () => {
    expect(await statuses(await sign({}, true))).toEqual({ rest: 200, graphql: 200 });
  });

  it("refuses a token whose kid names no key of the project, though the JWT secret signed it", async () => {
    expect(await statuses(await sign({ kid: "made-up-key" }, true))).toEqual({ rest: 401, graphql: 401 });
  });

  it("refuses a token without exp", async () => {
    expect(await statuses(await sign({}, false))).toEqual({ rest: 401, graphql: 401 });
  });
});
