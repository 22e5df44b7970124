import { authenticatorMessagesDuring } from "../helpers/statements";
import { startTestServer, type TestServer } from "../helpers/server";
import { graphql, migrate, userToken, type GraphqlResult } from "./client";

const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true})';
  create type mood as enum ('calm', 'wild');
  create table kind(
    id serial primary key,
    code char(6),
    flag boolean,
    at timestamptz,
    day date,
    amount numeric,
    big bigint,
    doc json,
    docb jsonb,
    tags text[],
    feel mood,
    uid uuid,
    nothing text
  );
  create table tag(id serial primary key, kind_id int references kind(id), label text);
  grant all on kind, tag to service_role;

  -- Signed-in users see only their own notes (SELECT policy) but may update, delete and insert any row,
  -- and never read a note's secret: the records they get back, and the rows they touch, are those RETURNING lets through.
  create table note(id int primary key, owner text not null, body text not null, secret text);
  alter table note enable row level security;
  create policy own on note for select using (owner = 'me');
  create policy anyone_updates on note for update using (true);
  create policy anyone_deletes on note for delete using (true);
  create policy anyone_inserts on note for insert with check (true);
  revoke all on note from anon, authenticated;
  grant select (id, owner, body), insert, update (body), delete on note to authenticated;
`;

const KIND_COLUMNS = "code flag at day amount big doc docb tags feel uid nothing";
const KIND_VALUES = `{code: "ab", flag: true, at: "2024-02-03T04:05:06.789+02:00", day: "2024-02-29", amount: "12.50",
  big: "9007199254740993", doc: "{\\"a\\" : 1}", docb: "{\\"b\\": [1, 2]}", tags: ["x", "y z"], feel: wild,
  uid: "6f1b8c2e-9d0a-4f3e-8b7c-1a2b3c4d5e6f"}`;

describe("GraphQL mutation records read from the statement's returned rows", () => {
  let server: TestServer;
  const asService = () => ({ key: server.serviceKey });
  const notes = async () => (await server.sql("select id, owner, body from note order by id")).rows;

  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  beforeEach(async () => {
    await server.sql(`truncate note; insert into note values (1, 'me', 'a', 's1'), (2, 'other', 'b', 's2')`);
  });

  it("answers plain columns of every type as the records select reads them, without the select", async () => {
    const insert = (selection: string) =>
      graphql(
        server,
        `mutation { insertIntoKindCollection(objects: [${KIND_VALUES}]) { records { ${selection} } } }`,
        asService(),
      );
    const answers: GraphqlResult[] = [];
    const sent = await authenticatorMessagesDuring(async () => {
      answers.push(await insert(KIND_COLUMNS));
    });
    // nodeId needs the records select: the same row, read the other way.
    const selected = await insert(`nodeId ${KIND_COLUMNS}`);
    expect(answers[0].errors).toBeUndefined();
    const [row] = answers[0].data.insertIntoKindCollection.records;
    const { nodeId, ...same } = selected.data.insertIntoKindCollection.records[0];
    expect(nodeId).toEqual(expect.any(String));
    expect(row).toEqual(same);
    expect(row).toMatchObject({
      code: "ab    ",
      flag: true,
      big: "9007199254740993",
      tags: ["x", "y z"],
      nothing: null,
    });
    const inserts = sent.filter((m) => /insert into/i.test(m.text));
    expect(inserts).toHaveLength(1);
    expect(inserts[0].text).not.toMatch(/jsonb_populate_recordset/);

    // Update and delete answer the same way, in the statement's order.
    const update = await graphql(
      server,
      `
        mutation {
          updateKindCollection(set: { nothing: "n" }, filter: { code: { eq: "ab" } }, atMost: 5) {
            affectedCount
            records {
              nothing
              amount
              feel
            }
          }
        }
      `,
      asService(),
    );
    expect(update.data).toEqual({
      updateKindCollection: {
        affectedCount: 2,
        records: [
          { nothing: "n", amount: "12.50", feel: "wild" },
          { nothing: "n", amount: "12.50", feel: "wild" },
        ],
      },
    });
    const removed = await graphql(
      server,
      `
        mutation {
          deleteFromKindCollection(filter: { nothing: { eq: "n" } }, atMost: 5) {
            records {
              __typename
              day
            }
          }
        }
      `,
      asService(),
    );
    expect(removed.data).toEqual({
      deleteFromKindCollection: {
        records: [
          { __typename: "Kind", day: "2024-02-29" },
          { __typename: "Kind", day: "2024-02-29" },
        ],
      },
    });
    expect((await server.sql("select count(*)::int as n from kind")).rows[0].n).toBe(0);
  });

  it("reads records through the select when any selection of them needs it (a relation in a fragment, an aliased copy)", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          plain: insertIntoKindCollection(objects: [{ code: "p" }]) {
            records {
              code
            }
          }
          related: insertIntoKindCollection(objects: [{ code: "r" }]) {
            records {
              ...K
            }
          }
        }
        fragment K on Kind {
          code
          tagCollection {
            edges {
              node {
                label
              }
            }
          }
        }
      `,
      asService(),
    );
    expect(res.errors).toBeUndefined();
    expect(res.data).toEqual({
      plain: { records: [{ code: "p     " }] },
      related: { records: [{ code: "r     ", tagCollection: { edges: [] } }] },
    });
    await server.sql("delete from kind");
  });

  it("touches and answers only the rows the role's SELECT policies let RETURNING see, whatever is selected", async () => {
    const token = await userToken(server, "00000000-0000-0000-0000-000000000001");
    for (const selection of ["affectedCount", "records { id body }"]) {
      const res = await graphql(
        server,
        `mutation { updateNoteCollection(set: {body: "x"}, atMost: 5) { ${selection} } }`,
        { token },
      );
      expect(res.errors).toBeUndefined();
      expect(res.data.updateNoteCollection).toEqual(
        selection === "affectedCount" ? { affectedCount: 1 } : { records: [{ id: 1, body: "x" }] },
      );
      expect(await notes()).toEqual([
        { id: 1, owner: "me", body: "x" },
        { id: 2, owner: "other", body: "b" },
      ]);
    }
    const removed = await graphql(
      server,
      `
        mutation {
          deleteFromNoteCollection(atMost: 5) {
            affectedCount
          }
        }
      `,
      { token },
    );
    expect(removed.data).toEqual({ deleteFromNoteCollection: { affectedCount: 1 } });
    expect(await notes()).toEqual([{ id: 2, owner: "other", body: "b" }]);
  });

  it("refuses an insert whose new row the role could not read back, and writes nothing", async () => {
    const token = await userToken(server, "00000000-0000-0000-0000-000000000001");
    const refused = await graphql(
      server,
      `
        mutation {
          insertIntoNoteCollection(objects: [{ id: 3, owner: "other", body: "c" }]) {
            affectedCount
          }
        }
      `,
      { token },
    );
    expect(refused).toEqual({
      data: null,
      errors: [{ message: 'new row violates row-level security policy for table "note"' }],
    });
    const allowed = await graphql(
      server,
      `
        mutation {
          insertIntoNoteCollection(objects: [{ id: 4, owner: "me", body: "d" }]) {
            records {
              id
              owner
              body
            }
          }
        }
      `,
      { token },
    );
    expect(allowed.data).toEqual({
      insertIntoNoteCollection: { records: [{ id: 4, owner: "me", body: "d" }] },
    });
    expect((await notes()).map((n) => n.id)).toEqual([1, 2, 4]);
  });

  it("refuses an update past atMost when the records come from the returned rows, and changes nothing", async () => {
    const res = await graphql(
      server,
      `
        mutation {
          updateNoteCollection(set: { body: "z" }) {
            records {
              id
            }
          }
        }
      `,
      asService(),
    );
    expect(res).toEqual({ data: null, errors: [{ message: "update impacts too many records" }] });
    expect((await notes()).map((n) => n.body)).toEqual(["a", "b"]);
  });
});
