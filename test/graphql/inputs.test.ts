import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate } from "./client";

const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true, "introspection": true})';
  create table ticket(
    id serial primary key,
    code char(3) not null,
    title varchar(10)
  );
  insert into ticket(code, title) values ('abc', 'short'), ('xyz', null);
  grant select on all tables in schema public to anon;
`;

describe("GraphQL input checks and scalar descriptions (pg_graphql's)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  it("refuses a nodeId that is not base64 JSON with pg_graphql's numbered messages", async () => {
    const cases: [string, string][] = [
      ["", "Invalid value passed to nodeId argument. Error 4"],
      ["%%%", "Invalid value passed to nodeId argument. Error 2"],
      [Buffer.from('{"a": 1}').toString("base64"), "Invalid value passed to nodeId argument. Error 10"],
      [
        Buffer.from('["public", "ticket"]').toString("base64"),
        "Invalid value passed to nodeId argument. Error 5",
      ],
      [
        Buffer.from('[1, "ticket", 1]').toString("base64"),
        "Invalid value passed to nodeId argument. Error 6",
      ],
    ];
    for (const [nodeId, message] of cases) {
      const res = await graphql(
        server,
        `
          query ($id: ID!) {
            node(nodeId: $id) {
              nodeId
            }
          }
        `,
        {
          variables: { id: nodeId },
        },
      );
      expect(res).toEqual({ data: null, errors: [{ message }] });
    }
  });

  it("still finds a row by a well-formed nodeId, and answers null for a row that does not exist", async () => {
    const id = (n: number) => Buffer.from(`["public", "ticket", ${n}]`).toString("base64");
    const found = await graphql(server, `{ node(nodeId: "${id(1)}") { ... on Ticket { code } } }`);
    expect(found).toEqual({ data: { node: { code: "abc" } } });
    const missing = await graphql(server, `{ node(nodeId: "${id(99)}") { nodeId } }`);
    expect(missing).toEqual({ data: { node: null } });
  });

  it("refuses a filter string longer than a varchar(n) or char(n) column holds", async () => {
    const tooLong = await graphql(
      server,
      `
        {
          ticketCollection(filter: { code: { eq: "abcd" } }) {
            edges {
              node {
                id
              }
            }
          }
        }
      `,
    );
    expect(tooLong).toEqual({
      data: null,
      errors: [{ message: "Invalid input for String type. Maximum character length 3" }],
    });
    const inList = await graphql(
      server,
      `
        {
          ticketCollection(filter: { title: { in: ["short", "much too long"] } }) {
            edges {
              node {
                id
              }
            }
          }
        }
      `,
    );
    expect(inList.errors?.[0].message).toBe("Invalid input for String type. Maximum character length 10");
    const fits = await graphql(
      server,
      `
        {
          ticketCollection(filter: { code: { eq: "abc" } }) {
            edges {
              node {
                id
              }
            }
          }
        }
      `,
    );
    expect(fits).toEqual({ data: { ticketCollection: { edges: [{ node: { id: 1 } }] } } });
  });

  it("describes scalars with pg_graphql's texts", async () => {
    const res = await graphql(
      server,
      `
        {
          int: __type(name: "Int") {
            description
          }
          bigInt: __type(name: "BigInt") {
            description
          }
          cursor: __type(name: "Cursor") {
            description
          }
          string: __type(name: "String") {
            description
          }
        }
      `,
    );
    expect(res.data).toEqual({
      int: { description: "A scalar integer up to 32 bits" },
      bigInt: { description: "An arbitrary size integer represented as a string" },
      cursor: { description: "An opaque string using for tracking a position in results during pagination" },
      string: { description: "A string" },
    });
  });

  it("reads an input object that names a field twice with the last value", async () => {
    const res = await graphql(
      server,
      `
        {
          ticketCollection(filter: { code: { eq: "xyz" }, code: { eq: "abc" } }) {
            edges {
              node {
                id
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({ data: { ticketCollection: { edges: [{ node: { id: 1 } }] } } });
  });

  it("puts the primary key at the end of every cursor, even when the order names it", async () => {
    const res = await graphql(
      server,
      `
        {
          ticketCollection(orderBy: [{ id: DescNullsLast }], first: 1) {
            edges {
              cursor
              node {
                id
              }
            }
          }
        }
      `,
    );
    const { cursor, node } = res.data.ticketCollection.edges[0];
    expect(node).toEqual({ id: 2 });
    expect(Buffer.from(cursor, "base64").toString()).toBe("[2, 2]");
    const next = await graphql(
      server,
      `{ ticketCollection(orderBy: [{id: DescNullsLast}], after: "${cursor}") { edges { node { id } } } }`,
    );
    expect(next).toEqual({ data: { ticketCollection: { edges: [{ node: { id: 1 } }] } } });
  });

  it("answers __typename under __type with the type's own name, as pg_graphql does", async () => {
    const res = await graphql(
      server,
      `
        {
          __type(name: "Ticket") {
            __typename
            kind
          }
        }
      `,
    );
    expect(res).toEqual({ data: { __type: { __typename: "Ticket", kind: "OBJECT" } } });
  });
});
