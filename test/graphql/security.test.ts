import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate, userToken, type GraphqlResult } from "./client";

describe("GraphQL security: per-role schemas and row level security", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(
      server,
      `comment on schema public is '@graphql({"inflect_names": true, "introspection": true})';
       create table note(
         id serial primary key,
         owner uuid not null,
         body text not null,
         secret text
       );
       alter table note enable row level security;
       create policy own_notes on note for select using (owner = auth.uid());
       insert into note(owner, body, secret) values
         ('00000000-0000-0000-0000-00000000000a', 'from a', 's-a'),
         ('00000000-0000-0000-0000-00000000000b', 'from b', 's-b');
       revoke select on note from anon, authenticated;
       grant select (id, owner, body) on note to authenticated;`,
    );
  });
  afterAll(() => server.stop());

  const bodies = async (token: string) =>
    (
      await graphql(
        server,
        `
          {
            noteCollection {
              edges {
                node {
                  body
                }
              }
            }
          }
        `,
        { token },
      )
    ).data.noteCollection.edges.map((e: any) => e.node.body);

  it("lets row level security decide the rows each signed-in user sees", async () => {
    expect(await bodies(await userToken(server, "00000000-0000-0000-0000-00000000000a"))).toEqual(["from a"]);
    expect(await bodies(await userToken(server, "00000000-0000-0000-0000-00000000000b"))).toEqual(["from b"]);
  });

  it("leaves out a column whose select privilege the role lacks", async () => {
    const token = await userToken(server, "00000000-0000-0000-0000-00000000000a");
    const res = await graphql(
      server,
      `
        {
          noteCollection {
            edges {
              node {
                secret
              }
            }
          }
        }
      `,
      { token },
    );
    expect(res.data).toBeNull();
    expect(res.errors?.[0].message).toMatch(/secret/);
    const fields = await graphql(
      server,
      `
        {
          __type(name: "Note") {
            fields {
              name
            }
          }
        }
      `,
      { token },
    );
    expect(fields.data.__type.fields.map((f: any) => f.name)).toEqual(["nodeId", "id", "owner", "body"]);
  });

  it("leaves out a table the role cannot select from", async () => {
    const res = await graphql(
      server,
      `
        {
          noteCollection {
            edges {
              node {
                id
              }
            }
          }
        }
      `,
    );
    expect(res.data).toBeNull();
    expect(res.errors).toHaveLength(1);
  });

  it("sees all rows as service_role (BYPASSRLS)", async () => {
    await migrate(server, `grant select on note to service_role`);
    const res = await graphql(
      server,
      `
        {
          noteCollection {
            edges {
              node {
                body
                secret
              }
            }
          }
        }
      `,
      { key: server.serviceKey },
    );
    expect(res.data.noteCollection.edges).toHaveLength(2);
  });

  it("hands request headers to row level security, for reads and for mutations", async () => {
    await migrate(
      server,
      `create table tenant_item(id serial primary key, tenant text not null, label text not null);
       alter table tenant_item enable row level security;
       create policy by_header on tenant_item
         using (tenant = current_setting('request.headers', true)::json->>'x-tenant')
         with check (tenant = current_setting('request.headers', true)::json->>'x-tenant');
       grant select, insert on tenant_item to anon;
       grant usage on all sequences in schema public to anon;
       insert into tenant_item(tenant, label) values ('acme', 'anvil'), ('globex', 'lamp');`,
    );
    const asTenant = async (tenant: string, query: string) => {
      const res = await fetch(`${server.url}/graphql/v1`, {
        method: "POST",
        headers: { "content-type": "application/json", apikey: server.anonKey, "x-tenant": tenant },
        body: JSON.stringify({ query }),
      });
      return (await res.json()) as GraphqlResult;
    };
    const read = "{ tenantItemCollection { edges { node { label } } } }";
    expect(await asTenant("acme", read)).toEqual({
      data: { tenantItemCollection: { edges: [{ node: { label: "anvil" } }] } },
    });
    const ownInsert = await asTenant(
      "globex",
      `mutation { insertIntoTenantItemCollection(objects: [{tenant: "globex", label: "bulb"}]) { affectedCount } }`,
    );
    expect(ownInsert).toEqual({ data: { insertIntoTenantItemCollection: { affectedCount: 1 } } });
    const otherInsert = await asTenant(
      "globex",
      `mutation { insertIntoTenantItemCollection(objects: [{tenant: "acme", label: "x"}]) { affectedCount } }`,
    );
    expect(otherInsert.errors?.[0].message).toMatch(/row-level security/);
  });
});
