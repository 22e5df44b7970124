import { createClient } from "@supabase/supabase-js";
import { userToken } from "../rest/fixtures";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";

/**
 * The project's owner owns the platform schemas its data lives in (storage, realtime, as on the platform), so it may
 * add triggers to their tables or replace a table with a view. Whatever Strata does there on the project's
 * behalf (public and signed downloads, signed uploads, listing buckets) must then run as that owner, never
 * as the superuser: the tenant's trigger and view functions record who ran them.
 */
describe("Strata's work in the schemas the project's owner owns", () => {
  let server: TestServer;
  const sql = (query: string) =>
    mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, { body: { query } });
  const audit = async () =>
    (await server.sql("select who, su from public.audit order by at")).rows as { who: string; su: boolean }[];

  beforeAll(async () => {
    server = await startTestServer();
    const made = await sql(`
      create table public.audit (at timestamptz default clock_timestamp(), who text, su boolean);
      grant insert on public.audit to public;
      create function public.probe() returns trigger language plpgsql as $$
      begin
        insert into public.audit (who, su)
          values (current_user, (select rolsuper from pg_roles where rolname = current_user));
        begin
          execute 'copy (select 1) to program ''true''';
          insert into public.audit (who, su) values ('program ran', true);
        exception when others then null;
        end;
        return coalesce(new, old);
      end $$;
      create trigger probe before insert or update or delete on storage.objects
        for each row execute function public.probe();
      create trigger probe_buckets before insert or update or delete on storage.buckets
        for each row execute function public.probe();`);
    expect(made.status).toBe(201);
  });
  afterAll(() => server.stop());

  it("runs the tenant's triggers on storage tables as the owner, whatever Strata does there", async () => {
    const service = createClient(server.url, server.serviceKey, { auth: { persistSession: false } });
    const anon = createClient(server.url, server.anonKey, { auth: { persistSession: false } });
    expect((await service.storage.createBucket("open", { public: true })).error).toBeNull();
    expect((await service.storage.createBucket("closed", { public: false })).error).toBeNull();
    expect((await service.storage.from("open").upload("a.txt", "hello")).error).toBeNull();
    expect((await service.storage.from("closed").upload("b.txt", "secret")).error).toBeNull();
    // Public download, signed download, signed upload: Strata acts past RLS on the project's behalf.
    expect(await (await fetch(anon.storage.from("open").getPublicUrl("a.txt").data.publicUrl)).text()).toBe(
      "hello",
    );
    const signed = await service.storage.from("closed").createSignedUrl("b.txt", 60);
    expect(await (await fetch(signed.data!.signedUrl)).text()).toBe("secret");
    const upload = await service.storage.from("closed").createSignedUploadUrl("c.txt");
    expect(
      (await anon.storage.from("closed").uploadToSignedUrl("c.txt", upload.data!.token, "signed")).error,
    ).toBeNull();
    expect((await service.storage.from("closed").move("c.txt", "d.txt")).error).toBeNull();
    expect((await service.storage.from("closed").remove(["d.txt"])).error).toBeNull();
    // The Management API lists the buckets.
    const listed = await mgmt(server, "GET", `/v1/projects/${server.ref}/storage/buckets`);
    expect(listed.body.map((b: { name: string }) => b.name).sort()).toEqual(["closed", "open"]);

    const rows = await audit();
    expect(rows.length).toBeGreaterThan(4);
    expect(rows.filter((r) => r.su)).toEqual([]);
  });

  it("never reads a view the owner put in a table's place as the superuser", async () => {
    const swapped = await sql(`
      create function public.spy() returns boolean language plpgsql as $$
      begin
        insert into public.audit (who, su)
          values (current_user, (select rolsuper from pg_roles where rolname = current_user));
        return true;
      end $$;
      alter table storage.buckets rename to buckets_kept;
      create view storage.buckets as select * from storage.buckets_kept where public.spy();`);
    expect(swapped.status).toBe(201);
    await server.sql("delete from public.audit");
    await mgmt(server, "GET", `/v1/projects/${server.ref}/storage/buckets`);
    await fetch(`${server.url}/storage/v1/object/public/open/a.txt`);
    expect((await audit()).filter((r) => r.su)).toEqual([]);
  });

  it("checks a private channel's policies on realtime.messages off any superuser session", async () => {
    // The check's transaction is rolled back: sequences (never rolled back) count who ran the policy.
    const made = await sql(`
      create sequence public.policy_runs;
      create sequence public.superuser_runs;
      grant usage on sequence public.policy_runs, public.superuser_runs to public;
      create function public.member(topic text) returns boolean language plpgsql as $$
      begin
        perform nextval('public.policy_runs');
        begin
          execute 'reset role';
          if (select rolsuper from pg_roles where rolname = current_user) then
            perform nextval('public.superuser_runs');
          end if;
        exception when others then null;
        end;
        return topic = 'club';
      end $$;
      grant execute on function public.member(text) to authenticated;
      create policy "club reads" on realtime.messages for select to authenticated
        using (public.member((select realtime.topic())));`);
    expect(made.status).toBe(201);
    const client = createClient(server.url, server.anonKey, { auth: { persistSession: false } });
    client.realtime.setAuth(await userToken(server, "33333333-3333-4333-8333-333333333333"));
    const channel = client.channel("club", { config: { private: true } });
    const status = await new Promise<string>((resolve) => channel.subscribe((s) => resolve(s)));
    await client.removeAllChannels();
    client.realtime.disconnect();
    expect(status).toBe("SUBSCRIBED");
    const { rows } = await server.sql(
      "select (select last_value from public.policy_runs) as runs, (select is_called from public.superuser_runs) as su",
    );
    expect(rows).toEqual([{ runs: expect.any(String), su: false }]);
    expect(Number(rows[0].runs)).toBeGreaterThan(0);
  });
});
