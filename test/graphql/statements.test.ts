import { authenticatorMessagesDuring, authenticatorStatementsDuring } from "../helpers/statements";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate } from "./client";

/** The messages sent to the database for data requests while `work` runs: one per network round trip. */
const roundTripsDuring = authenticatorStatementsDuring;

/** The statements that read or write data, leaving out transaction control and request settings. */
function dataStatements(roundTrips: string[]): string[] {
  return roundTrips.filter(
    (text) => !/^\s*(begin|commit|rollback|release|savepoint|select set_config)/i.test(text),
  );
}

describe("GraphQL round trips", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(
      server,
      `comment on schema public is '@graphql({"inflect_names": true})';
       create table team(id serial primary key, name text not null);
       create table player(id serial primary key, team_id int not null references team(id), name text not null);
       comment on table team is '@graphql({"totalCount": {"enabled": true}, "aggregate": {"enabled": true}})';
       comment on table player is '@graphql({"aggregate": {"enabled": true}})';
       insert into team(name) values ('red'), ('blue');
       insert into player(team_id, name) values (1, 'ann'), (1, 'bob'), (2, 'cy');
       grant select on team, player to anon;
       grant all on team, player to service_role;
       create table league(id serial primary key, name text not null);
       create table club(id serial primary key, league_id int not null references league(id) on delete cascade, name text not null);
       comment on table club is '@graphql({"totalCount": {"enabled": true}})';
       insert into league(name) values ('east'), ('west');
       insert into club(league_id, name) values (1, 'ants'), (1, 'bees'), (2, 'cats');
       grant all on league, club to service_role;`,
    );
    // Warm the schema so only the request's own statements are counted.
    await graphql(
      server,
      `
        {
          __typename
        }
      `,
    );
  });
  afterAll(() => server.stop());

  it("answers a filtered, ordered query with nested relations in one round trip to the database", async () => {
    let result: unknown;
    const roundTrips = await roundTripsDuring(async () => {
      result = await graphql(
        server,
        `
          {
            teamCollection(filter: { name: { neq: "green" } }, orderBy: [{ name: AscNullsLast }]) {
              edges {
                cursor
                node {
                  name
                  playerCollection(filter: { name: { neq: "x" } }) {
                    edges {
                      node {
                        name
                        team {
                          name
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        `,
      );
    });
    expect(result).toMatchObject({ data: { teamCollection: { edges: expect.any(Array) } } });
    expect(roundTrips).toHaveLength(1);
  });

  it("selects a lone page's rows directly (with pageInfo its rows tell), and a page with its count or a probe through the shared root row", async () => {
    const lone = await roundTripsDuring(async () => {
      const result = await graphql(
        server,
        `
          {
            playerCollection(first: 2) {
              edges {
                node {
                  name
                }
              }
            }
          }
        `,
      );
      expect(result).toEqual({
        data: { playerCollection: { edges: [{ node: { name: "ann" } }, { node: { name: "bob" } }] } },
      });
    });
    expect(dataStatements(lone)).toHaveLength(1);
    expect(dataStatements(lone)[0]).toMatch(/^\s*select\s+__player__\./);
    expect(dataStatements(lone)[0]).not.toContain("select 1 as one");
    // pageInfo told by the page's own rows (the row past it, its offset, its cursors): still the page alone.
    let endCursor = "";
    const withPageInfo = await roundTripsDuring(async () => {
      const result = await graphql(
        server,
        `
          {
            playerCollection(first: 2) {
              pageInfo {
                hasNextPage
                hasPreviousPage
                endCursor
              }
              edges {
                node {
                  name
                }
              }
            }
          }
        `,
      );
      const page = (result.data as { playerCollection: { pageInfo: { endCursor: string } } })
        .playerCollection;
      expect(page).toMatchObject({ pageInfo: { hasNextPage: true, hasPreviousPage: false } });
      endCursor = page.pageInfo.endCursor;
    });
    expect(dataStatements(withPageInfo)).toHaveLength(1);
    expect(dataStatements(withPageInfo)[0]).toMatch(/^\s*select\s+__player__\./);
    // Rows before a cursor take a probe: the page and the probe share one statement through the root row.
    const afterCursor = await roundTripsDuring(async () => {
      const result = await graphql(
        server,
        `
          query ($after: Cursor) {
            playerCollection(first: 2, after: $after) {
              pageInfo {
                hasNextPage
                hasPreviousPage
              }
              edges {
                node {
                  name
                }
              }
            }
          }
        `,
        { variables: { after: endCursor } },
      );
      expect(result.data).toEqual({
        playerCollection: {
          pageInfo: { hasNextPage: false, hasPreviousPage: true },
          edges: [{ node: { name: "cy" } }],
        },
      });
    });
    expect(dataStatements(afterCursor)).toHaveLength(1);
    expect(dataStatements(afterCursor)[0]).toContain("select 1 as one");
    // With its totalCount the page and the count share one statement, hung off the root row.
    const counted = await roundTripsDuring(async () => {
      const result = await graphql(
        server,
        `
          {
            teamCollection(first: 1) {
              totalCount
              edges {
                node {
                  name
                }
              }
            }
          }
        `,
      );
      expect(result).toEqual({
        data: { teamCollection: { totalCount: 2, edges: [{ node: { name: "red" } }] } },
      });
    });
    expect(dataStatements(counted)).toHaveLength(1);
    expect(dataStatements(counted)[0]).toContain("select 1 as one");
  });

  it("answers several root collections with totalCount and pageInfo in one round trip to the database", async () => {
    let result: any;
    const roundTrips = await roundTripsDuring(async () => {
      result = await graphql(
        server,
        `
          {
            teamCollection(first: 1, filter: { name: { neq: "green" } }) {
              totalCount
              pageInfo {
                hasNextPage
                hasPreviousPage
                endCursor
              }
              edges {
                node {
                  name
                  playerCollection {
                    totalCount: edges {
                      cursor
                    }
                  }
                }
              }
            }
            playerCollection(last: 1) {
              pageInfo {
                hasPreviousPage
              }
              edges {
                node {
                  name
                }
              }
            }
          }
        `,
      );
    });
    expect(result.errors).toBeUndefined();
    expect(result.data.teamCollection).toMatchObject({
      totalCount: 2,
      pageInfo: { hasNextPage: true, hasPreviousPage: false },
    });
    expect(result.data.playerCollection).toEqual({
      pageInfo: { hasPreviousPage: true },
      edges: [{ node: { name: "cy" } }],
    });
    expect(roundTrips).toHaveLength(1);
  });

  it("pages with pageInfo but without totalCount without counting the whole filter", async () => {
    let result: any;
    const roundTrips = await roundTripsDuring(async () => {
      result = await graphql(
        server,
        `
          {
            playerCollection(first: 1, filter: { name: { neq: "zed" } }, orderBy: [{ name: DescNullsLast }]) {
              pageInfo {
                hasNextPage
                hasPreviousPage
              }
              edges {
                node {
                  name
                }
              }
            }
          }
        `,
      );
    });
    expect(result.data.playerCollection).toEqual({
      pageInfo: { hasNextPage: true, hasPreviousPage: false },
      edges: [{ node: { name: "cy" } }],
    });
    expect(roundTrips).toHaveLength(1);
    // The one round trip carries the statement (with BEGIN and the settings): no count(*) in it.
    expect(roundTrips[0]).toMatch(/from "public"\."player"/);
    expect(roundTrips[0]).not.toMatch(/count\(\*\)/i);
  });

  /** A page of players with `pageInfo`, answered by one statement that scans the table once. */
  async function playersInOneScan(args: string, pageInfo: string): Promise<any> {
    let result: any;
    const roundTrips = await roundTripsDuring(async () => {
      result = await graphql(
        server,
        `{ playerCollection(${args}) { pageInfo { ${pageInfo} } edges { node { name } } } }`,
      );
    });
    expect(result.errors).toBeUndefined();
    const statements = dataStatements(roundTrips);
    expect(statements).toHaveLength(1);
    expect(statements[0].match(/from "public"\."player"/g)).toHaveLength(1);
    return result.data.playerCollection;
  }

  it("tells hasNextPage from one row fetched past the page, without a second scan", async () => {
    const page = (args: string) => playersInOneScan(args, "hasNextPage endCursor");
    const two = await page("first: 2");
    expect(two.pageInfo.hasNextPage).toBe(true);
    expect(two.edges).toEqual([{ node: { name: "ann" } }, { node: { name: "bob" } }]);
    // The extra row is dropped: the last edge's cursor is endCursor.
    const after = await page(`first: 2, after: "${two.pageInfo.endCursor}"`);
    expect(after).toMatchObject({ pageInfo: { hasNextPage: false }, edges: [{ node: { name: "cy" } }] });
    expect((await page("first: 3")).pageInfo.hasNextPage).toBe(false);
    expect((await page("first: 1, offset: 1")).pageInfo.hasNextPage).toBe(true);
    expect((await page("first: 1, offset: 2")).pageInfo.hasNextPage).toBe(false);
  });

  it("tells hasPreviousPage of a page without a cursor from its offset, without a probe", async () => {
    const flags = async (args: string) =>
      (await playersInOneScan(args, "hasNextPage hasPreviousPage")).pageInfo;
    expect(await flags("first: 2")).toEqual({ hasNextPage: true, hasPreviousPage: false });
    expect(await flags("first: 2, offset: 1")).toEqual({ hasNextPage: false, hasPreviousPage: true });
    // An offset past the rows: an empty page has no previous page, as in pg_graphql.
    expect(await flags("first: 2, offset: 5")).toEqual({ hasNextPage: false, hasPreviousPage: false });
  });

  it("builds a statement once and sends it again with the next request's values", async () => {
    const byKey = `
      query ($id: Int!) {
        playerByPk(id: $id) {
          name
          team {
            name
          }
        }
      }
    `;
    const answers: unknown[] = [];
    const sent = await authenticatorMessagesDuring(async () => {
      for (const id of [1, 3]) answers.push((await graphql(server, byKey, { variables: { id } })).data);
    });
    expect(answers).toEqual([
      { playerByPk: { name: "ann", team: { name: "red" } } },
      { playerByPk: { name: "cy", team: { name: "blue" } } },
    ]);
    const statements = sent.filter((m) => dataStatements([m.text]).length === 1);
    expect(statements).toHaveLength(2);
    // The same text (the parent joined in), each request's key as its value.
    expect(statements[1].text).toBe(statements[0].text);
    expect(statements.map((m) => m.values)).toEqual([["1"], ["3"]]);

    // A page size from a variable is part of the text: each size gets its own statement.
    const pages = `
      query ($n: Int!) {
        teamCollection(first: $n) {
          edges {
            node {
              name
              playerCollection(first: 1) {
                edges {
                  node {
                    name
                  }
                }
              }
            }
          }
        }
      }
    `;
    const sizes: unknown[] = [];
    for (const n of [1, 2, 1]) sizes.push((await graphql(server, pages, { variables: { n } })).data);
    const one = { node: { name: "red", playerCollection: { edges: [{ node: { name: "ann" } }] } } };
    const two = { node: { name: "blue", playerCollection: { edges: [{ node: { name: "cy" } }] } } };
    expect(sizes).toEqual([
      { teamCollection: { edges: [one] } },
      { teamCollection: { edges: [one, two] } },
      { teamCollection: { edges: [one] } },
    ]);
  });

  it("sends a filtered page's statement again with the next filter's operands, one statement per filter structure", async () => {
    const filtered = `
      query ($name: String, $team: Int!) {
        playerCollection(filter: { name: { neq: $name }, teamId: { eq: $team } }) {
          edges {
            node {
              name
            }
          }
        }
        teamCollection(filter: { or: [{ name: { eq: "blue" } }, { id: { in: [$team] } }] }) {
          totalCount
          edges {
            node {
              name
              playerCollection(filter: { name: { startsWith: "a" } }) {
                edges {
                  node {
                    name
                  }
                }
              }
            }
          }
        }
      }
    `;
    const requests = [
      { name: "bob", team: 1 },
      { name: "ann", team: 2 },
      // A null operand matches no row: another structure, another statement.
      { name: null, team: 1 },
      { name: "zed", team: 1 },
    ];
    const answers: unknown[] = [];
    const sent = await authenticatorMessagesDuring(async () => {
      for (const variables of requests) answers.push((await graphql(server, filtered, { variables })).data);
    });
    const team = (name: string, players: string[]) => ({
      node: { name, playerCollection: { edges: players.map((p) => ({ node: { name: p } })) } },
    });
    const page = (names: string[]) => ({ edges: names.map((name) => ({ node: { name } })) });
    const both = { totalCount: 2, edges: [team("red", ["ann"]), team("blue", [])] };
    expect(answers).toEqual([
      { playerCollection: page(["ann"]), teamCollection: both },
      { playerCollection: page(["cy"]), teamCollection: { totalCount: 1, edges: [team("blue", [])] } },
      { playerCollection: page([]), teamCollection: both },
      { playerCollection: page(["ann", "bob"]), teamCollection: both },
    ]);
    const statements = sent.filter((m) => dataStatements([m.text]).length === 1);
    expect(statements).toHaveLength(4);
    // One text for the three requests whose operands are all given, each sent with its own operands.
    expect(statements[1].text).toBe(statements[0].text);
    expect(statements[3].text).toBe(statements[0].text);
    expect(statements[2].text).not.toBe(statements[0].text);
    const operands = statements.map((m) =>
      (m.values ?? []).filter((v) => v === "bob" || v === "ann" || v === "zed"),
    );
    expect(operands).toEqual([["bob"], ["ann"], [], ["zed"]]);
    // The `in` list travels as one array operand.
    expect(statements[1].values).toContain('{"2"}');
  });

  it("updates rows and returns them with their relations in one SQL statement", async () => {
    // Warm the service role's schema so only the request's own statements are counted.
    await graphql(
      server,
      `
        {
          __typename
        }
      `,
      { key: server.serviceKey },
    );
    let result: any;
    const roundTrips = await roundTripsDuring(async () => {
      result = await graphql(
        server,
        `
          mutation {
            updatePlayerCollection(set: { name: "bo" }, filter: { name: { eq: "bob" } }) {
              affectedCount
              records {
                name
                team {
                  name
                }
              }
            }
          }
        `,
        { key: server.serviceKey },
      );
    });
    expect(result).toEqual({
      data: {
        updatePlayerCollection: { affectedCount: 1, records: [{ name: "bo", team: { name: "red" } }] },
      },
    });
    expect(dataStatements(roundTrips)).toHaveLength(1);
    // BEGIN and the settings travel with the statement; COMMIT follows once the answer is built.
    expect(roundTrips).toHaveLength(2);
    expect(roundTrips[1]).toBe("commit");
    expect((await server.sql("select name from player where name = 'bo'")).rows).toHaveLength(1);
  });

  it("computes aggregates of root and relationship collections in one round trip to the database", async () => {
    let result: any;
    const roundTrips = await roundTripsDuring(async () => {
      result = await graphql(
        server,
        `
          {
            teamCollection(filter: { name: { neq: "green" } }) {
              aggregate {
                count
                max {
                  name
                }
              }
              edges {
                node {
                  name
                  playerCollection {
                    aggregate {
                      count
                      min {
                        name
                      }
                    }
                  }
                }
              }
            }
          }
        `,
      );
    });
    expect(result).toEqual({
      data: {
        teamCollection: {
          aggregate: { count: 2, max: { name: "red" } },
          edges: [
            { node: { name: "red", playerCollection: { aggregate: { count: 2, min: { name: "ann" } } } } },
            { node: { name: "blue", playerCollection: { aggregate: { count: 1, min: { name: "cy" } } } } },
          ],
        },
      },
    });
    expect(roundTrips).toHaveLength(1);
  });

  it("deletes rows and answers their relations' collections as the statement found them, in one statement", async () => {
    await graphql(server, "{ __typename }", { key: server.serviceKey });
    let result: any;
    const roundTrips = await roundTripsDuring(async () => {
      result = await graphql(
        server,
        `
          mutation {
            deleteFromLeagueCollection(filter: { name: { eq: "east" } }) {
              affectedCount
              records {
                name
                clubCollection {
                  totalCount
                  edges {
                    node {
                      name
                    }
                  }
                }
              }
            }
          }
        `,
        { key: server.serviceKey },
      );
    });
    // The clubs go with their league (on delete cascade), yet the records show them: one snapshot, as pg_graphql's.
    expect(result).toEqual({
      data: {
        deleteFromLeagueCollection: {
          affectedCount: 1,
          records: [
            {
              name: "east",
              clubCollection: {
                totalCount: 2,
                edges: [{ node: { name: "ants" } }, { node: { name: "bees" } }],
              },
            },
          ],
        },
      },
    });
    expect(dataStatements(roundTrips)).toHaveLength(1);
    const left = await server.sql("select name from club order by name");
    expect(left.rows).toEqual([{ name: "cats" }]);
  });

  // Last: its schema change rebuilds the schemas the tests above measure warm.
  it("answers a constraint checked at commit as an error and keeps nothing of the mutation", async () => {
    await migrate(
      server,
      `create table ledger (id int primary key, amount int not null);
       create function ledger_balanced() returns trigger language plpgsql as $$
       begin
         if (select sum(amount) from ledger) <> 0 then raise exception 'ledger out of balance'; end if;
         return null;
       end $$;
       create constraint trigger ledger_balanced after insert or update on ledger
         deferrable initially deferred for each row execute function ledger_balanced();
       grant all on ledger to service_role;`,
    );
    // Warm the service role's schema so only the request's own statements are counted.
    await graphql(server, "{ __typename }", { key: server.serviceKey });
    const insert = (amounts: number[]) =>
      graphql(
        server,
        `mutation { insertIntoLedgerCollection(objects: [${amounts
          .map((a, i) => `{ id: ${i + 1}, amount: ${a} }`)
          .join(", ")}]) { affectedCount } }`,
        { key: server.serviceKey },
      );
    let unbalanced: any;
    const roundTrips = await roundTripsDuring(async () => {
      unbalanced = await insert([5, -3]);
    });
    // The statement succeeds; the COMMIT after the answer runs the deferred trigger, which refuses it.
    expect(roundTrips.filter((t) => /insert into/i.test(t))).toHaveLength(1);
    expect(unbalanced).toEqual({ data: null, errors: [{ message: "ledger out of balance" }] });
    expect((await server.sql("select count(*)::int as n from ledger")).rows[0].n).toBe(0);
    expect(await insert([5, -5])).toEqual({ data: { insertIntoLedgerCollection: { affectedCount: 2 } } });
    expect((await server.sql("select count(*)::int as n from ledger")).rows[0].n).toBe(2);
  });
});
