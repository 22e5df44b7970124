import type pg from "pg";
import { pipelined, plainStatement, settingsPreamble } from "../../src/db/pipeline";
import type { TransactionScope } from "../../src/db/transaction";

/**
 * The pipelining client's framing, without a database: the extended-protocol messages one pipeline writes (in
 * one write, one Sync), what it keeps per connection (prepared statements, row shapes), and which of the
 * answers it hands back as the result. A fake connection records the messages; the test answers them as
 * PostgreSQL would.
 */

interface Answering {
  handleRowDescription(msg: unknown): void;
  handleDataRow(msg: unknown): void;
  handleCommandComplete(msg: unknown, connection: unknown): void;
  handleError(err: Error, connection: unknown): void;
  handleReadyForQuery(connection: unknown): void;
  prepare(connection: unknown): void;
}

/** How the test answers one submitted query (a pipeline, or the close of prepared statements). */
type Answer = (query: Answering, connection: unknown) => void;

function fakeClient() {
  const messages: string[][] = [];
  const answers: Answer[] = [];
  let current: string[] = [];
  const connection = {
    parse: (c: { name: string; text: string }) => current.push(`Parse ${c.name || "-"} ${c.text}`),
    bind: (c: { statement: string; values: unknown[] }) =>
      current.push(`Bind ${c.statement || "-"} ${JSON.stringify(c.values)}`),
    describe: () => current.push("Describe"),
    execute: () => current.push("Execute"),
    sync: () => current.push("Sync"),
    close: (c: { name: string }) => current.push(`Close ${c.name}`),
  };
  const client = {
    query(query: Answering) {
      current = [];
      query.prepare(connection);
      messages.push(current);
      const answer = answers.shift();
      if (!answer) throw new Error("no answer scripted");
      queueMicrotask(() => answer(query, connection));
    },
  };
  return { client: client as unknown as pg.ClientBase, messages, answers };
}

const INT4 = 23;
/** PostgreSQL's answer to statements without Describe (their rows come without a RowDescription). */
const asideDone = (q: Answering, c: unknown, rows = 0) => {
  for (let i = 0; i < rows; i++) q.handleDataRow({ fields: ["x"] });
  q.handleCommandComplete({ text: `SELECT ${rows}` }, c);
};
/** The answer to a pipeline of `aside` statements before the main one, which returns `n` = each of `values`. */
function answered(asideRows: number[], values: string[], described: boolean): Answer {
  return (q, c) => {
    for (const rows of asideRows) asideDone(q, c, rows);
    if (described) q.handleRowDescription({ fields: [{ name: "n", dataTypeID: INT4, format: "text" }] });
    for (const v of values) q.handleDataRow({ fields: [v] });
    q.handleCommandComplete({ text: `SELECT ${values.length}` }, c);
    q.handleReadyForQuery(c);
  };
}

const scope: TransactionScope = { role: "anon", claims: { sub: "u" }, settings: { search_path: "public" } };
const statement = { text: "select n from t where n > $1", values: [1] };

describe("the pipelining client", () => {
  it("sends the settings and a statement as one pipeline, prepared once per connection and described once", async () => {
    const { client, messages, answers } = fakeClient();
    answers.push(answered([1], ["2", "3"], true));
    const first = await pipelined(client, scope, [settingsPreamble(client, scope)], statement);
    expect(first.rows).toEqual([{ n: 2 }, { n: 3 }]);
    const [settings, ...rest] = messages[0]!;
    expect(settings).toMatch(
      /^Parse strata_settings_\d+ select set_config\('search_path', \$1, true\), set_config\('role', \$2, true\), set_config\('request.jwt.claims', \$3, true\)$/,
    );
    const name = /^Parse (strata_\S+) select n from t/.exec(rest[2]!)?.[1];
    expect(rest).toEqual([
      `Bind ${settings!.split(" ")[1]} ["public","anon","{\\"sub\\":\\"u\\"}"]`,
      "Execute",
      `Parse ${name} select n from t where n > $1`,
      `Bind ${name} ["1"]`,
      "Describe",
      "Execute",
      "Sync",
    ]);
    // Again on the same connection: no Parse, no Describe; the rows read with the shape kept from the first.
    answers.push(answered([1], ["4"], false));
    const again = await pipelined(client, scope, [settingsPreamble(client, scope)], statement);
    expect(again.rows).toEqual([{ n: 4 }]);
    expect(messages[1]!.filter((m) => /^(Parse|Describe)/.test(m))).toEqual([]);
    expect(messages[1]!.at(-1)).toBe("Sync");
  });

  it("sends preamble statements ahead of the statement, reading only the statement's rows", async () => {
    const { client, messages, answers } = fakeClient();
    answers.push(answered([0, 1, 0], ["7"], true));
    const result = await pipelined(
      client,
      scope,
      [plainStatement("begin"), settingsPreamble(client, scope), plainStatement("savepoint a")],
      statement,
      "array",
    );
    expect(result.rows).toEqual([[7]]);
    // Statements named by their digest read as "strata_*", values left out.
    const kinds = messages[0]!.map((m) =>
      m.replace(/strata_settings_\d+/, "settings").replace(/strata_\S+/, "stmt"),
    );
    expect(kinds.map((m) => m.replace(/ \[.*\]$/, ""))).toEqual([
      "Parse - begin",
      "Bind -",
      "Execute",
      expect.stringMatching(/^Parse settings select set_config/),
      "Bind settings",
      "Execute",
      "Parse - savepoint a",
      "Bind -",
      "Execute",
      "Parse stmt select n from t where n > $1",
      "Bind stmt",
      "Describe",
      "Execute",
      "Sync",
    ]);
  });

  it("closes what a failed pipeline parsed, and parses it again next time", async () => {
    const { client, messages, answers } = fakeClient();
    answers.push((q, c) => {
      asideDone(q, c, 1);
      q.handleError(Object.assign(new Error("relation t does not exist"), { code: "42P01" }), c);
      q.handleReadyForQuery(c);
    });
    answers.push((q, c) => q.handleReadyForQuery(c));
    await expect(pipelined(client, scope, [settingsPreamble(client, scope)], statement)).rejects.toThrow(
      "relation t does not exist",
    );
    const parsed = messages[0]!.filter((m) => m.startsWith("Parse")).map((m) => m.split(" ")[1]);
    expect(messages[1]).toEqual([...parsed.map((n) => `Close ${n}`), "Sync"]);
    answers.push(answered([1], ["1"], true));
    await pipelined(client, scope, [settingsPreamble(client, scope)], statement);
    expect(messages[2]!.filter((m) => m.startsWith("Parse"))).toHaveLength(2);
  });

  it("parses a statement once for pipelines sent one after another on a connection before either is answered", async () => {
    const { client, messages, answers } = fakeClient();
    answers.push(answered([], ["2"], true), answered([], ["3"], true));
    await Promise.all([pipelined(client, scope, [], statement), pipelined(client, scope, [], statement)]);
    expect(messages.map((m) => m.filter((x) => x.startsWith("Parse")).length)).toEqual([1, 0]);
  });

  it("turns values into text before anything is sent", async () => {
    const { client, messages, answers } = fakeClient();
    answers.push(answered([], [], true));
    await pipelined(client, scope, [], { text: "select $1, $2, $3", values: [[1, 2], null, true] });
    expect(messages[0]!.find((m) => m.startsWith("Bind"))).toMatch(/\["\{\\"1\\",\\"2\\"\}",null,"true"\]$/);
  });
});
