import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate, userToken } from "./client";

const ALICE = "00000000-0000-0000-0000-0000000000a1";
const BORIS = "00000000-0000-0000-0000-0000000000b2";

const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true, "introspection": true})';
  create table shop(
    id serial primary key,
    title text not null
  );
  create table sale(
    id serial primary key,
    shop_id int not null references shop(id),
    seller uuid not null,
    item text not null,
    quantity smallint not null,
    units bigint,
    amount numeric(10, 2),
    weight double precision,
    sold_on date not null,
    sold_at timestamp not null,
    opened_at time,
    gift boolean,
    labels text[],
    payload jsonb,
    fee money
  );
  create table memo(id serial primary key, body text);
  create table stock_level(id serial primary key, on_hand int not null);
  comment on table stock_level is '@graphql({"name": "Inventory", "aggregate": {"enabled": true}})';
  comment on column stock_level.on_hand is '@graphql({"name": "available"})';
  insert into stock_level(on_hand) values (4), (6);
  comment on table shop is '@graphql({"aggregate": {"enabled": true}})';
  comment on table sale is '@graphql({"aggregate": {"enabled": true}, "totalCount": {"enabled": true}})';
  insert into shop(title) values ('Corner'), ('Market'), ('Empty');
  insert into sale(shop_id, seller, item, quantity, units, amount, weight, sold_on, sold_at, opened_at, gift, labels) values
    (1, '${ALICE}', 'pear',   3, 10000000000, 4.50, 1.5,  '2024-03-01', '2024-03-01 09:30', '08:00', false, '{fruit}'),
    (1, '${ALICE}', 'apple',  5, 2,           1.25, 0.25, '2024-01-15', '2024-01-15 17:00', '09:15', true,  '{fruit,red}'),
    (1, '${BORIS}', 'melon',  2, null,        null, null, '2024-02-10', '2024-02-10 12:00', null,    null,  null),
    (2, '${BORIS}', 'cherry', 7, 4,           9.99, 3,    '2023-12-24', '2023-12-24 23:59', '07:45', false, '{red}');
  alter table sale enable row level security;
  create policy own_sales on sale for select to authenticated using (seller = auth.uid());
  create policy anon_sales on sale for select to anon using (true);
  update sale set fee = quantity * 0.5;
  grant select on all tables in schema public to anon;
  grant select on shop, memo to authenticated;
  -- Signed-in users may not read what a sale was sold for.
  revoke select on sale from authenticated;
  grant select (id, shop_id, seller, item, quantity, units, weight, sold_on, sold_at, opened_at, gift, labels, payload, fee)
    on sale to authenticated;
