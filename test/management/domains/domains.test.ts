import http from "node:http";
import type { AddressInfo } from "node:net";
import dns2 from "dns2";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt, waitForStatus } from "../client";

const { Packet } = dns2;

/** A real DNS server on loopback whose records the test sets (Strata asks it via STRATA_DNS_SERVERS). */
function dnsServer() {
  const cname = new Map<string, string>();
  const txt = new Map<string, string>();
  const server = dns2.createUDPServer((request, send) => {
    const response = Packet.createResponseFromRequest(request);
    // The package's types want encoder objects; plain records are what its encoder takes.
    const answer = (record: object) => record as unknown as (typeof response.answers)[number];
    const [question] = request.questions;
    const name = question.name.toLowerCase();
    if (question.type === Packet.TYPE.CNAME && cname.has(name))
      response.answers.push(
        answer({
          name,
          type: Packet.TYPE.CNAME,
          class: Packet.CLASS.IN,
          ttl: 1,
          domain: cname.get(name),
        }),
      );
    if (question.type === Packet.TYPE.TXT && txt.has(name))
      response.answers.push(
        answer({
          name,
          type: Packet.TYPE.TXT,
          class: Packet.CLASS.IN,
          ttl: 1,
          data: txt.get(name),
        }),
      );
    send(response);
  });
  return { server, cname, txt };
}

