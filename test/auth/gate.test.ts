import { generateKeyPairSync } from "node:crypto";
import { SignJWT, UnsecuredJWT } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, management } from "./helpers";

const TYPENAME = "{ __typename }";

describe("the data API gate", () => {
  let server: TestServer;
  const secret = () => new TextEncoder().encode(server.jwtSecret);
  const now = () => Math.floor(Date.now() / 1000);
  const userToken = (claims: Record<string, unknown> = {}) =>
    new SignJWT({ role: "authenticated", sub: "8f5e2c1a-0000-4000-8000-000000000001", ...claims })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(secret());

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  async function refusedWith(apikey: string | undefined, bearer: string | undefined, message: RegExp) {
    const res = await graphql(server, apikey, TYPENAME, bearer);
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(message);
  }

  it("refuses a request without an API key, and one with an unknown key", async () => {
    await refusedWith(undefined, undefined, /No API key/);
    await refusedWith("sb_publishable_doesnotexist", undefined, /Invalid API key/);
    await refusedWith("not-a-key", undefined, /Invalid API key/);
  });

  it("accepts publishable and secret keys until they are deleted", async () => {
    const pub = await management(server, "POST", "/api-keys", { type: "publishable", name: "web_app" });
    const sec = await management(server, "POST", "/api-keys?reveal=true", {
      type: "secret",
      name: "backend",
    });
    expect(pub.status).toBe(201);
    expect(pub.body.api_key).toMatch(/^sb_publishable_/);
    expect(sec.body.api_key).toMatch(/^sb_secret_/);

    for (const key of [pub.body.api_key, sec.body.api_key]) {
      expect((await graphql(server, key, TYPENAME)).status).toBe(200);
      // The key itself as bearer is not a JWT: the key's role applies.
      expect((await graphql(server, key, TYPENAME, key)).status).toBe(200);
    }
    const masked = await management(server, "GET", `/api-keys/${sec.body.id}`);
    expect(masked.body.api_key).not.toBe(sec.body.api_key);

    expect((await management(server, "DELETE", `/api-keys/${sec.body.id}`)).status).toBe(200);
    await refusedWith(sec.body.api_key, undefined, /Invalid API key/);
    expect((await graphql(server, pub.body.api_key, TYPENAME)).status).toBe(200);
  });

  it("runs an opaque key's request as its role", async () => {
    const sec = await management(server, "POST", "/api-keys?reveal=true", {
      type: "secret",
      name: "role_probe",
    });
    // current_user inside a view is the role the request runs as.
    await server.sql(`
      create view public.whoami as select 1 as id, current_user::text as role;
      comment on view public.whoami is e'@graphql({"primary_key_columns": ["id"]})';
      grant select on public.whoami to anon, service_role;`);
    const roleOf = async (apikey: string) => {
      // The DDL watch rebuilds the GraphQL schema shortly after the view appears.
      for (let i = 0; ; i++) {
        const res = await graphql(server, apikey, "{ whoamiCollection { edges { node { role } } } }");
        if (!res.body.errors || i === 50) return res.body.data?.whoamiCollection.edges[0].node.role;
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    expect(await roleOf(sec.body.api_key)).toBe("service_role");
    const pub = await management(server, "POST", "/api-keys", {
      type: "publishable",
      name: "role_probe_web",
    });
    expect(await roleOf(pub.body.api_key)).toBe("anon");
  });

  it("switches the legacy keys off and on", async () => {
    expect((await management(server, "PUT", "/api-keys/legacy?enabled=false")).body).toEqual({
      enabled: false,
    });
    await refusedWith(server.anonKey, undefined, /Invalid API key/);
    const listed = await management(server, "GET", "/api-keys");
    expect(listed.body.some((k: any) => k.type === "legacy")).toBe(false);
    expect((await management(server, "PUT", "/api-keys/legacy?enabled=true")).body).toEqual({
      enabled: true,
    });
    expect((await graphql(server, server.anonKey, TYPENAME)).status).toBe(200);
  });

  it("accepts a valid user JWT", async () => {
    expect((await graphql(server, server.anonKey, TYPENAME, await userToken())).status).toBe(200);
  });

  it("refuses unsigned, expired, not-yet-valid and tampered tokens", async () => {
    const unsigned = new UnsecuredJWT({ role: "service_role" })
      .setIssuedAt()
      .setExpirationTime("5m")
      .encode();
    await refusedWith(server.anonKey, unsigned, /Invalid JWT: unsupported algorithm none/);

    const expired = await new SignJWT({ role: "authenticated" })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuedAt(now() - 600)
      .setExpirationTime(now() - 60)
      .sign(secret());
    await refusedWith(server.anonKey, expired, /expired/);

    const early = await new SignJWT({ role: "authenticated" })
      .setProtectedHeader({ alg: "HS256" })
      .setNotBefore(now() + 3600)
      .setExpirationTime("2h")
      .sign(secret());
    await refusedWith(server.anonKey, early, /Invalid JWT/);

    const [header, , signature] = (await userToken()).split(".");
    const forged = Buffer.from(JSON.stringify({ role: "service_role", exp: now() + 300 })).toString(
      "base64url",
    );
    await refusedWith(server.anonKey, `${header}.${forged}.${signature}`, /signature/);
  });

  it("refuses an HS256 token whose secret is a published public key", async () => {
    const key = await management(server, "POST", "/config/auth/signing-keys", { algorithm: "ES256" });
    const publicKeyAsSecret = new TextEncoder().encode(JSON.stringify(key.body.public_jwk));
    const confused = await new SignJWT({ role: "service_role" })
      .setProtectedHeader({ alg: "HS256", kid: key.body.id })
      .setExpirationTime("5m")
      .sign(publicKeyAsSecret);
    await refusedWith(server.anonKey, confused, /does not belong to key/);
    const noKid = await new SignJWT({ role: "service_role" })
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("5m")
      .sign(publicKeyAsSecret);
    await refusedWith(server.anonKey, noKid, /signature/);
  });

  it("refuses a token with an unknown kid", async () => {
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const stranger = await new SignJWT({ role: "authenticated" })
      .setProtectedHeader({ alg: "ES256", kid: "0b7c54a4-0000-4000-8000-00000000dead" })
      .setExpirationTime("5m")
      .sign(privateKey);
    await refusedWith(server.anonKey, stranger, /unknown signing key/);
  });

  it("refuses a role the authenticator may not assume", async () => {
    await refusedWith(
      server.anonKey,
      await userToken({ role: "postgres" }),
      /role "postgres" is not allowed/,
    );
    await refusedWith(server.anonKey, await userToken({ role: "no_such_role" }), /not allowed/);
  });

  it("accepts tokens of a third-party issuer with a custom JWKS, until it is removed", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const jwk = { ...publicKey.export({ format: "jwk" }), kid: "partner-1", alg: "ES256", use: "sig" };
    const tpa = await management(server, "POST", "/config/auth/third-party-auth", {
      custom_jwks: { keys: [jwk] },
    });
    expect(tpa.status).toBe(201);
    expect(tpa.body.resolved_jwks).toEqual({ keys: [jwk] });
    const token = await new SignJWT({ role: "authenticated", sub: "partner-user" })
      .setProtectedHeader({ alg: "ES256", kid: "partner-1" })
      .setExpirationTime("5m")
      .sign(privateKey);
    expect((await graphql(server, server.anonKey, TYPENAME, token)).status).toBe(200);
    await management(server, "DELETE", `/config/auth/third-party-auth/${tpa.body.id}`);
    await refusedWith(server.anonKey, token, /Invalid JWT/);
  });

  it("publishes only public members in the JWKS, cacheable for at most 10 minutes", async () => {
    await management(server, "POST", "/config/auth/signing-keys", { algorithm: "RS256" });
    await management(server, "POST", "/config/auth/signing-keys", { algorithm: "HS256" });
    const res = await fetch(`${server.url}/auth/v1/.well-known/jwks.json`);
    const maxAge = Number(/max-age=(\d+)/.exec(res.headers.get("cache-control") ?? "")?.[1]);
    expect(maxAge).toBeLessThanOrEqual(600);
    const { keys } = (await res.json()) as { keys: Record<string, unknown>[] };
    expect(keys.map((k) => k.kty).sort()).toEqual(["EC", "RSA"]);
    for (const key of keys) {
      for (const member of ["d", "p", "q", "dp", "dq", "qi", "k"]) expect(key).not.toHaveProperty(member);
      expect(key.key_ops).toEqual(["verify"]);
    }
  });
});
