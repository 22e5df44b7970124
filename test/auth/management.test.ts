import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, management } from "./helpers";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The OIDC issuer listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

describe("the Management API's auth families", () => {
  let server: TestServer;
  let issuer: Server;
  let issuerUrl: string;
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const issuerJwk = { ...publicKey.export({ format: "jwk" }), kid: "issuer-key", alg: "RS256", use: "sig" };

  beforeAll(async () => {
    server = await startTestServer();
    // A small OIDC issuer: discovery document and JWKS.
    issuer = createServer((req, res) => {
      res.setHeader("content-type", "application/json");
      if (req.url === "/.well-known/openid-configuration") {
        res.end(JSON.stringify({ issuer: issuerUrl, jwks_uri: `${issuerUrl}/jwks` }));
      } else if (req.url === "/jwks") res.end(JSON.stringify({ keys: [issuerJwk] }));
      else res.writeHead(404).end("{}");
    });
    await new Promise<void>((resolve) => issuer.listen(0, "127.0.0.1", resolve));
    issuerUrl = `http://127.0.0.1:${(issuer.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await server.stop();
    await new Promise((resolve) => issuer.close(resolve));
  });

  it("validates and persists auth config fields, and shows GET-only fields", async () => {
    const initial = await management(server, "GET", "/config/auth");
    expect(initial.body).toMatchObject({ jwt_exp: 3600, mailer_autoconfirm: true, disable_signup: false });
    expect(initial.body).toHaveProperty("saml_allow_encrypted_assertions");
    expect(initial.body).toHaveProperty("hook_send_email_enabled");

    const patched = await management(server, "PATCH", "/config/auth", {
      site_url: "https://app.example.com",
      hook_send_email_enabled: true,
      rate_limit_verify: 50,
    });
    expect(patched.status).toBe(200);
    expect((await management(server, "GET", "/config/auth")).body).toMatchObject({
      site_url: "https://app.example.com",
      hook_send_email_enabled: true,
      rate_limit_verify: 50,
      jwt_exp: 3600,
    });

    for (const bad of [
      { jwt_exp: "3600" },
      { jwt_exp: 5 },
      { password_min_length: 2.5 },
      { disable_signup: "yes" },
      { no_such_field: 1 },
      { saml_allow_encrypted_assertions: true },
    ]) {
      const res = await management(server, "PATCH", "/config/auth", bad);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(new RegExp(Object.keys(bad)[0]));
    }
    expect((await management(server, "GET", "/config/auth")).body.jwt_exp).toBe(3600);
  });

  it("applies rate_limit_token_refresh to the token endpoint at once", async () => {
    await management(server, "PATCH", "/config/auth", { rate_limit_token_refresh: 2 });
    const attempt = () =>
      fetch(`${server.url}/auth/v1/token?grant_type=password`, {
        method: "POST",
        headers: { apikey: server.anonKey, "content-type": "application/json" },
        body: JSON.stringify({ email: "nobody@example.com", password: "whatever" }),
      });
    expect((await attempt()).status).toBe(400);
    expect((await attempt()).status).toBe(400);
    const limited = await attempt();
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as any).error_code).toBe("over_request_rate_limit");
    await management(server, "PATCH", "/config/auth", { rate_limit_token_refresh: 150 });
  });

  it("checks API key names and types, and masks secret keys", async () => {
    expect((await management(server, "POST", "/api-keys", { type: "secret", name: "Bad Name" })).status).toBe(
      400,
    );
    expect(
      (await management(server, "POST", "/api-keys", { type: "legacy", name: "fine_name" })).status,
    ).toBe(400);
    const created = await management(server, "POST", "/api-keys", { type: "secret", name: "worker_key" });
    expect(created.status).toBe(201);
    expect(created.body.api_key).toMatch(/^sb_secret_[A-Za-z0-9_-]{4}·+$/);
    expect(
      (await management(server, "POST", "/api-keys", { type: "secret", name: "worker_key" })).status,
    ).toBe(409);
    const listed = await management(server, "GET", "/api-keys");
    expect(listed.body.map((k: any) => k.type)).toEqual(["legacy", "legacy", "secret"]);
    expect(listed.body.find((k: any) => k.name === "anon").api_key).toBe(server.anonKey);
    expect((await management(server, "GET", "/api-keys/legacy")).body).toEqual({ enabled: true });
    expect((await management(server, "GET", "/api-keys/00000000-0000-4000-8000-000000000000")).status).toBe(
      404,
    );
  });

  it("accepts tokens of an OIDC issuer found through discovery", async () => {
    const tpa = await management(server, "POST", "/config/auth/third-party-auth", {
      oidc_issuer_url: issuerUrl,
    });
    expect(tpa.status).toBe(201);
    expect(tpa.body).toMatchObject({ type: "oidc_issuer_url", resolved_jwks: { keys: [issuerJwk] } });
    const token = await new SignJWT({ role: "authenticated", sub: "external-user", email: "ext@example.com" })
      .setProtectedHeader({ alg: "RS256", kid: "issuer-key" })
      .setIssuer(issuerUrl)
      .setExpirationTime("5m")
      .sign(privateKey);
    expect((await graphql(server, server.anonKey, "{ __typename }", token)).status).toBe(200);

    const user = await fetch(`${server.url}/auth/v1/user`, {
      headers: { apikey: server.anonKey, authorization: `Bearer ${token}` },
    });
    // The data APIs accept it; /auth/v1 acts only for the project's own users, so it is not one.
    expect(user.status).toBe(401);
    const other = await new SignJWT({ role: "service_role", sub: "external-admin" })
      .setProtectedHeader({ alg: "RS256", kid: "issuer-key" })
      .setIssuer(issuerUrl)
      .setExpirationTime("5m")
      .sign(privateKey);
    // A third-party token cannot take the service role, nor come from another issuer.
    expect((await graphql(server, server.anonKey, "{ __typename }", other)).status).toBe(401);
    const foreign = await new SignJWT({ role: "authenticated", sub: "external-user" })
      .setProtectedHeader({ alg: "RS256", kid: "issuer-key" })
      .setIssuer("https://someone-else.example")
      .setExpirationTime("5m")
      .sign(privateKey);
    expect((await graphql(server, server.anonKey, "{ __typename }", foreign)).status).toBe(401);

    expect(
      (await management(server, "POST", "/config/auth/third-party-auth", { jwks_url: "not a url" })).status,
    ).toBe(400);
    expect((await management(server, "POST", "/config/auth/third-party-auth", {})).status).toBe(400);
  });

  it("rejects an imported private key that does not match the algorithm", async () => {
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" });
    const wrong = await management(server, "POST", "/config/auth/signing-keys", {
      algorithm: "RS256",
      private_jwk: ec,
    });
    expect(wrong.status).toBe(400);
    const publicOnly = { ...ec, d: undefined };
    const noPrivate = await management(server, "POST", "/config/auth/signing-keys", {
      algorithm: "ES256",
      private_jwk: publicOnly,
    });
    expect(noPrivate.status).toBe(400);
  });
});