/** A REST read sent to the test server with the given Host header. */
function restAt(server: TestServer, host: string, key: string): Promise<{ status: number; body: unknown }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: "/rest/v1/marker?select=label",
        headers: { host, apikey: key },
      },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("Custom hostname and vanity subdomain", () => {
  const dns = dnsServer();
  let server: TestServer;
  let ref: string;
  let anonKey: string;
  beforeAll(async () => {
    await new Promise<void>((r) => dns.server.once("listening", () => r()).bind(0, "127.0.0.1"));
    const port = (dns.server.address() as AddressInfo).port;
    server = await startTestServer({ STRATA_DNS_SERVERS: `127.0.0.1:${port}` });
    // A second project, so that being served at a name is told apart from the default project.
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "named", organization_slug: "default-org", db_pass: "named-password-1" },
    });
    ref = created.body.ref;
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");
    const query = await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, {
      body: {
        query:
          "create table marker (label text); insert into marker values ('named project'); grant select on marker to anon",
      },
    });
    expect(query.status).toBe(201);
    const keys = await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`);
    anonKey = (keys.body as { name: string; api_key: string }[]).find((k) => k.name === "anon")!.api_key;
  });
  afterAll(async () => {
    await server.stop();
    dns.server.close();
  });

  it("serves a custom hostname only once its DNS records are verified and it is activated, and stops on delete", async () => {
    const hostname = "api.shop.example";
    expect(await restAt(server, hostname, anonKey)).toMatchObject({ status: 401 });
    const bad = await mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/initialize`, {
      body: { custom_hostname: "not a host" },
    });
    expect(bad.status).toBe(400);
    const started = await mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/initialize`, {
      body: { custom_hostname: "API.shop.example" },
    });
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({
      status: "2_initiated",
      custom_hostname: hostname,
      data: { result: { custom_origin_server: `${ref}.localhost` } },
    });
    const { name, value } = started.body.data.result.ownership_verification;
    expect(name).toBe(`_strata-challenge.${hostname}`);
    expect(value).toMatch(/^\S{20,}$/);

    // Without records: not verified, and activation is refused.
    const unverified = await mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/reverify`);
    expect(unverified.body.status).toBe("2_initiated");
    expect(unverified.body.data.result.verification_errors).toEqual([
      expect.stringMatching(/CNAME record of api\.shop\.example not found/),
      expect.stringMatching(/TXT record _strata-challenge\.api\.shop\.example not found/),
    ]);
    expect((await mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/activate`)).status).toBe(400);

    // The owner creates the records: verified, then activated, then served.
    dns.cname.set(hostname, `${ref}.localhost`);
    dns.txt.set(name, value);
    const verified = await mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/reverify`);
    expect(verified.body).toMatchObject({ status: "4_origin_setup_completed" });
    expect(await restAt(server, hostname, anonKey)).toMatchObject({ status: 401 });
    const active = await mgmt(server, "POST", `/v1/projects/${ref}/custom-hostname/activate`);
    expect(active.body).toMatchObject({ status: "5_services_reconfigured" });
    expect(await restAt(server, `${hostname}:443`, anonKey)).toEqual({
      status: 200,
      body: [{ label: "named project" }],
    });
    const row = await server.controlSql(
      "select project_ref, status from platform.project_hostnames where hostname = $1",
      [hostname],
    );
    expect(row.rows).toEqual([{ project_ref: ref, status: "5_services_reconfigured" }]);

    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}/custom-hostname`)).status).toBe(200);
    expect(await restAt(server, hostname, anonKey)).toMatchObject({ status: 401 });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/custom-hostname`)).body.status).toBe(
      "1_not_started",
    );
  });

  it("reserves a custom hostname only for the project its DNS records verify for, and tells no one of another's claim", async () => {
    const hostname = "shop.owner.example";
    const initialize = (project: string, name = hostname) =>
      mgmt(server, "POST", `/v1/projects/${project}/custom-hostname/initialize`, {
        body: { custom_hostname: name },
      });
    const reverify = (project: string) =>
      mgmt(server, "POST", `/v1/projects/${project}/custom-hostname/reverify`);
    const activate = (project: string) =>
      mgmt(server, "POST", `/v1/projects/${project}/custom-hostname/activate`);
    /** An answer without what is the asking project's own (its name, token, origin): what it could learn. */
    const shapeOf = (body: any) => ({
      status: body.status,
      verification_errors: body.data.result.verification_errors,
      result_status: body.data.result.status,
      errors: body.data.errors,
      messages: body.data.messages,
    });
    const rows = async () =>
      (
        await server.controlSql(
          "select project_ref, status from platform.project_hostnames where hostname = $1 order by status",
          [hostname],
        )
      ).rows;

    // The squatter (the default project) asks first: a request, which holds nothing.
    const squatted = await initialize(server.ref);
    expect(squatted.status).toBe(201);
    const owned = await initialize(ref);
    expect(owned.status).toBe(201);
    expect(shapeOf(owned.body)).toEqual(shapeOf(squatted.body));
    const token = owned.body.data.result.ownership_verification.value;
    expect(token).not.toBe(squatted.body.data.result.ownership_verification.value);

    // The name's DNS owner points it at the owner's project, with the owner's token.
    dns.cname.set(hostname, `${ref}.localhost`);
    dns.txt.set(`_strata-challenge.${hostname}`, token);
    const squatterCheck = await reverify(server.ref);
    expect(squatterCheck.body.status).toBe("2_initiated");
    expect(squatterCheck.body.data.result.verification_errors).toHaveLength(2);
    expect((await activate(server.ref)).status).toBe(400);
    expect((await reverify(ref)).body.status).toBe("4_origin_setup_completed");
    expect((await activate(ref)).body.status).toBe("5_services_reconfigured");

    // Asked for anew by the squatter, a held name answers as a name no one holds does.
    expect((await mgmt(server, "DELETE", `/v1/projects/${server.ref}/custom-hostname`)).status).toBe(200);
    const again = await initialize(server.ref);
    const fresh = await initialize(server.ref, "unused.owner.example");
    expect(shapeOf(again.body)).toEqual(shapeOf(fresh.body));
    expect(JSON.stringify(again.body)).not.toContain(ref);
    await initialize(server.ref);
    expect((await reverify(server.ref)).body.status).toBe("2_initiated");
    expect((await activate(server.ref)).status).toBe(400);
    expect((await mgmt(server, "DELETE", `/v1/projects/${server.ref}/custom-hostname`)).status).toBe(200);

    // Second channels: the rows, and the project the name serves.
    expect(await rows()).toEqual([{ project_ref: ref, status: "5_services_reconfigured" }]);
    expect(await restAt(server, hostname, anonKey)).toEqual({
      status: 200,
      body: [{ label: "named project" }],
    });

    // The DNS owner decides: pointed at the other project, the name moves there once it verifies.
    await initialize(server.ref);
    const moved = (await initialize(server.ref)).body.data.result.ownership_verification.value;
    dns.cname.set(hostname, `${server.ref}.localhost`);
    dns.txt.set(`_strata-challenge.${hostname}`, moved);
    expect((await reverify(server.ref)).body.status).toBe("4_origin_setup_completed");
    expect(await rows()).toEqual([
      { project_ref: ref, status: "2_initiated" },
      { project_ref: server.ref, status: "4_origin_setup_completed" },
    ]);
    expect(await restAt(server, hostname, anonKey)).toMatchObject({ status: 401 });
    expect((await activate(ref)).status).toBe(400);
    expect((await reverify(ref)).body.status).toBe("2_initiated");
    expect((await mgmt(server, "DELETE", `/v1/projects/${server.ref}/custom-hostname`)).status).toBe(200);
    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}/custom-hostname`)).status).toBe(200);
  });

  it("refuses reserved vanity subdomains and names that read like them, or like a project's ref", async () => {
    const lookalike = `${server.ref.slice(0, 10)}-${server.ref.slice(10)}`;
    const digit = `${server.ref.slice(0, 5)}0${server.ref.slice(6)}`;
    for (const name of [
      "www",
      "api",
      "admin",
      "mail",
      "smtp",
      "dashboard",
      "studio",
      "storage",
      "realtime",
      "pooler",
      "localhost",
      "ww-w",
      "w-w-w",
      "adm1n",
      "adrnin",
      "ma1l",
      "st0rage",
      "rea1time",
      "vvww",
      server.ref,
      lookalike,
      digit,
    ]) {
      for (const action of ["check-availability", "activate"]) {
        const res = await mgmt(server, "POST", `/v1/projects/${ref}/vanity-subdomain/${action}`, {
          body: { vanity_subdomain: name },
        });
        expect({ name, action, status: res.status, message: res.body.message }).toEqual({
          name,
          action,
          status: 400,
          message: expect.stringMatching(/reserved/),
        });
      }
    }
    const vanity = await server.controlSql(
      "select count(*)::int as n from platform.project_hostnames where kind = 'vanity'",
    );
    expect(vanity.rows[0].n).toBe(0);
    expect(await restAt(server, "www.localhost", anonKey)).toMatchObject({ status: 401 });
    // Names that only contain a reserved word are anyone's.
    for (const name of ["my-api-shop", "webshop", "mailroom-tools"])
      expect(
        (
          await mgmt(server, "POST", `/v1/projects/${ref}/vanity-subdomain/check-availability`, {
            body: { vanity_subdomain: name },
          })
        ).body,
      ).toEqual({ available: true });
  });

  it("serves a vanity subdomain from its activation until its deletion", async () => {
    const free = await mgmt(server, "POST", `/v1/projects/${ref}/vanity-subdomain/check-availability`, {
      body: { vanity_subdomain: "my-shop" },
    });
    expect(free.body).toEqual({ available: true });
    const bad = await mgmt(server, "POST", `/v1/projects/${ref}/vanity-subdomain/activate`, {
      body: { vanity_subdomain: "No_Way" },
    });
    expect(bad.status).toBe(400);
    const active = await mgmt(server, "POST", `/v1/projects/${ref}/vanity-subdomain/activate`, {
      body: { vanity_subdomain: "my-shop" },
    });
    expect(active).toMatchObject({ status: 201, body: { custom_domain: "my-shop.localhost" } });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/vanity-subdomain`)).body).toEqual({
      status: "active",
      custom_domain: "my-shop.localhost",
    });
    expect(await restAt(server, "my-shop.localhost", anonKey)).toEqual({
      status: 200,
      body: [{ label: "named project" }],
    });
    const other = await mgmt(server, "POST", `/v1/projects/${server.ref}/vanity-subdomain/activate`, {
      body: { vanity_subdomain: "my-shop" },
    });
    expect(other.status).toBe(400);
    const forOther = await mgmt(
      server,
      "POST",
      `/v1/projects/${server.ref}/vanity-subdomain/check-availability`,
      {
        body: { vanity_subdomain: "my-shop" },
      },
    );
    expect(forOther.body).toEqual({ available: false });

    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}/vanity-subdomain`)).status).toBe(200);
    expect(await restAt(server, "my-shop.localhost", anonKey)).toMatchObject({ status: 401 });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/vanity-subdomain`)).body).toEqual({
      status: "not-used",
    });
  });
});
