import pg from "pg";
import { authenticatorStatementsDuring } from "../helpers/statements";
import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { graphql, migrate } from "./client";

/**
 * One transaction decision per GraphQL request (PgGqlTransactionPlugin): a query of several statements reads one
 * snapshot, a mutation commits only once its answer is built. Effects are read back as the superuser.
 */
describe("GraphQL request transactions", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(
      server,
      `comment on schema public is '@graphql({"inflect_names": true})';
       create table reading(id serial primary key, label text not null, value float8 not null default 'NaN');
       grant select, insert, update, delete on reading to anon;
       grant usage on all sequences in schema public to anon;
       create table tally(id int primary key);
       insert into tally values (1), (2);
       grant select on tally to anon;
       -- Waits for the test's advisory lock, then counts tally rows (a stable function reads its caller's snapshot).
       create function tally_count(tag text) returns text language plpgsql stable as $$
       begin
         perform pg_advisory_xact_lock(4242);
         return tag || ':' || (select count(*) from tally) || ':' || now()::text;
       end $$;
       grant execute on function tally_count to anon;`,
    );
  });
  afterAll(() => server.stop());

  const readings = async () =>
    (await server.sql("select label from reading order by id")).rows.map((r) => r.label as string);

  it("rolls a mutation back when its answer fails after its statement succeeded, and answers an error", async () => {
    // The insert succeeds; writing `value` (NaN, which GraphQL's Float cannot represent) then fails the answer.
    const failed = await graphql(
      server,
      `
        mutation {
          insertIntoReadingCollection(objects: [{ label: "lost" }]) {
            records {
              label
              value
            }
          }
        }
      `,
    );
    expect(failed).toEqual({ data: null, errors: [{ message: "Internal server error" }] });
    expect(await readings()).toEqual([]);
    // The same write with an answer that can be written is committed.
    const kept = await graphql(
      server,
      `
        mutation {
          insertIntoReadingCollection(objects: [{ label: "kept", value: 1.5 }]) {
            records {
              label
              value
            }
          }
        }
      `,
    );
    expect(kept).toEqual({
      data: { insertIntoReadingCollection: { records: [{ label: "kept", value: 1.5 }] } },
    });
    expect(await readings()).toEqual(["kept"]);
    // An update and a delete whose answer fails leave the row as it was.
    await server.sql("update reading set value = 'NaN' where label = 'kept'");
    for (const mutation of [
      `updateReadingCollection(set: { label: "changed" }, filter: { label: { eq: "kept" } }) { records { value } }`,
      `deleteFromReadingCollection(filter: { label: { eq: "kept" } }) { records { value } }`,
    ]) {
      expect(await graphql(server, `mutation { ${mutation} }`)).toEqual({
        data: null,
        errors: [{ message: "Internal server error" }],
      });
      expect(await readings()).toEqual(["kept"]);
    }
  });

  it("commits a mutation only after its answer is built: COMMIT is the request's last message", async () => {
    const sent = await authenticatorStatementsDuring(() =>
      graphql(
        server,
        `
          mutation {
            insertIntoReadingCollection(objects: [{ label: "last", value: 2 }]) {
              affectedCount
            }
          }
        `,
      ),
    );
    expect(sent.at(-1)).toBe("commit");
    expect(sent.filter((t) => /insert into/i.test(t))).toHaveLength(1);
    expect(await readings()).toContain("last");
  });

  it("reads two root fields' statements on one snapshot, whatever commits between them", async () => {
    const lock = new pg.Client({ connectionString: server.dbUrl });
    await lock.connect();
    try {
      await lock.query("select pg_advisory_lock(4242)");
      const answer = graphql(
        server,
        `
          {
            a: tallyCount(tag: "a")
            b: tallyCount(tag: "b")
          }
        `,
      );
      // The request's first statement waits for the lock; a row is committed meanwhile, then the lock released.
      await until(async () => {
        const waiting = await server.sql(
          "select 1 from pg_locks where locktype = 'advisory' and objid = 4242 and not granted",
        );
        return waiting.rowCount ? true : undefined;
      });
      await server.sql("insert into tally values (3)");
      await lock.query("select pg_advisory_unlock(4242)");
      const { data } = await answer;
      const [a, b] = [data.a as string, data.b as string].map((v) => v.split(":"));
      // Both statements counted the rows as of the first one, in one transaction (one now()).
      expect([a[0], a[1]]).toEqual(["a", "2"]);
      expect([b[0], b[1]]).toEqual(["b", "2"]);
      expect(a.slice(2)).toEqual(b.slice(2));
      // A later request reads the committed row.
      const later = await graphql(
        server,
        `
          {
            tallyCount(tag: "c")
          }
        `,
      );
      expect((later.data.tallyCount as string).split(":")[1]).toBe("3");
    } finally {
      await lock.end();
    }
  });

  it("keeps a one-statement query to one round trip", async () => {
    const sent = await authenticatorStatementsDuring(() =>
      graphql(
        server,
        `
          {
            tallyCount(tag: "one")
          }
        `,
      ),
    );
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/tally_count/);
  });
});
