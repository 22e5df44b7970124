import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate } from "./client";

const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true, "introspection": true})';
  create table member(
    id serial primary key,
    given_name text not null,
    family_name text not null,
    team text
  );
  comment on table member is '@graphql({"totalCount": {"enabled": true}})';
  insert into member(given_name, family_name, team) values
    ('Ada', 'Lovelace', 'red'), ('Alan', 'Turing', 'blue'), ('Grace', 'Hopper', 'red'), ('Edsger', 'Dijkstra', null);

  create function greeting(who text, punctuation text default '!') returns text
    language sql stable as $$ select 'Hello, ' || who || punctuation $$;
  comment on function greeting is '@graphql({"description": "Greets someone"})';

  create sequence ticket_seq;
  create function next_ticket(step int default 1) returns bigint
    language sql volatile as $$ select nextval('ticket_seq') + step - 1 $$;

  create function _display_name(rec member) returns text
    language sql stable as $$ select rec.given_name || ' ' || rec.family_name $$;

  create function _teammates(rec member) returns setof member
    language sql stable as $$ select * from member where team = rec.team and id <> rec.id $$;

  create function member_named(given text) returns member
    language sql stable as $$ select * from member where given_name = given $$;

  create function enrol(team_name text, names text[]) returns setof member
    language sql volatile as $$
      insert into member(given_name, family_name, team)
      select n, 'New', team_name from unnest(names) as n
      returning *
    $$;

  create function members_of(team_name text) returns setof member
    language sql stable as $$ select * from member where team = team_name $$;

  create function "teamSize"(team_name text) returns int
    language sql stable as $$ select count(*)::int from member where team = team_name $$;
  comment on function "teamSize" is '@graphql({"name": "sizeOfTeam"})';

  create function internal_audit() returns int language sql stable as $$ select 42 $$;
  revoke execute on function internal_audit from public, anon, authenticated;
  grant execute on function internal_audit to service_role;

  create function untyped_arg(int) returns int language sql stable as $$ select $1 $$;

  grant select on all tables in schema public to anon;
  grant insert on member to anon;
  grant usage on all sequences in schema public to anon;
`;

describe("GraphQL user-defined functions (pg_graphql)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  it("calls a stable function as a query field, with its default argument filled in when omitted", async () => {
    const res = await graphql(
      server,
      `
        {
          loud: greeting(who: "Ada")
          polite: greeting(who: "Alan", punctuation: ".")
          sizeOfTeam(teamName: "red")
        }
      `,
    );
    expect(res).toEqual({ data: { loud: "Hello, Ada!", polite: "Hello, Alan.", sizeOfTeam: 2 } });
  });

  it("describes the function's arguments, defaults and description in introspection", async () => {
    const res = await graphql(
      server,
      `
        {
          __type(name: "Query") {
            fields {
              name
              description
              args {
                name
                defaultValue
                type {
                  kind
                  name
                  ofType {
                    name
                  }
                }
              }
            }
          }
        }
      `,
    );
    const greeting = res.data.__type.fields.find((f: any) => f.name === "greeting");
    expect(greeting).toEqual({
      name: "greeting",
      description: "Greets someone",
      args: [
        {
          name: "who",
          defaultValue: null,
          type: { kind: "NON_NULL", name: null, ofType: { name: "String" } },
        },
        { name: "punctuation", defaultValue: '"!"', type: { kind: "SCALAR", name: "String", ofType: null } },
      ],
    });
  });

  it("runs a volatile function as a mutation, not as a query", async () => {
    const first = await graphql(
      server,
      `
        mutation {
          nextTicket
        }
      `,
    );
    const second = await graphql(
      server,
      `
        mutation {
          nextTicket(step: 10)
        }
      `,
    );
    expect(first).toEqual({ data: { nextTicket: "1" } });
    expect(second).toEqual({ data: { nextTicket: "11" } });
    const asQuery = await graphql(
      server,
      `
        {
          nextTicket
        }
      `,
    );
    expect(asQuery.data).toBeNull();
    expect(asQuery.errors?.[0].message).toMatch(/nextTicket/);
  });

  it("adds a function of a row as a computed field, wherever the type is selected", async () => {
    const res = await graphql(
      server,
      `
        {
          memberByPk(id: 2) {
            displayName
          }
          memberCollection(first: 1) {
            edges {
              node {
                givenName
                displayName
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        memberByPk: { displayName: "Alan Turing" },
        memberCollection: { edges: [{ node: { givenName: "Ada", displayName: "Ada Lovelace" } }] },
      },
    });
  });

  it("exposes a set-returning function as a collection that can be filtered, ordered and paged", async () => {
    const res = await graphql(
      server,
      `
        {
          membersOf(teamName: "red", filter: { givenName: { startsWith: "G" } }) {
            totalCount
            edges {
              node {
                givenName
                displayName
              }
            }
          }
          byName: membersOf(teamName: "red", orderBy: [{ givenName: DescNullsLast }], first: 1) {
            pageInfo {
              hasNextPage
            }
            edges {
              node {
                givenName
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        membersOf: { totalCount: 1, edges: [{ node: { givenName: "Grace", displayName: "Grace Hopper" } }] },
        byName: { pageInfo: { hasNextPage: true }, edges: [{ node: { givenName: "Grace" } }] },
      },
    });
  });

  it("runs a volatile set-returning function once and pages the rows it returned", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          enrol(teamName: "green", names: ["Barbara", "Ken"], first: 1) {
            totalCount
            pageInfo {
              hasNextPage
            }
            edges {
              node {
                givenName
                team
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        enrol: {
          totalCount: 2,
          pageInfo: { hasNextPage: true },
          edges: [{ node: { givenName: "Barbara", team: "green" } }],
        },
      },
    });
    const green = await graphql(
      server,
      `
        {
          membersOf(teamName: "green") {
            totalCount
          }
        }
      `,
    );
    expect(green).toEqual({ data: { membersOf: { totalCount: 2 } } });
  });

  it("returns a table's row type as that type (null when no row), with its relations and computed fields", async () => {
    const res = await graphql(
      server,
      `
        {
          memberNamed(given: "Grace") {
            nodeId
            displayName
            teammates {
              edges {
                node {
                  givenName
                }
              }
            }
          }
          nobody: memberNamed(given: "Nobody") {
            id
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        memberNamed: {
          nodeId: Buffer.from('["public", "member", 3]').toString("base64"),
          displayName: "Grace Hopper",
          teammates: { edges: [{ node: { givenName: "Ada" } }] },
        },
        nobody: null,
      },
    });
  });

  it("hides functions the role may not execute and functions pg_graphql cannot call", async () => {
    const res = await graphql(
      server,
      `
        {
          __type(name: "Query") {
            fields {
              name
            }
          }
        }
      `,
    );
    const names = res.data.__type.fields.map((f: any) => f.name);
    expect(names).toEqual(expect.arrayContaining(["greeting", "membersOf", "sizeOfTeam"]));
    expect(names).not.toContain("internalAudit");
    expect(names).not.toContain("untypedArg");
    expect(names).not.toContain("displayName");
    const denied = await graphql(
      server,
      `
        {
          internalAudit
        }
      `,
    );
    expect(denied.data).toBeNull();
    expect(denied.errors?.[0].message).toMatch(/internalAudit/);
    const asService = await graphql(
      server,
      `
        {
          internalAudit
        }
      `,
      { key: server.serviceKey },
    );
    expect(asService).toEqual({ data: { internalAudit: 42 } });
  });
});
