import { createClient } from "@supabase/supabase-js";
import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, management } from "./helpers";

describe("signing key rotation", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  const signIn = async (email: string) => {
    const client = createClient(server.url, server.anonKey, { auth: { persistSession: false } });
    const { data, error } = await client.auth.signUp({ email, password: "rotation passphrase" });
    expect(error).toBeNull();
    return data.session!.access_token;
  };
  const accepted = async (token: string) =>
    (await graphql(server, server.anonKey, "{ __typename }", token)).status;
  const jwksKids = async () => {
    const res = await fetch(`${server.url}/auth/v1/.well-known/jwks.json`);
    return ((await res.json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid).sort();
  };

  it("moves signing from the JWT secret to a standby key, then revokes the old key", async () => {
    // Before any signing key: tokens are HS256 with the JWT secret, and the JWKS is empty.
    const legacyToken = await signIn("before@example.com");
    expect(decodeProtectedHeader(legacyToken)).toMatchObject({ alg: "HS256" });
    expect(await jwksKids()).toEqual([]);

    // An imported standby ES256 key: tokens signed with it verify before it is in use.
    const { privateKey } = await import("node:crypto").then((c) =>
      c.generateKeyPairSync("ec", { namedCurve: "P-256" }),
    );
    const privateJwk = privateKey.export({ format: "jwk" });
    const first = await management(server, "POST", "/config/auth/signing-keys", {
      algorithm: "ES256",
      private_jwk: privateJwk,
    });
    expect(first.body.status).toBe("standby");
    expect(first.body.public_jwk).not.toHaveProperty("d");
    const external = await new SignJWT({ role: "authenticated", sub: "3a0d6a7e-0000-4000-8000-000000000001" })
      .setProtectedHeader({ alg: "ES256", kid: first.body.id })
      .setExpirationTime("5m")
      .sign(await importJWK(privateJwk as any, "ES256"));
    expect(await accepted(external)).toBe(200);

    // In use: new tokens carry its kid.
    await management(server, "PATCH", `/config/auth/signing-keys/${first.body.id}`, { status: "in_use" });
    const firstToken = await signIn("first@example.com");
    expect(decodeProtectedHeader(firstToken)).toMatchObject({ alg: "ES256", kid: first.body.id });
    expect(decodeJwt(firstToken)).toMatchObject({ role: "authenticated", aud: "authenticated" });
    expect(await accepted(firstToken)).toBe(200);

    // A second key takes over; the JWKS lists both while the first is merely standby again.
    const second = await management(server, "POST", "/config/auth/signing-keys", { algorithm: "RS256" });
    await management(server, "PATCH", `/config/auth/signing-keys/${first.body.id}`, { status: "standby" });
    await management(server, "PATCH", `/config/auth/signing-keys/${second.body.id}`, { status: "in_use" });
    expect(await jwksKids()).toEqual([first.body.id, second.body.id].sort());
    const secondToken = await signIn("second@example.com");
    expect(decodeProtectedHeader(secondToken)).toMatchObject({ alg: "RS256", kid: second.body.id });
    expect(await accepted(firstToken)).toBe(200);

    // Revoking the first key refuses its tokens on the next request.
    const revoked = await management(server, "PATCH", `/config/auth/signing-keys/${first.body.id}`, {
      status: "revoked",
    });
    expect(revoked.body.status).toBe("revoked");
    expect(await accepted(firstToken)).toBe(401);
    expect(await accepted(secondToken)).toBe(200);
    expect(await jwksKids()).toEqual([second.body.id]);

    // A revoked key cannot be deleted before the configured while has passed.
    expect((await management(server, "DELETE", `/config/auth/signing-keys/${first.body.id}`)).status).toBe(
      409,
    );
  });

  it("makes the previous in_use key previously_used", async () => {
    const a = await management(server, "POST", "/config/auth/signing-keys", {
      algorithm: "ES256",
      status: "in_use",
    });
    const b = await management(server, "POST", "/config/auth/signing-keys", {
      algorithm: "ES256",
      status: "in_use",
    });
    const { body } = await management(server, "GET", "/config/auth/signing-keys");
    const status = (id: string) => body.keys.find((k: { id: string }) => k.id === id).status;
    expect(status(a.body.id)).toBe("previously_used");
    expect(status(b.body.id)).toBe("in_use");
    // Tokens of a previously used key stay valid until it is revoked.
    expect(await jwksKids()).toEqual(expect.arrayContaining([a.body.id, b.body.id]));
  });

  it("registers the JWT secret as the in_use legacy key", async () => {
    const legacy = await management(server, "POST", "/config/auth/signing-keys/legacy");
    expect(legacy.status).toBe(201);
    expect(legacy.body).toMatchObject({ algorithm: "HS256", status: "in_use", public_jwk: null });
    const token = await signIn("legacy@example.com");
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: "HS256", kid: legacy.body.id });
    expect(await accepted(token)).toBe(200);
    expect((await management(server, "GET", "/config/auth/signing-keys/legacy")).body.id).toBe(
      legacy.body.id,
    );
  });
});
