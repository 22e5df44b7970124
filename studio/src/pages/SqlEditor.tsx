import { useCallback, useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { Link, useNavigate, useParams } from "react-router";
import CodeMirror from "@uiw/react-codemirror";
import { setDiagnostics } from "@codemirror/lint";
import { Prec, type EditorState } from "@codemirror/state";
import { keymap, type EditorView } from "@codemirror/view";
import { PostgreSQL, sql } from "@codemirror/lang-sql";
import { ApiError, mgmt, runSql } from "../api";
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

/** Where an error of the SQL endpoint lies in the query: its `position` (1-based), as an editor offset. */
function errorOffset(error: Error, length: number): number | undefined {
  const position =
    error instanceof ApiError ? (error.body as { position?: unknown } | undefined)?.position : undefined;
  return typeof position === "number" && position >= 1 ? Math.min(position - 1, length) : undefined;
}

/** "line 2, column 5" of `offset`. */
function lineAndColumn(state: EditorState, offset: number): string {
  const line = state.doc.lineAt(offset);
  return `line ${line.number}, column ${offset - line.from + 1}`;
}

interface Snippet {
  id: string;
  name: string;
  content?: { sql: string };
}

/** Saves the query as a snippet of the project (`POST /v1/snippets`, listed by the spec's `GET /v1/snippets`). */
function SaveSnippet({
  ref_,
  query,
  onSaved,
}: {
  ref_: string;
  query: string;
  onSaved: (id: string) => void;
}) {
  const [name, setName] = useState("");
  const [error, setError] = useState<Error>();
  async function save(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      const saved = await mgmt.post<Snippet>("/v1/snippets", { name, project_ref: ref_, sql: query });
      setName("");
      onSaved(saved.id);
    } catch (err) {
      setError(err as Error);
    }
  }
  return (
    <form className="save-snippet" onSubmit={(e) => void save(e)} aria-label="Save snippet">
      <input
        aria-label="Snippet name"
        placeholder="Snippet name"
        value={name}
        onChange={(e) => setName(e.target.value)}
        required
      />
      <button className="button" type="submit" disabled={!name.trim() || !query.trim()}>
        Save
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

interface Result {
  rows: Row[];
  columns: string[];
  ms: number;
}

export default function SqlEditor() {
  const { ref, id } = useParams() as { ref: string; id: string };
  const navigate = useNavigate();
  const [query, setQuery] = useState("select now();");
  const snippets = useAsync(
    () =>
      mgmt
        .get<{ data: Snippet[] }>(`/v1/snippets?project_ref=${ref}&sort_by=name&sort_order=asc`)
        .then((r) => r.data),
    [ref],
  );
  const opened = useAsync(
    () =>
      id === "new" ? Promise.resolve(undefined) : mgmt.get<Snippet>(`/v1/snippets/${encodeURIComponent(id)}`),
    [id],
  );
  useEffect(() => {
    if (opened.data?.content) setQuery(opened.data.content.sql);
  }, [opened.data]);
  const [result, setResult] = useState<Result>();
  const [error, setError] = useState<{ error: Error; at?: string }>();
  const editor = useRef<EditorView>(undefined);
  const [running, setRunning] = useState(false);
  const completion = useCompletionSchema(ref);
  const { history, remember } = useHistory(ref);

  const run = useCallback(async () => {
    if (running || !query.trim()) return;
    setRunning(true);
    setError(undefined);
    const view = editor.current;
    if (view) view.dispatch(setDiagnostics(view.state, []));
    const started = performance.now();
    try {
      const rows = await runSql<Row>(ref, query);
      const columns = rows.length ? Object.keys(rows[0]) : [];
      setResult({ rows, columns, ms: Math.round(performance.now() - started) });
      remember(query);
    } catch (e) {
      setResult(undefined);
      // The error's place in the text: marked in the editor, named in the message.
      const view = editor.current;
      const offset = view && errorOffset(e as Error, view.state.doc.length);
      if (view && offset !== undefined) {
        const to = Math.min(view.state.doc.lineAt(offset).to, view.state.wordAt(offset)?.to ?? offset + 1);
        view.dispatch(
          setDiagnostics(view.state, [
            { from: offset, to, severity: "error", message: (e as Error).message },
          ]),
        );
        setError({ error: e as Error, at: lineAndColumn(view.state, offset) });
      } else setError({ error: e as Error });
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
      <PageHeader title={opened.data ? opened.data.name : "SQL editor"}>
        <SaveSnippet
          ref_={ref}
          query={query}
          onSaved={(saved) => {
            snippets.reload();
            navigate(`/project/${ref}/sql/${saved}`);
          }}
        />
        <span className="muted small">Ctrl+Enter runs</span>
        <button className="button primary" onClick={() => void run()} disabled={running}>
          {running ? "Running…" : "Run"}
        </button>
      </PageHeader>
      <div className="sql-layout">
        <div className="sql-main">
          <div className="sql-editor" aria-label="SQL">
            <CodeMirror
              onCreateEditor={(view) => (editor.current = view)}
              value={query}
              height="220px"
              extensions={extensions}
              onChange={setQuery}
              basicSetup={{ foldGutter: false }}
            />
          </div>
          <ErrorBox error={opened.error} title="Snippet" />
          <ErrorBox error={error?.error} title={error?.at ? `Error at ${error.at}` : "Error"} />
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
          <h2>Snippets</h2>
          <ErrorBox error={snippets.error} />
          <ul aria-label="Snippets">
            {snippets.data?.map((snippet) => (
              <li key={snippet.id}>
                <Link className="history-item" to={`/project/${ref}/sql/${snippet.id}`}>
                  {snippet.name}
                </Link>
              </li>
            ))}
            {snippets.data?.length === 0 && <li className="muted small">None saved yet.</li>}
          </ul>
          <h2 className="section">History</h2>
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
