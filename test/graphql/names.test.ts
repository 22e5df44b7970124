import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate } from "./client";

/** SQL allows names GraphQL does not: pg_graphql leaves those entities out instead of failing. */
const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true, "introspection": true})';
  create table "order-items"(id int primary key);
  create type "ticket state" as enum ('open', 'closed');
  create type mood as enum ('good', 'so-so');
  comment on type mood is '@graphql({"mappings": {"so-so": "soSo"}})';
  create table ticket(
    id int primary key,
    "due date!" date,
    "2nd_reviewer" text,
    state "ticket state",
    mood mood,
    title text
  );
  insert into ticket(id, state, mood, title) values (1, 'open', 'so-so', 'first');
  grant select on all tables in schema public to anon;
`;

describe("GraphQL names SQL allows but GraphQL does not", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  it("serves the rest of the schema, leaving out tables and columns without a valid name", async () => {
    const res = await graphql(
      server,
      `
        {
          ticketCollection {
            edges {
              node {
                id
                state
                mood
                title
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        ticketCollection: { edges: [{ node: { id: 1, state: "open", mood: "soSo", title: "first" } }] },
      },
    });
    const ticket = await graphql(
      server,
      `
        {
          __type(name: "Ticket") {
            fields {
              name
              type {
                name
              }
            }
          }
        }
      `,
    );
    expect(ticket.data.__type.fields.map((f: { name: string }) => f.name)).toEqual([
      "nodeId",
      "id",
      "state",
      "mood",
      "title",
    ]);
    const types = await graphql(
      server,
      `
        {
          __schema {
            types {
              name
            }
          }
        }
      `,
    );
    const names = types.data.__schema.types.map((t: { name: string }) => t.name);
    expect(names.filter((n: string) => /^order.?items/i.test(n))).toEqual([]);
  });

  it("shows an enum whose name is not a valid GraphQL name as Opaque, and a renamed value as renamed", async () => {
    const res = await graphql(
      server,
      `
        {
          __type(name: "Ticket") {
            fields {
              name
              type {
                name
                kind
              }
            }
          }
          mood: __type(name: "Mood") {
            enumValues {
              name
            }
          }
        }
      `,
    );
    const state = res.data.__type.fields.find((f: { name: string }) => f.name === "state");
    expect(state.type).toEqual({ name: "Opaque", kind: "SCALAR" });
    expect(res.data.mood.enumValues).toEqual([{ name: "good" }, { name: "soSo" }]);
  });
});
