import { recordCodec, TYPES, type PgCodecWithAttributes, type PgResource } from "@dataplan/pg";
import { sql } from "pg-sql2";
import { FilterOperand, type AppliedFilter } from "../../plugins/pgGqlFilterOperands";
import {
  deleteSql,
  insertSql,
  mutationStatementSql,
  mutationTable,
  MUTATION_ALIAS,
  updateSql,
  type Answer,
} from "../../plugins/pgGqlMutationSql";

/** A table `public.book(id int, title text, secret text)` whose `secret` the role may not read. */
function bookTable() {
  const codec = recordCodec({
    name: "book",
    executor: null as never,
    identifier: sql`public.book`,
    attributes: {
      id: { codec: TYPES.int, notNull: true },
      title: { codec: TYPES.text },
      secret: { codec: TYPES.text, extensions: { canSelect: false } as never },
    },
  }) as unknown as PgCodecWithAttributes;
  return mutationTable({ codec, from: sql`public.book` } as unknown as PgResource);
}

/** `id = <operand>` as the filter plugin applies it. */
function idFilter(id: string): AppliedFilter {
  const operand = new FilterOperand(id);
  return {
    conditions: [sql`${MUTATION_ALIAS}."id" = ${sql.value(operand as never)}::int`],
    key: "1:id",
    operands: [operand],
  };
}

const viaSelect: Answer = { columns: null, key: "select" };

/** The SQL of pg_graphql's mutations, built without a database: the texts every mutation statement is made of. */
describe("mutation SQL", () => {
  it("inserts each given value as a bound text cast to its column's type and returns the columns the role may read", () => {
    const table = bookTable();
    const dml = insertSql(
      table,
      ["id", "title"],
      [
        ["1", "one"],
        ["2", undefined],
      ],
    );
    const { text, values } = sql.compile(dml);
    expect(text).toBe(
      'insert into public.book as "__t" ("id", "title") values (($1::"int4"), ($2::"text")), (($3::"int4"), default) returning "__t"."id", "__t"."title"',
    );
    expect(values).toEqual(["1", "one", "2"]);
  });

  it("inserts rows of defaults only when no row gives a column", () => {
    expect(sql.compile(insertSql(bookTable(), [], [[], []])).text).toBe(
      'insert into public.book as "__t" select from generate_series(1, 2) returning "__t"."id", "__t"."title"',
    );
  });

  it("updates and deletes the rows the filter matches, its operands bound after the column texts", () => {
    const table = bookTable();
    const filter = idFilter("7");
    const update = sql.compile(updateSql(table, ["title"], ["new"], filter));
    expect(update.text).toBe(
      'update public.book as "__t" set "title" = ($1::"text") where ("__t"."id" = $2::int) returning "__t"."id", "__t"."title"',
    );
    expect(update.values).toEqual(["new", filter.operands[0]]);
    expect(sql.compile(deleteSql(table, { conditions: [], key: "0:", operands: [] })).text).toBe(
      'delete from public.book as "__t" where TRUE returning "__t"."id", "__t"."title"',
    );
  });

  it("answers the records select with the affected rows as jsonb, refusing past atMost through the affected count", () => {
    const table = bookTable();
    const statement = mutationStatementSql(table, deleteSql(table, idFilter("7")), 2, "delete", viaSelect);
    expect(sql.compile(statement).text).toBe(
      'with __pgGqlAffected as (delete from public.book as "__t" where ("__t"."id" = $1::int) returning "__t"."id", "__t"."title"), ' +
        '__pgGqlRows(__json) as (select coalesce(jsonb_agg((jsonb_build_object(\'id\'::text, "__r"."id", \'title\'::text, "__r"."title"))), \'[]\'::jsonb) ' +
        "from __pgGqlAffected as \"__r\" having count(*) <= 2 or _strata_graphql.at_most('delete', count(*), 2))",
    );
  });

  it("answers the returned rows' columns, joined with the atMost check when there is one", () => {
    const table = bookTable();
    const answer: Answer = { columns: { codec: table.codec, names: ["title"] }, key: '["title"]' };
    const insert = insertSql(table, ["id"], [["1"]]);
    expect(sql.compile(mutationStatementSql(table, insert, null, "insert", answer)).text).toBe(
      'with __pgGqlAffected as (insert into public.book as "__t" ("id") values (($1::"int4")) returning "__t"."id", "__t"."title") ' +
        'select "__r"."title" from __pgGqlAffected as "__r"',
    );
    const update = updateSql(table, ["title"], ["new"], idFilter("7"));
    expect(sql.compile(mutationStatementSql(table, update, 1, "update", answer)).text).toMatch(
      /\), __pgGqlChecked as \(select from __pgGqlAffected having count\(\*\) <= 1 or _strata_graphql\.at_most\('update', count\(\*\), 1\)\) select "__r"\."title" from __pgGqlAffected as "__r", __pgGqlChecked$/,
    );
  });
});