`;

describe("GraphQL aggregates (pg_graphql aggregate directive)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  it("counts the rows the filter matches, whatever page is asked for", async () => {
    const res = await graphql(
      server,
      `
        {
          all: saleCollection(first: 1) {
            totalCount
            aggregate {
              count
            }
            edges {
              node {
                item
              }
            }
          }
          cheap: saleCollection(filter: { amount: { lt: "5" } }) {
            aggregate {
              count
            }
          }
          none: saleCollection(filter: { item: { eq: "kiwi" } }) {
            aggregate {
              count
              sum {
                quantity
              }
              min {
                soldOn
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        all: { totalCount: 4, aggregate: { count: 4 }, edges: [{ node: { item: "pear" } }] },
        cheap: { aggregate: { count: 2 } },
        none: { aggregate: { count: 0, sum: { quantity: null }, min: { soldOn: null } } },
      },
    });
  });

  it("sums and averages integer, bigint, numeric and float columns, skipping nulls", async () => {
    const res = await graphql(
      server,
      `
        {
          saleCollection {
            aggregate {
              sum {
                quantity
                units
                amount
                weight
              }
              avg {
                quantity
                amount
                weight
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        saleCollection: {
          aggregate: {
            sum: { quantity: 17, units: 10000000006, amount: 15.74, weight: 4.75 },
            avg: {
              quantity: 4.25,
              amount: expect.closeTo(5.2466666, 5),
              weight: expect.closeTo(1.5833333, 5),
            },
          },
        },
      },
    });
  });

  it("takes minimum and maximum of numbers, text, dates, times and booleans", async () => {
    const res = await graphql(
      server,
      `
        {
          saleCollection(filter: { shopId: { eq: 1 } }) {
            aggregate {
              min {
                quantity
                amount
                item
                soldOn
                soldAt
                openedAt
                gift
              }
              max {
                quantity
                amount
                item
                soldOn
                soldAt
                openedAt
                gift
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        saleCollection: {
          aggregate: {
            min: {
              quantity: 2,
              amount: 1.25,
              item: "apple",
              soldOn: "2024-01-15",
              soldAt: "2024-01-15T17:00:00",
              openedAt: "08:00:00",
              gift: false,
            },
            max: {
              quantity: 5,
              amount: 4.5,
              item: "pear",
              soldOn: "2024-03-01",
              soldAt: "2024-03-01T09:30:00",
              openedAt: "09:15:00",
              gift: true,
            },
          },
        },
      },
    });
  });

  it("aggregates each parent's related rows on a relationship collection", async () => {
    const res = await graphql(
      server,
      `
        {
          shopCollection {
            edges {
              node {
                title
                saleCollection(filter: { quantity: { gt: 1 } }) {
                  aggregate {
                    count
                    max {
                      item
                    }
                  }
                }
              }
            }
          }
        }
      `,
    );
    expect(res.data.shopCollection.edges.map((e: any) => e.node)).toEqual([
      { title: "Corner", saleCollection: { aggregate: { count: 3, max: { item: "pear" } } } },
      { title: "Market", saleCollection: { aggregate: { count: 1, max: { item: "cherry" } } } },
      { title: "Empty", saleCollection: { aggregate: { count: 0, max: { item: null } } } },
    ]);
  });

  it("only aggregates the rows row level security lets the user see", async () => {
    const query = `
      {
        saleCollection {
          aggregate {
            count
            sum {
              quantity
            }
          }
        }
      }
    `;
    const forAlice = await graphql(server, query, { token: await userToken(server, ALICE) });
    expect(forAlice.data.saleCollection.aggregate).toEqual({ count: 2, sum: { quantity: 8 } });
    const forBoris = await graphql(server, query, { token: await userToken(server, BORIS) });
    expect(forBoris.data.saleCollection.aggregate).toEqual({ count: 2, sum: { quantity: 9 } });
    const someoneElse = await graphql(server, query, {
      token: await userToken(server, "00000000-0000-0000-0000-000000000000"),
    });
    expect(someoneElse.data.saleCollection.aggregate).toEqual({ count: 0, sum: { quantity: null } });
  });

  it("describes the aggregate types with a field per eligible column and typed results", async () => {
    const res = await graphql(
      server,
      `
        {
          connection: __type(name: "SaleConnection") {
            fields {
              name
            }
          }
          aggregate: __type(name: "SaleAggregate") {
            fields {
              name
              type {
                kind
                name
                ofType {
                  name
                }
              }
            }
          }
          sum: __type(name: "SaleSumAggregateResult") {
            fields {
              name
              type {
                name
              }
            }
          }
          avg: __type(name: "SaleAvgAggregateResult") {
            fields {
              name
              type {
                name
              }
            }
          }
          min: __type(name: "SaleMinAggregateResult") {
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
    const fields = (t: { fields: { name: string; type: { name: string } }[] }) =>
      Object.fromEntries(t.fields.map((f) => [f.name, f.type.name]));
    expect(res.data.connection.fields.map((f: { name: string }) => f.name)).toEqual([
      "edges",
      "pageInfo",
      "totalCount",
      "aggregate",
    ]);
    expect(res.data.aggregate.fields.map((f: { name: string }) => f.name)).toEqual([
      "count",
      "sum",
      "avg",
      "min",
      "max",
    ]);
    expect(res.data.aggregate.fields[0].type).toEqual({
      kind: "NON_NULL",
      name: null,
      ofType: { name: "Int" },
    });
    expect(fields(res.data.sum)).toEqual({
      id: "BigInt",
      shopId: "BigInt",
      quantity: "BigInt",
      units: "BigInt",
      amount: "BigFloat",
      weight: "BigFloat",
      fee: "BigFloat",
    });
    expect(fields(res.data.avg)).toEqual({
      id: "BigFloat",
      shopId: "BigFloat",
      quantity: "BigFloat",
      units: "BigFloat",
      amount: "BigFloat",
      weight: "BigFloat",
      fee: "BigFloat",
    });
    // uuid, arrays and JSON have no ordering pg_graphql aggregates over.
    expect(fields(res.data.min)).toEqual({
      id: "Int",
      shopId: "Int",
      item: "String",
      quantity: "Int",
      units: "BigInt",
      amount: "BigFloat",
      weight: "BigFloat",
      soldOn: "Date",
      soldAt: "Datetime",
      openedAt: "Time",
      gift: "Boolean",
      fee: "Opaque",
    });
  });

  it("offers no aggregate on a collection without the directive", async () => {
    const res = await graphql(
      server,
      `
        {
          memo: __type(name: "MemoConnection") {
            fields {
              name
            }
          }
          memoAggregate: __type(name: "MemoAggregate") {
            name
          }
        }
      `,
    );
    expect(res.data.memo.fields.map((f: { name: string }) => f.name)).toEqual(["edges", "pageInfo"]);
    expect(res.data.memoAggregate).toBeNull();
    const query = await graphql(
      server,
      `
        {
          memoCollection {
            aggregate {
              count
            }
          }
        }
      `,
    );
    expect(query.errors?.[0].message).toMatch(/aggregate/);
  });

  it("averages money as a number and gives its minimum in the database's own form", async () => {
    const res = await graphql(
      server,
      `
        {
          saleCollection {
            aggregate {
              avg {
                fee
              }
              min {
                fee
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: { saleCollection: { aggregate: { avg: { fee: 2.125 }, min: { fee: "$1.00" } } } },
    });
  });

  it("leaves columns the role may not read out of the aggregate types", async () => {
    const token = await userToken(server, ALICE);
    const res = await graphql(
      server,
      `
        {
          __type(name: "SaleSumAggregateResult") {
            fields {
              name
            }
          }
        }
      `,
      { token },
    );
    expect(res.data.__type.fields.map((f: { name: string }) => f.name)).toEqual([
      "id",
      "shopId",
      "quantity",
      "units",
      "weight",
      "fee",
    ]);
    const denied = await graphql(
      server,
      `
        {
          saleCollection {
            aggregate {
              max {
                amount
              }
            }
          }
        }
      `,
      { token },
    );
    expect(denied.errors?.[0].message).toMatch(/amount/);
  });

  it("describes the aggregate types in pg_graphql's words", async () => {
    const res = await graphql(
      server,
      `
        {
          shopConnection: __type(name: "ShopConnection") {
            fields {
              name
              description
            }
          }
          shopAggregate: __type(name: "ShopAggregate") {
            description
            fields {
              name
              description
            }
          }
          shopMax: __type(name: "ShopMaxAggregateResult") {
            description
            fields {
              name
              description
            }
          }
        }
      `,
    );
    expect(res.data.shopConnection.fields.at(-1)).toEqual({
      name: "aggregate",
      description: "Aggregate functions calculated on the collection of `Shop`",
    });
    expect(res.data.shopAggregate).toEqual({
      description: "Aggregate results for `Shop`",
      fields: [
        { name: "count", description: "The number of records matching the query" },
        { name: "sum", description: "Summation aggregates for numeric fields" },
        { name: "avg", description: "Average aggregates for numeric fields" },
        { name: "min", description: "Minimum aggregates for comparable fields" },
        { name: "max", description: "Maximum aggregates for comparable fields" },
      ],
    });
    expect(res.data.shopMax).toEqual({
      description: "Result of maximum aggregation for `Shop`",
      fields: [
        { name: "id", description: "Maximum of id across all matching records" },
        { name: "title", description: "Maximum of title across all matching records" },
      ],
    });
  });

  it("names the aggregate types and fields after the table's and columns' name directives", async () => {
    const res = await graphql(
      server,
      `
        {
          inventoryCollection {
            aggregate {
              __typename
              sum {
                __typename
                available
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        inventoryCollection: {
          aggregate: {
            __typename: "InventoryAggregate",
            sum: { __typename: "InventorySumAggregateResult", available: 10 },
          },
        },
      },
    });
  });

  it("keeps every digit of an integer sum too large for a JSON number", async () => {
    await migrate(
      server,
      `create table ledger(id int primary key, cents bigint);
       comment on table ledger is '@graphql({"aggregate": {"enabled": true}})';
       insert into ledger values (1, 9007199254740993), (2, 10), (3, 5);
       grant select on ledger to anon;`,
    );
    const res = await graphql(
      server,
      `
        {
          big: ledgerCollection {
            aggregate {
              sum {
                cents
              }
            }
          }
          small: ledgerCollection(filter: { id: { gt: 1 } }) {
            aggregate {
              sum {
                cents
              }
            }
          }
        }
      `,
    );
    expect(res).toEqual({
      data: {
        big: { aggregate: { sum: { cents: "9007199254741008" } } },
        small: { aggregate: { sum: { cents: 15 } } },
      },
    });
  });
});
