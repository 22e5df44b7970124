import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, management, waitForTable } from "./helpers";

const NO_STORAGE = { auth: { persistSession: false, autoRefreshToken: false } };

describe("email/password users through supabase-js", () => {
  let server: TestServer;
  let client: () => SupabaseClient;

  /** Reads the bodies of `notes` through GraphQL. */
  async function notesThroughGraphql(apikey: string, token?: string): Promise<string[]> {
    const res = await graphql(server, apikey, "{ notesCollection { edges { node { body } } } }", token);
    expect(res.body.errors).toBeUndefined();
    return res.body.data.notesCollection.edges.map((e: { node: { body: string } }) => e.node.body);
  }

  /** Reads the bodies of `notes` through REST. */
  async function notesThroughRest(apikey: string, token?: string): Promise<string[]> {
    const res = await fetch(`${server.url}/rest/v1/notes?select=body`, {
      headers: { apikey, authorization: `Bearer ${token ?? apikey}` },
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { body: string }[]).map((r) => r.body);
  }

  beforeAll(async () => {
    server = await startTestServer();
    client = () => createClient(server.url, server.anonKey, NO_STORAGE);
    await server.sql(`
      create table public.notes (
        id serial primary key,
        body text not null,
        owner uuid not null default auth.uid()
      );
      alter table public.notes enable row level security;
      create policy notes_of_owner on public.notes using (owner = auth.uid()) with check (owner = auth.uid());
      grant select, insert on public.notes to authenticated;
      grant select on public.notes to anon;
      grant usage on sequence public.notes_id_seq to authenticated;`);
    await waitForTable(server, "notes");
  });
  afterAll(() => server.stop());

  it("keeps each user's rows to that user", async () => {
    const alice = client();
    const signUp = await alice.auth.signUp({ email: "alice@example.com", password: "correct horse" });
    expect(signUp.error).toBeNull();
    expect(signUp.data.session?.access_token).toBeTruthy();
    expect(signUp.data.user?.email).toBe("alice@example.com");

    const signIn = await alice.auth.signInWithPassword({
      email: "alice@example.com",
      password: "correct horse",
    });
    expect(signIn.error).toBeNull();
    const aliceToken = signIn.data.session!.access_token;
    const { data: me } = await alice.auth.getUser();
    expect(me.user?.id).toBe(signIn.data.user!.id);

    // Alice's row: its owner column is filled by auth.uid() from her token.
    const inserted = await alice.from("notes").insert({ body: "alice secret" }).select("owner").single();
    expect(inserted.error).toBeNull();
    expect(inserted.data).toEqual({ owner: signIn.data.user!.id });

    const bob = client();
    await bob.auth.signUp({ email: "bob@example.com", password: "battery staple" });
    const bobToken = (await bob.auth.getSession()).data.session!.access_token;

    expect(await notesThroughGraphql(server.anonKey, aliceToken)).toEqual(["alice secret"]);
    expect(await notesThroughGraphql(server.anonKey, bobToken)).toEqual([]);
    expect(await notesThroughGraphql(server.anonKey)).toEqual([]);
    expect(await notesThroughGraphql(server.serviceKey)).toEqual(["alice secret"]);

    expect(await notesThroughRest(server.anonKey, bobToken)).toEqual([]);
    expect(await notesThroughRest(server.anonKey)).toEqual([]);
    expect(await notesThroughRest(server.anonKey, aliceToken)).toEqual(["alice secret"]);
    expect(await notesThroughRest(server.serviceKey)).toEqual(["alice secret"]);
    expect((await bob.from("notes").select("body")).data).toEqual([]);
  });

  it("rotates refresh tokens and refuses a reused one once the reuse interval has passed", async () => {
    await management(server, "PATCH", "/config/auth", { security_refresh_token_reuse_interval: 0 });
    const carol = client();
    const { data } = await carol.auth.signUp({ email: "carol@example.com", password: "long enough" });
    const first = data.session!.refresh_token;
    const refreshed = await carol.auth.refreshSession({ refresh_token: first });
    expect(refreshed.error).toBeNull();
    expect(refreshed.data.session!.refresh_token).not.toBe(first);
    await new Promise((r) => setTimeout(r, 1100)); // past the (zero-second) reuse interval

    const reuse = await client().auth.refreshSession({ refresh_token: first });
    expect(reuse.error?.code).toBe("refresh_token_already_used");
    // Reuse ends the whole session: the rotated token is gone too.
    const after = await client().auth.refreshSession({
      refresh_token: refreshed.data.session!.refresh_token,
    });
    expect(after.error).not.toBeNull();
  });

  it("honours the auth config as soon as it changes", async () => {
    await management(server, "PATCH", "/config/auth", { password_min_length: 12, jwt_exp: 120 });
    const weak = await client().auth.signUp({ email: "dave@example.com", password: "short pass" });
    expect(weak.error?.code).toBe("weak_password");
    const ok = await client().auth.signUp({ email: "dave@example.com", password: "a longer passphrase" });
    expect(ok.data.session?.expires_in).toBe(120);

    await management(server, "PATCH", "/config/auth", { disable_signup: true });
    const closed = await client().auth.signUp({ email: "erin@example.com", password: "a longer passphrase" });
    expect(closed.error?.code).toBe("signup_disabled");
    await management(server, "PATCH", "/config/auth", { disable_signup: false });
  });

  it("writes nothing when a sign-up needs a confirmation mail but no SMTP server is configured", async () => {
    await management(server, "PATCH", "/config/auth", { mailer_autoconfirm: false });
    const pending = await client().auth.signUp({
      email: "gina@example.com",
      password: "a longer passphrase",
    });
    expect(pending.error?.status).toBe(500);
    expect(pending.data.user).toBeNull();
    const { rows } = await server.sql("select count(*)::int as n from auth.users where email = $1", [
      "gina@example.com",
    ]);
    expect(rows[0].n).toBe(0);
    await management(server, "PATCH", "/config/auth", { mailer_autoconfirm: true });
  });

  it("signs in anonymously only when enabled, within the configured rate", async () => {
    const refused = await client().auth.signInAnonymously();
    expect(refused.error?.code).toBe("anonymous_provider_disabled");
    await management(server, "PATCH", "/config/auth", {
      external_anonymous_users_enabled: true,
      rate_limit_anonymous_users: 1,
    });
    const guest = client();
    const signedIn = await guest.auth.signInAnonymously({ options: { data: { theme: "dark" } } });
    expect(signedIn.error).toBeNull();
    expect(signedIn.data.user).toMatchObject({ is_anonymous: true, user_metadata: { theme: "dark" } });
    expect((await guest.auth.getUser()).data.user?.id).toBe(signedIn.data.user!.id);
    expect((await guest.from("notes").select("body")).data).toEqual([]);
    const limited = await client().auth.signInAnonymously();
    expect(limited.error?.code).toBe("over_request_rate_limit");
  });

  it("updates the user and signs out", async () => {
    const frank = client();
    await frank.auth.signUp({ email: "frank@example.com", password: "a longer passphrase" });
    const updated = await frank.auth.updateUser({
      data: { nickname: "frankie" },
      password: "another passphrase",
    });
    expect(updated.error).toBeNull();
    expect(updated.data.user?.user_metadata).toEqual({ nickname: "frankie" });
    const again = await client().auth.signInWithPassword({
      email: "frank@example.com",
      password: "another passphrase",
    });
    expect(again.error).toBeNull();

    const token = (await frank.auth.getSession()).data.session!.access_token;
    expect((await frank.auth.signOut()).error).toBeNull();
    const res = await fetch(`${server.url}/auth/v1/user`, {
      headers: { apikey: server.anonKey, authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as any).error_code).toBe("session_not_found");
  });

  it("refuses wrong credentials in the auth server's error shape", async () => {
    const res = await fetch(`${server.url}/auth/v1/token?grant_type=password`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ email: "alice@example.com", password: "wrong" }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      code: 400,
      error_code: "invalid_credentials",
      msg: "Invalid login credentials",
    });
  });
});
