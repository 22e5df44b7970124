import { authenticatorMessagesDuring } from "../helpers/statements";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate, userToken } from "./client";

const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true, "introspection": true})';
  create table team(
    id serial primary key,
    name varchar(10) not null,
    motto text default 'play fair',
    settings jsonb,
    labels text[]
  );
  comment on table team is '@graphql({"totalCount": {"enabled": true}})';
  create table player(
    id serial primary key,
    team_id int not null references team(id),
    name text not null,
    goals bigint not null default 0
  );
  create table topic(
    id serial primary key,
    parent_id int references topic(id),
    label text not null
  );
  insert into team(name) values ('red'), ('blue');
  insert into player(team_id, name, goals) values (1, 'ann', 3), (1, 'bob', 1), (2, 'cy', 7);

  -- Anonymous users may only read; signed-in users may add and rename players but never delete
  -- them, nor set their goals.
  revoke all on team, player, topic from anon, authenticated;
  grant select on team, player, topic to anon, authenticated;
  grant insert (team_id, name), update (name) on player to authenticated;
  grant usage on sequence player_id_seq to authenticated;
`;

describe("GraphQL mutations (pg_graphql shape)", () => {
  let server: TestServer;
  const asService = () => ({ key: server.serviceKey });
  const count = async (table: string) =>
    Number((await server.sql(`select count(*) from ${table}`)).rows[0].count);

  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  it("inserts several rows at once; an omitted column takes its default, an explicit null stays null", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          insertIntoTeamCollection(
            objects: [
              { name: "green", settings: "{\\"size\\": 5}", labels: "solo" }
              { name: "gold", motto: null }
            ]
          ) {
            affectedCount
            records {
              name
              motto
              settings
              labels
              playerCollection {
                edges {
                  cursor
                }
              }
            }
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({
      data: {
        insertIntoTeamCollection: {
          affectedCount: 2,
          records: [
            {
              name: "green",
              motto: "play fair",
              settings: '{"size": 5}',
              labels: ["solo"],
              playerCollection: { edges: [] },
            },
            { name: "gold", motto: null, settings: null, labels: null, playerCollection: { edges: [] } },
          ],
        },
      },
    });
    const { rows } = await server.sql(
      "select name, motto, settings from team where name in ('green', 'gold') order by id",
    );
    expect(rows).toEqual([
      { name: "green", motto: "play fair", settings: { size: 5 } },
      { name: "gold", motto: null, settings: null },
    ]);
  });

  it("returns the inserted records with their relationships and nodeId", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          insertIntoPlayerCollection(objects: [{ teamId: 2, name: "dee", goals: "9007199254740993" }]) {
            records {
              __typename
              nodeId
              name
              goals
              team {
                name
              }
            }
          }
        }
      `,
      asService(),
    );
    const [record] = res.data.insertIntoPlayerCollection.records;
    expect(record).toMatchObject({
      __typename: "Player",
      name: "dee",
      goals: "9007199254740993",
      team: { name: "blue" },
    });
    expect(JSON.parse(Buffer.from(record.nodeId, "base64").toString())).toEqual(["public", "player", 4]);
    await server.sql("delete from player where name = 'dee'");
  });

  it("updates the rows a filter matches, up to atMost", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          updatePlayerCollection(
            set: { goals: "0" }
            filter: { or: [{ name: { eq: "ann" } }, { name: { eq: "bob" } }] }
            atMost: 2
          ) {
            affectedCount
            records {
              name
              goals
            }
          }
        }
      `,
      asService(),
    );
    expect(res.data.updatePlayerCollection.affectedCount).toBe(2);
    expect(res.data.updatePlayerCollection.records).toEqual(
      expect.arrayContaining([
        { name: "ann", goals: "0" },
        { name: "bob", goals: "0" },
      ]),
    );
    await server.sql(
      "update player set goals = 3 where name = 'ann'; update player set goals = 1 where name = 'bob'",
    );
  });

  it("refuses an update past atMost (default 1) and changes nothing", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          updatePlayerCollection(set: { name: "same" }, filter: { teamId: { eq: 1 } }) {
            affectedCount
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({ data: null, errors: [{ message: "update impacts too many records" }] });
    const { rows } = await server.sql("select name from player where team_id = 1 order by id");
    expect(rows.map((r) => r.name)).toEqual(["ann", "bob"]);
  });

  it("deletes the filtered rows and answers them as records", async () => {
    await server.sql("insert into team(name) values ('temp')");
    const res = await graphql(
      server,
      `
        mutation {
          deleteFromTeamCollection(filter: { name: { eq: "temp" } }) {
            affectedCount
            records {
              name
            }
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({
      data: { deleteFromTeamCollection: { affectedCount: 1, records: [{ name: "temp" }] } },
    });
    expect(Number((await server.sql("select count(*) from team where name = 'temp'")).rows[0].count)).toBe(0);
  });

  it("refuses a delete past atMost and keeps every row", async () => {
    const before = await count("player");
    const res = await graphql(
      server,
      `
        mutation {
          deleteFromPlayerCollection(atMost: 2) {
            affectedCount
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({ data: null, errors: [{ message: "delete impacts too many records" }] });
    expect(await count("player")).toBe(before);
  });

  it("rolls back every mutation of a request when a later one fails", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          first: insertIntoTeamCollection(objects: [{ name: "purple" }]) {
            affectedCount
          }
          second: updateTeamCollection(set: { motto: "gone" }, atMost: 1) {
            affectedCount
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({ data: null, errors: [{ message: "update impacts too many records" }] });
    expect(Number((await server.sql("select count(*) from team where name = 'purple'")).rows[0].count)).toBe(
      0,
    );
  });

  it("lets a later mutation of the same request see an earlier one's rows", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          add: insertIntoTeamCollection(objects: [{ name: "teal" }]) {
            affectedCount
          }
          rename: updateTeamCollection(set: { name: "cyan" }, filter: { name: { eq: "teal" } }) {
            records {
              name
            }
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({ data: { add: { affectedCount: 1 }, rename: { records: [{ name: "cyan" }] } } });
    await server.sql("delete from team where name = 'cyan'");
  });

  it("checks inputs as pg_graphql does and writes nothing on a bad one", async () => {
    const tooLong = await graphql(
      server,
      `
        mutation {
          insertIntoTeamCollection(objects: [{ name: "ok" }, { name: "far too long a name" }]) {
            affectedCount
          }
        }
      `,
      asService(),
    );
    expect(tooLong).toEqual({
      data: null,
      errors: [{ message: "Invalid input for String type. Maximum character length 10" }],
    });
    const empty = await graphql(
      server,
      `
        mutation {
          insertIntoTeamCollection(objects: []) {
            affectedCount
          }
        }
      `,
      asService(),
    );
    expect(empty.errors).toEqual([{ message: "At least one record must be provided to objects" }]);
    const nothingSet = await graphql(
      server,
      `
        mutation {
          updateTeamCollection(set: {}, filter: { id: { eq: 1 } }) {
            affectedCount
          }
        }
      `,
      asService(),
    );
    expect(nothingSet.errors).toEqual([{ message: "At least one mapping must be provided to set argument" }]);
    expect(Number((await server.sql("select count(*) from team where name = 'ok'")).rows[0].count)).toBe(0);
  });

  it("offers each role only the mutations and input fields its privileges allow", async () => {
    const token = await userToken(server, "00000000-0000-0000-0000-000000000001");
    const res = await graphql(
      server,
      `
        {
          mutation: __type(name: "Mutation") {
            fields {
              name
            }
          }
          insert: __type(name: "PlayerInsertInput") {
            inputFields {
              name
              type {
                kind
                name
              }
            }
          }
          update: __type(name: "PlayerUpdateInput") {
            inputFields {
              name
            }
          }
        }
      `,
      { token },
    );
    expect(res.data.mutation.fields.map((f: { name: string }) => f.name)).toEqual([
      "insertIntoPlayerCollection",
      "updatePlayerCollection",
    ]);
    // The serial id is left out; every field is nullable.
    expect(res.data.insert.inputFields).toEqual([
      { name: "teamId", type: { kind: "SCALAR", name: "Int" } },
      { name: "name", type: { kind: "SCALAR", name: "String" } },
    ]);
    expect(res.data.update.inputFields).toEqual([{ name: "name" }]);

    const inserted = await graphql(
      server,
      `
        mutation {
          insertIntoPlayerCollection(objects: [{ teamId: 1, name: "eve" }]) {
            records {
              name
              goals
            }
          }
        }
      `,
      { token },
    );
    expect(inserted).toEqual({
      data: { insertIntoPlayerCollection: { records: [{ name: "eve", goals: "0" }] } },
    });

    const anon = await graphql(
      server,
      `
        mutation {
          deleteFromPlayerCollection(filter: { name: { eq: "eve" } }) {
            affectedCount
          }
        }
      `,
    );
    expect(anon).toEqual({ data: null, errors: [{ message: "Schema is not configured for mutations" }] });
    await server.sql("delete from player where name = 'eve'");
  });

  it("reads the records' related rows as they were before the mutation, as pg_graphql's single statement does", async () => {
    await server.sql("insert into topic(id, parent_id, label) values (1, null, 'root'), (2, 1, 'leaf')");
    const res = await graphql(
      server,
      `
        mutation {
          deleteFromTopicCollection(atMost: 2) {
            records {
              label
              parent {
                label
              }
            }
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({
      data: {
        deleteFromTopicCollection: {
          records: [
            { label: "root", parent: null },
            { label: "leaf", parent: { label: "root" } },
          ],
        },
      },
    });
    expect(await count("topic")).toBe(0);
  });

  it("writes even when the response selects neither affectedCount nor records", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          insertIntoTeamCollection(objects: [{ name: "quiet" }]) {
            __typename
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({ data: { insertIntoTeamCollection: { __typename: "TeamInsertResponse" } } });
    expect(Number((await server.sql("select count(*) from team where name = 'quiet'")).rows[0].count)).toBe(
      1,
    );
    await server.sql("delete from team where name = 'quiet'");
  });

  it("inserts rows of one shape through one statement text, binding each request's values", async () => {
    const insert = `
      mutation ($name: String!, $goals: BigInt) {
        insertIntoPlayerCollection(objects: [{ teamId: 1, name: $name, goals: $goals }]) {
          affectedCount
        }
      }
    `;
    const sent = await authenticatorMessagesDuring(async () => {
      for (const [name, goals] of [
        ["eve", "5"],
        ["fay", "6"],
      ]) {
        const res = await graphql(server, insert, { ...asService(), variables: { name, goals } });
        expect(res.data).toEqual({ insertIntoPlayerCollection: { affectedCount: 1 } });
      }
    });
    const inserts = sent.filter((m) => /insert into/i.test(m.text));
    expect(inserts).toHaveLength(2);
    expect(inserts[1].text).toBe(inserts[0].text);
    // A value left out takes its column's default: another shape, another text.
    const res = await graphql(server, insert, { ...asService(), variables: { name: "gus" } });
    expect(res.data).toEqual({ insertIntoPlayerCollection: { affectedCount: 1 } });
    const written = await server.sql(
      "select name, goals::text from player where name in ('eve', 'fay', 'gus') order by name",
    );
    expect(written.rows).toEqual([
      { name: "eve", goals: "5" },
      { name: "fay", goals: "6" },
      { name: "gus", goals: "0" },
    ]);
    await server.sql("delete from player where name in ('eve', 'fay', 'gus')");
  });

  it("inserts a literal list again on each request of the same document, each time a new row", async () => {
    const insert = `mutation { insertIntoPlayerCollection(objects: [{ teamId: 2, name: "hal" }]) { records { id name } } }`;
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await graphql(server, insert, asService());
      const records = (
        res.data as { insertIntoPlayerCollection: { records: { id: number; name: string }[] } }
      ).insertIntoPlayerCollection.records;
      expect(records).toHaveLength(1);
      expect(records[0].name).toBe("hal");
      ids.push(records[0].id);
    }
    expect(new Set(ids).size).toBe(3);
    const written = await server.sql("select id from player where name = 'hal' order by id");
    expect(written.rows.map((r) => r.id)).toEqual([...ids].sort((a, b) => a - b));
    await server.sql("delete from player where name = 'hal'");
  });

  it("updates and deletes through one statement text per shape, binding each request's values and operands", async () => {
    await server.sql(
      "insert into player(team_id, name, goals) values (2, 'hal', 1), (2, 'ida', 2), (2, 'jo', 3), (2, 'kim', 4)",
    );
    const update = `
      mutation ($name: String!, $goals: BigInt, $was: String) {
        updatePlayerCollection(set: { goals: $goals }, filter: { name: { eq: $was }, teamId: { eq: 2 } }, atMost: 1) {
          records { name goals }
        }
      }
    `;
    const remove = `
      mutation ($names: [String!]) {
        deleteFromPlayerCollection(filter: { name: { in: $names } }, atMost: 2) {
          affectedCount
        }
      }
    `;
    const answers: unknown[] = [];
    const sent = await authenticatorMessagesDuring(async () => {
      for (const [was, goals] of [
        ["hal", "10"],
        ["ida", "20"],
      ]) {
        answers.push(
          (await graphql(server, update, { ...asService(), variables: { name: was, was, goals } })).data,
        );
      }
      // A null operand matches no row: another structure, another text.
      answers.push(
        (await graphql(server, update, { ...asService(), variables: { name: "x", was: null, goals: "9" } }))
          .data,
      );
      for (const names of [["hal"], ["ida", "jo"]]) {
        answers.push((await graphql(server, remove, { ...asService(), variables: { names } })).data);
      }
    });
    expect(answers).toEqual([
      { updatePlayerCollection: { records: [{ name: "hal", goals: "10" }] } },
      { updatePlayerCollection: { records: [{ name: "ida", goals: "20" }] } },
      { updatePlayerCollection: { records: [] } },
      { deleteFromPlayerCollection: { affectedCount: 1 } },
      { deleteFromPlayerCollection: { affectedCount: 2 } },
    ]);
    const updates = sent.filter((m) => /update /i.test(m.text));
    expect(updates).toHaveLength(3);
    expect(updates[1].text).toBe(updates[0].text);
    expect(updates[2].text).not.toBe(updates[0].text);
    const deletes = sent.filter((m) => /delete from/i.test(m.text));
    expect(deletes).toHaveLength(2);
    expect(deletes[1].text).toBe(deletes[0].text);
    // What psql sees: each request changed its own rows and nothing else.
    const left = await server.sql("select name, goals::text from player where team_id = 2 order by name");
    expect(left.rows).toEqual([
      { name: "cy", goals: "7" },
      { name: "kim", goals: "4" },
    ]);
  });
});
