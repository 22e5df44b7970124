import { useCallback, useMemo, useState } from "react";
import { useParams } from "react-router";
import CodeMirror from "@uiw/react-codemirror";
import { Prec } from "@codemirror/state";
import { keymap } from "@codemirror/view";
import { PostgreSQL, sql } from "@codemirror/lang-sql";
import { runSql } from "../api";
import { DataGrid, type Row } from "../components/DataGrid";
import { ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import { useAsync } from "../useAsync";

const HISTORY_SIZE = 30;

/** Tables and their columns of the project's schemas, for the editor's completion. */
function useCompletionSchema(ref: string) {
  return useAsync(async () => {
    const rows = await runSql<{ schema: string; table: string; columns: string[] }>(
      ref,
      `select n.nspname as schema, c.relname as table,
              json_agg(a.attname order by a.attnum) filter (where a.attnum > 0 and not a.attisdropped) as columns
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
         join pg_attribute a on a.attrelid = c.oid
        where c.relkind in ('r', 'p', 'v', 'm', 'f') and n.nspname !~ '^(pg_|_strata|information_schema$)'
        group by 1, 2`,
    );
    const schema: Record<string, string[]> = {};
    for (const r of rows) {
      schema[`${r.schema}.${r.table}`] = r.columns ?? [];
      if (r.schema === "public") schema[r.table] = r.columns ?? [];
    }
    return schema;
  }, [ref]);
}

/** The queries run on this project, newest first, kept in this browser. */
function useHistory(ref: string) {
  const key = `strata-studio:sql-history:${ref}`;
  const [history, setHistory] = useState<string[]>(
    () => JSON.parse(localStorage.getItem(key) ?? "[]") as string[],
  );
  const remember = useCallback(
    (query: string) =>
      setHistory((h) => {
        const next = [query, ...h.filter((q) => q !== query)].slice(0, HISTORY_SIZE);
        localStorage.setItem(key, JSON.stringify(next));
        return next;
      }),
    [key],
  );
  return { history, remember };
}

interface Result {
  rows: Row[];
  columns: string[];
  ms: number;
}

export default function SqlEditor() {
  const { ref } = useParams() as { ref: string };
  const [query, setQuery] = useState("select now();");
  const [result, setResult] = useState<Result>();
  const [error, setError] = useState<Error>();
  const [running, setRunning] = useState(false);
  const completion = useCompletionSchema(ref);
  const { history, remember } = useHistory(ref);

  const run = useCallback(async () => {
    if (running || !query.trim()) return;
    setRunning(true);
    setError(undefined);
    const started = performance.now();
    try {
      const rows = await runSql<Row>(ref, query);
      const columns = rows.length ? Object.keys(rows[0]) : [];
      setResult({ rows, columns, ms: Math.round(performance.now() - started) });
      remember(query);
    } catch (e) {
      setResult(undefined);
      setError(e as Error);
    } finally {
      setRunning(false);
    }
  }, [ref, query, running, remember]);

  const extensions = useMemo(
    () => [
      sql({ dialect: PostgreSQL, schema: completion.data, upperCaseKeywords: false }),
      Prec.highest(keymap.of([{ key: "Mod-Enter", run: () => (void run(), true) }])),
    ],
    [completion.data, run],
  );

  return (
    <div className="page sql-page">
      <PageHeader title="SQL editor">
        <span className="muted small">Ctrl+Enter runs</span>
        <button className="button primary" onClick={() => void run()} disabled={running}>
          {running ? "Running…" : "Run"}
        </button>
      </PageHeader>
      <div className="sql-layout">
        <div className="sql-main">
          <div className="sql-editor" aria-label="SQL">
            <CodeMirror
              value={query}
              height="220px"
              extensions={extensions}
              onChange={setQuery}
              basicSetup={{ foldGutter: false }}
            />
          </div>
          <ErrorBox error={error} title="Error" />
          {running && <Spinner label="Running" />}
          {result && (
            <section aria-label="Results">
              <div className="muted small results-meta">
                {result.rows.length} row{result.rows.length === 1 ? "" : "s"} · {result.ms} ms
              </div>
              {result.columns.length ? (
                <DataGrid rows={result.rows} columns={result.columns} height="calc(100vh - 460px)" />
              ) : (
                <div className="empty">Success. No rows returned.</div>
              )}
            </section>
          )}
        </div>
        <aside className="sql-history" aria-label="History">
          <h2>History</h2>
          <ul>
            {history.map((q) => (
              <li key={q}>
                <button className="history-item mono" title={q} onClick={() => setQuery(q)}>
                  {q}
                </button>
              </li>
            ))}
          </ul>
        </aside>
      </div>
    </div>
  );
}
