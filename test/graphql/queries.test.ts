import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate } from "./client";

const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true, "introspection": true})';
  create table author(
    id serial primary key,
    full_name text not null,
    born date,
    profile jsonb
  );
  comment on table author is '@graphql({"totalCount": {"enabled": true}, "description": "People who write"})';
  create table book(
    id serial primary key,
    author_id int not null references author(id),
    title text not null,
    tags text[],
    pages int,
    price numeric(10, 2),
    sold bigint
  );
  create table no_key(x int);
  insert into author(full_name, born, profile) values
    ('Ann', '1900-01-02', '{"b": 2, "a": [1, 2]}'), ('Bob', null, null), ('Cy', '1950-05-06', null);
  insert into book(author_id, title, tags, pages, price, sold) values
    (1, 'Alpha', '{x,y}', 100, 9.5, 10000000000),
    (1, 'Beta', '{y}', 200, 12, 5),
    (2, 'Gamma', null, null, null, null),
    (3, 'Delta', '{z}', 50, 1.25, 7);
  grant select on all tables in schema public to anon;
`;

describe("GraphQL queries (pg_graphql shape)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  it("names collections, types and fields as pg_graphql does with inflection on", async () => {
    const res = await graphql(
      server,
      `
        {
          authorCollection(first: 1) {
            edges {
              node {
                id
                fullName
                born
              }
            }
          }
          bookByPk(id: 2) {
            title
            authorId
            author {
              fullName
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        authorCollection: { edges: [{ node: { id: 1, fullName: "Ann", born: "1900-01-02" } }] },
        bookByPk: { title: "Beta", authorId: 1, author: { fullName: "Ann" } },
      },
    });
  });

  it("returns null for a primary key that matches nothing and leaves tables without a key out", async () => {
    expect(
      await graphql(
        server,
        `
          {
            bookByPk(id: 99) {
              id
            }
          }
        `,
      ),
    ).toEqual({
      data: { bookByPk: null },
    });
    const res = await graphql(
      server,
      `
        {
          noKeyCollection {
            edges {
              node {
                x
              }
            }
          }
        }
      `,
    );
    expect(res.data).toBeNull();
    expect(res.errors?.[0].message).toMatch(/noKeyCollection/);
  });

  it("serializes JSON as a string, bigint and numeric as strings, arrays as lists", async () => {
    const res = await graphql(
      server,
      `
        {
          authorByPk(id: 1) {
            profile
          }
          bookByPk(id: 1) {
            tags
            price
            sold
          }
        }
      `,
    );
    expect(res.data).toEqual({
      authorByPk: { profile: '{"a": [1, 2], "b": 2}' },
      bookByPk: { tags: ["x", "y"], price: "9.50", sold: "10000000000" },
    });
  });

  it("gives every row a nodeId that node(nodeId:) resolves", async () => {
    const res = await graphql(
      server,
      `
        {
          authorByPk(id: 2) {
            nodeId
          }
        }
      `,
    );
    const nodeId = res.data.authorByPk.nodeId as string;
    expect(JSON.parse(Buffer.from(nodeId, "base64").toString())).toEqual(["public", "author", 2]);
    expect(nodeId).toBe(Buffer.from('["public", "author", 2]').toString("base64"));
    const node = await graphql(
      server,
      `
        query ($id: ID!) {
          node(nodeId: $id) {
            nodeId
            ... on Author {
              fullName
            }
          }
        }
      `,
      { variables: { id: nodeId } },
    );
    expect(node.data).toEqual({ node: { nodeId, fullName: "Bob" } });
  });

  it("filters with every kind of operator and with and/or/not at any depth", async () => {
    const titles = async (filter: string) => {
      const res = await graphql(server, `{ bookCollection(filter: ${filter}) { edges { node { title } } } }`);
      expect(res.errors).toBeUndefined();
      return res.data.bookCollection.edges.map((e: any) => e.node.title);
    };
    expect(await titles(`{ pages: { gte: 100 } }`)).toEqual(["Alpha", "Beta"]);
    expect(await titles(`{ title: { in: ["Beta", "Delta"] } }`)).toEqual(["Beta", "Delta"]);
    expect(await titles(`{ title: { ilike: "%ETA" } }`)).toEqual(["Beta"]);
    expect(await titles(`{ title: { startsWith: "G" } }`)).toEqual(["Gamma"]);
    expect(await titles(`{ pages: { is: NULL } }`)).toEqual(["Gamma"]);
    expect(await titles(`{ tags: { contains: "y" } }`)).toEqual(["Alpha", "Beta"]);
    expect(await titles(`{ tags: { overlaps: ["x", "z"] } }`)).toEqual(["Alpha", "Delta"]);
    expect(await titles(`{ or: [{ title: { eq: "Alpha" } }, { not: { pages: { lt: 150 } } }] }`)).toEqual([
      "Alpha",
      "Beta",
    ]);
    expect(await titles(`{ and: [{ authorId: { eq: 1 } }, { or: { title: { neq: "Alpha" } } }] }`)).toEqual([
      "Beta",
    ]);
    // Empty logical filters are ignored; comparing with null matches nothing.
    expect(await titles(`{ and: [], or: [], not: {} }`)).toHaveLength(4);
    expect(await titles(`{ pages: { eq: null } }`)).toEqual([]);
  });

  it("orders by any column with the primary key as tie-breaker and pages with pg_graphql cursors", async () => {
    const page = async (args: string) =>
      (
        await graphql(
          server,
          `{ bookCollection(${args}) { pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { id } } } }`,
        )
      ).data.bookCollection;
    const first = await page(`first: 2, orderBy: [{ authorId: DescNullsLast }]`);
    expect(first.edges.map((e: any) => e.node.id)).toEqual([4, 3]);
    expect(first.edges[0].cursor).toBe(Buffer.from("[3, 4]").toString("base64"));
    expect(first.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const next = await page(
      `first: 2, after: "${first.pageInfo.endCursor}", orderBy: [{ authorId: DescNullsLast }]`,
    );
    expect(next.edges.map((e: any) => e.node.id)).toEqual([1, 2]);
    expect(next.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const back = await page(
      `last: 2, before: "${next.pageInfo.startCursor}", orderBy: [{ authorId: DescNullsLast }]`,
    );
    expect(back.edges.map((e: any) => e.node.id)).toEqual([4, 3]);
    const skipped = await page(`first: 1, offset: 2`);
    expect(skipped.edges.map((e: any) => e.node.id)).toEqual([3]);
    expect(
      (
        await graphql(
          server,
          `
            {
              bookCollection(first: 1, last: 1) {
                edges {
                  cursor
                }
              }
            }
          `,
        )
      ).errors,
    ).toEqual([{ message: 'only one of "first" and "last" may be provided' }]);
  });

  it("offers totalCount only where the table's directive enables it, counting the filtered rows", async () => {
    const res = await graphql(
      server,
      `
        {
          authorCollection(first: 1, filter: { born: { is: NOT_NULL } }) {
            totalCount
          }
        }
      `,
    );
    expect(res.data).toEqual({ authorCollection: { totalCount: 2 } });
    const refused = await graphql(
      server,
      `
        {
          bookCollection {
            totalCount
          }
        }
      `,
    );
    expect(refused.data).toBeNull();
    expect(refused.errors).toHaveLength(1);
  });

  it("follows relationships both ways, with collections on the one side", async () => {
    const res = await graphql(
      server,
      `
        {
          authorByPk(id: 1) {
            bookCollection(orderBy: [{ title: DescNullsLast }]) {
              edges {
                node {
                  title
                  author {
                    id
                  }
                }
              }
            }
          }
        }
      `,
    );
    expect(res.data.authorByPk.bookCollection.edges).toEqual([
      { node: { title: "Beta", author: { id: 1 } } },
      { node: { title: "Alpha", author: { id: 1 } } },
    ]);
  });

  it("answers errors in pg_graphql's shape: HTTP 200, data null, messages only", async () => {
    const parse = await graphql(server, `{ authorCollection { `);
    expect(parse.data).toBeNull();
    expect(parse.errors).toHaveLength(1);
    expect(Object.keys(parse.errors![0])).toEqual(["message"]);
    const named = await graphql(
      server,
      `
        query A {
          __typename
        }
        query B {
          __typename
        }
      `,
      {
        operationName: "C",
      },
    );
    // Operation selection errors come without a data key, as pg_graphql answers them.
    expect(named).toEqual({ errors: [{ message: "Operation not found" }] });
  });

  it("describes types from directives only and sorts introspection like pg_graphql", async () => {
    const res = await graphql(
      server,
      `
        {
          __type(name: "Author") {
            description
          }
          __schema {
            types {
              name
            }
            directives {
              name
            }
          }
        }
      `,
    );
    expect(res.data.__type.description).toBe("People who write");
    const names = res.data.__schema.types.map((t: any) => t.name);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["BigFloatFilter", "OpaqueFilter", "FilterIs"]));
    expect(res.data.__schema.directives.map((d: any) => d.name)).toEqual(["include", "skip"]);
  });

  it("refuses introspection unless the schema's directive turns it on, still answering the rest", async () => {
    await migrate(server, `comment on schema public is '@graphql({"inflect_names": true})'`);
    try {
      const res = await graphql(
        server,
        `
          {
            __schema {
              types {
                name
              }
            }
            bookByPk(id: 1) {
              id
            }
          }
        `,
      );
      expect(res.data).toEqual({ bookByPk: { id: 1 } });
      expect(res.errors).toEqual([{ message: 'Unknown field "__schema" on type Query' }]);
    } finally {
      await migrate(
        server,
        `comment on schema public is '@graphql({"inflect_names": true, "introspection": true})'`,
      );
    }
  });

  it("caps pages at max_rows (30 by default)", async () => {
    await migrate(
      server,
      `create table item(id int primary key); insert into item select generate_series(1, 40);
       grant select on item to anon;`,
    );
    const count = async () =>
      (
        await graphql(
          server,
          `
            {
              itemCollection(first: 100) {
                edges {
                  node {
                    id
                  }
                }
              }
            }
          `,
        )
      ).data.itemCollection.edges.length;
    expect(await count()).toBe(30);
    await migrate(server, `comment on table item is '@graphql({"max_rows": 5})'`);
    expect(await count()).toBe(5);
  });
});
