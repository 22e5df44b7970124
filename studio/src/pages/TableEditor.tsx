import { useEffect, useMemo, useState, type FormEvent } from "react";
import { useLocation, useParams, useSearchParams } from "react-router";
import { runSql } from "../api";
import {
  COLUMN_TYPES,
  createTableSql,
  exposedSchemas,
  listColumns,
  listSchemas,
  listTables,
  type ColumnInfo,
  type NewColumn,
} from "../catalog";
import { DataGrid, display, type Row, type Sort } from "../components/DataGrid";
import { Empty, ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import { TableStructure } from "../components/TableStructure";
import { useProjectApi, type ProjectApi } from "../projectApi";
import { useAsync } from "../useAsync";
import { useAction } from "../useAction";

const PAGE_SIZE = 100;
const OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "is"] as const;

interface Filter {
  column: string;
  operator: (typeof OPERATORS)[number];
  value: string;
}

/** The REST query of one page of rows: PostgREST's select, order, filter, limit and offset. */
function rowsPath(table: string, page: number, sort: Sort | undefined, filter: Filter | undefined): string {
  const params = new URLSearchParams({
    select: "*",
    limit: String(PAGE_SIZE),
    offset: String(page * PAGE_SIZE),
  });
  if (sort) params.set("order", `${sort.column}.${sort.ascending ? "asc" : "desc"}`);
  if (filter?.column && filter.value !== "") params.set(filter.column, `${filter.operator}.${filter.value}`);
  return `/rest/v1/${encodeURIComponent(table)}?${params}`;
}

/** The total of a `Content-Range: 0-99/1234` header (`*` when unknown). */
function totalOf(response: Response): number | undefined {
  const total = response.headers.get("content-range")?.split("/")[1];
  return total && total !== "*" ? Number(total) : undefined;
}

const NUMERIC = /^(smallint|integer|bigint|numeric|real|double precision)/;

/** A form field's text as the JSON value REST stores in a column of `type` (parse errors are the user's to fix). */
function valueFor(column: ColumnInfo, text: string): unknown {
  if (/^(json|jsonb)$/.test(column.type) || column.type.endsWith("[]")) return JSON.parse(text);
  if (column.type === "boolean") return text === "true";
  if (NUMERIC.test(column.type) && text.trim() !== "") return Number(text);
  return text;
}

function textOf(value: unknown): string {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** Values of a foreign key's referenced column, offered as the field's suggestions. */
function useReferencedValues(api: ProjectApi | undefined, schema: string, reference: string | null) {
  return useAsync(async () => {
    if (!api || !reference) return [] as string[];
    const m = /^(?:"?([^".]+)"?\.)?"?([^"(]+)"?\(([^)]+)\)$/.exec(reference);
    if (!m) return [];
    const [, refSchema, table, column] = m;
    const { data } = await api.call<Row[]>(
      `/rest/v1/${encodeURIComponent(table)}?select=${column}&limit=100`,
      {
        headers: { "accept-profile": refSchema ?? schema },
      },
    );
    return data.map((r) => textOf(r[column]));
  }, [api, schema, reference]);
}

function ColumnField({
  api,
  schema,
  column,
  value,
  isNull,
  onChange,
}: {
  api: ProjectApi | undefined;
  schema: string;
  column: ColumnInfo;
  value: string;
  isNull: boolean;
  onChange: (value: string, isNull: boolean) => void;
}) {
  const suggestions = useReferencedValues(api, schema, column.references);
  const listId = `ref-${column.name}`;
  let input;
  if (column.enum_values) {
    input = (
      <select
        name={column.name}
        value={value}
        onChange={(e) => onChange(e.target.value, false)}
        disabled={isNull}
      >
        <option value="" />
        {column.enum_values.map((v) => (
          <option key={v}>{v}</option>
        ))}
      </select>
    );
  } else if (column.type === "boolean") {
    input = (
      <select
        name={column.name}
        value={value}
        onChange={(e) => onChange(e.target.value, false)}
        disabled={isNull}
      >
        <option value="" />
        <option>true</option>
        <option>false</option>
      </select>
    );
  } else if (/^(json|jsonb)$/.test(column.type)) {
    input = (
      <textarea
        name={column.name}
        rows={3}
        value={value}
        onChange={(e) => onChange(e.target.value, false)}
        disabled={isNull}
      />
    );
  } else {
    input = (
      <input
        name={column.name}
        value={value}
        list={column.references ? listId : undefined}
        placeholder={column.default ? `default: ${column.default}` : column.type}
        onChange={(e) => onChange(e.target.value, false)}
        disabled={isNull}
      />
    );
  }
  return (
    <label className="field">
      <span>
        {column.name} <span className="muted small">{column.type}</span>
        {column.primary_key && <span className="badge">PK</span>}
        {column.references && <span className="badge">→ {column.references}</span>}
      </span>
      {input}
      {column.references && (
        <datalist id={listId}>
          {suggestions.data?.map((v) => (
            <option key={v} value={v} />
          ))}
        </datalist>
      )}
      {column.nullable && (
        <span className="checkbox small">
          <input type="checkbox" checked={isNull} onChange={(e) => onChange(value, e.target.checked)} /> NULL
        </span>
      )}
    </label>
  );
}

/** Insert (row undefined) or edit a row; edits address the row by its primary key. */
function RowForm({
  api,
  schema,
  table,
  columns,
  row,
  onDone,
}: {
  api: ProjectApi | undefined;
  schema: string;
  table: string;
  columns: ColumnInfo[];
  row: Row | undefined;
  onDone: () => void;
}) {
  const editable = columns.filter((c) => !c.generated);
  const [values, setValues] = useState<Record<string, { text: string; isNull: boolean; touched: boolean }>>(
    () =>
      Object.fromEntries(
        editable.map((c) => [
          c.name,
          { text: textOf(row?.[c.name]), isNull: row ? row[c.name] === null : false, touched: false },
        ]),
      ),
  );
  const { busy, error, run } = useAction();
  const keys = columns.filter((c) => c.primary_key);
  const where = row && new URLSearchParams(keys.map((k) => [k.name, `eq.${textOf(row[k.name])}`]));
  const path = `/rest/v1/${encodeURIComponent(table)}`;
  const profile = { "content-profile": schema, "accept-profile": schema, prefer: "return=representation" };

  async function save(e: FormEvent) {
    e.preventDefault();
    if (!api) return;
    await run(async () => {
      // Insert: what the user typed (blank fields take the column's default). Edit: what the user changed.
      const body = Object.fromEntries(
        editable
          .filter((c) => (row ? values[c.name].touched : values[c.name].isNull || values[c.name].text !== ""))
          .map((c) => [c.name, values[c.name].isNull ? null : valueFor(c, values[c.name].text)]),
      );
      if (row) await api.call(`${path}?${where}`, { method: "PATCH", body, headers: profile });
      else await api.call(path, { method: "POST", body, headers: profile });
      onDone();
    });
  }

  async function remove() {
    if (!api || !row || !window.confirm(`Delete this row of ${table}?`)) return;
    await run(async () => {
      await api.call(`${path}?${where}`, { method: "DELETE", headers: profile });
      onDone();
    });
  }

  return (
    <form className="panel" onSubmit={(e) => void save(e)} aria-label={row ? "Edit row" : "Insert row"}>
      <div className="panel-head">
        <h2>{row ? "Edit row" : `Insert into ${table}`}</h2>
        <button type="button" className="button ghost" onClick={onDone}>
          Close
        </button>
      </div>
      {editable.map((c) => (
        <ColumnField
          key={c.name}
          api={api}
          schema={schema}
          column={c}
          value={values[c.name].text}
          isNull={values[c.name].isNull}
          onChange={(text, isNull) => setValues((v) => ({ ...v, [c.name]: { text, isNull, touched: true } }))}
        />
      ))}
      <ErrorBox error={error} />
      <div className="form-actions">
        <button className="button primary" type="submit" disabled={busy}>
          {row ? "Save" : "Insert"}
        </button>
        {row && (
          <button type="button" className="button danger" onClick={() => void remove()} disabled={busy}>
            Delete row
          </button>
        )}
      </div>
    </form>
  );
}

const emptyColumn = (): NewColumn => ({
  name: "",
  type: "text",
  default: "",
  nullable: true,
  primary_key: false,
  references: "",
});

/**
 * One cell of the new table's column rows, bound to one field of its column: a checkbox for a yes/no field,
 * a choice among `choices` ("" is "none", shown as —), else a text box.
 */
function ColumnCell({
  column,
  field,
  label,
  choices,
  onChange,
}: {
  column: NewColumn;
  field: keyof NewColumn;
  label: string;
  choices?: readonly string[];
  onChange: (change: Partial<NewColumn>) => void;
}) {
  const value = column[field];
  const set = (v: string | boolean) => onChange({ [field]: v });
  let input;
  if (typeof value === "boolean") {
    input = (
      <input type="checkbox" aria-label={label} checked={value} onChange={(e) => set(e.target.checked)} />
    );
  } else if (choices) {
    input = (
      <select aria-label={label} value={value} onChange={(e) => set(e.target.value)}>
        {choices.map((choice) => (
          <option key={choice} value={choice}>
            {choice || "—"}
          </option>
        ))}
      </select>
    );
  } else {
    input = <input aria-label={label} value={value} onChange={(e) => set(e.target.value)} />;
  }
  return <td>{input}</td>;
}

/** Create a table: columns, primary key, foreign keys; the SQL it runs is shown as it is written. */
function NewTable({
  ref_,
  schema,
  tables,
  onCreated,
  onClose,
}: {
  ref_: string;
  schema: string;
  tables: string[];
  onCreated: (name: string) => void;
  onClose: () => void;
}) {
  const [name, setName] = useState("");
  const [columns, setColumns] = useState<NewColumn[]>([
    {
      name: "id",
      type: "bigint generated by default as identity",
      default: "",
      nullable: false,
      primary_key: true,
      references: "",
    },
    {
      name: "created_at",
      type: "timestamptz",
      default: "now()",
      nullable: false,
      primary_key: false,
      references: "",
    },
  ]);
  const { busy, error, run } = useAction();
  const sql = createTableSql(schema, name || "new_table", columns);
  const referenceable = useAsync(
    () =>
      Promise.all(
        tables.map((t) => listColumns(ref_, schema, t).then((cols) => cols.map((c) => `${t}.${c.name}`))),
      ).then((all) => all.flat()),
    [ref_, schema, tables.join(",")],
  );
  const update = (i: number, change: Partial<NewColumn>) =>
    setColumns((cs) => cs.map((c, j) => (i === j ? { ...c, ...change } : c)));

  async function create(e: FormEvent) {
    e.preventDefault();
    await run(async () => {
      await runSql(ref_, sql);
      onCreated(name);
    });
  }

  return (
    <form className="panel wide" onSubmit={(e) => void create(e)} aria-label="New table">
      <div className="panel-head">
        <h2>New table in {schema}</h2>
        <button type="button" className="button ghost" onClick={onClose}>
          Close
        </button>
      </div>
      <label className="field">
        <span>Name</span>
        <input name="table_name" value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <table className="columns-form">
        <thead>
          <tr>
            <th>Column</th>
            <th>Type</th>
            <th>Default</th>
            <th>Nullable</th>
            <th>Primary key</th>
            <th>References</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {columns.map((c, i) => (
            <tr key={i}>
              <ColumnCell column={c} field="name" label="Column name" onChange={(ch) => update(i, ch)} />
              <ColumnCell
                column={c}
                field="type"
                label="Column type"
                choices={COLUMN_TYPES}
                onChange={(ch) => update(i, ch)}
              />
              <ColumnCell column={c} field="default" label="Default" onChange={(ch) => update(i, ch)} />
              <ColumnCell column={c} field="nullable" label="Nullable" onChange={(ch) => update(i, ch)} />
              <ColumnCell
                column={c}
                field="primary_key"
                label="Primary key"
                onChange={(ch) => update(i, ch)}
              />
              <ColumnCell
                column={c}
                field="references"
                label="References"
                choices={["", ...(referenceable.data ?? [])]}
                onChange={(ch) => update(i, ch)}
              />
              <td>
                <button
                  type="button"
                  className="button ghost"
                  aria-label="Remove column"
                  onClick={() => setColumns((cs) => cs.filter((_, j) => j !== i))}
                >
                  ✕
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <button type="button" className="button" onClick={() => setColumns((cs) => [...cs, emptyColumn()])}>
        Add column
      </button>
      <h3>SQL</h3>
      <pre className="sql-preview" aria-label="SQL to run">
        {sql}
      </pre>
      <ErrorBox error={error} />
      <div className="form-actions">
        <button className="button primary" type="submit" disabled={busy || !name.trim()}>
          {busy ? "Creating…" : "Create table"}
        </button>
      </div>
    </form>
  );
}

function Rows({
  api,
  schema,
  table,
  columns,
}: {
  api: ProjectApi | undefined;
  schema: string;
  table: string;
  columns: ColumnInfo[];
}) {
  const keys = columns.filter((c) => c.primary_key).map((c) => c.name);
  const [sort, setSort] = useState<Sort | undefined>(
    keys[0] ? { column: keys[0], ascending: true } : undefined,
  );
  const [page, setPage] = useState(0);
  const [draft, setDraft] = useState<Filter>({ column: columns[0]?.name ?? "", operator: "eq", value: "" });
  const [filter, setFilter] = useState<Filter>();
  const [editing, setEditing] = useState<{ row?: Row; index?: number } | undefined>();
  const rows = useAsync(async () => {
    if (!api) return undefined;
    const { data, response } = await api.call<Row[]>(rowsPath(table, page, sort, filter), {
      headers: { "accept-profile": schema, prefer: "count=estimated" },
    });
    return { data, total: totalOf(response) };
  }, [api, schema, table, page, sort, filter]);
  const names = useMemo(() => columns.map((c) => c.name), [columns]);
  const pages =
    rows.data?.total !== undefined ? Math.max(1, Math.ceil(rows.data.total / PAGE_SIZE)) : undefined;

  return (
    <div className="rows">
      <div className="toolbar">
        <form
          className="filter"
          aria-label="Filter rows"
          onSubmit={(e) => {
            e.preventDefault();
            setPage(0);
            setFilter({ ...draft });
          }}
        >
          <select
            aria-label="Filter column"
            value={draft.column}
            onChange={(e) => setDraft({ ...draft, column: e.target.value })}
          >
            {names.map((n) => (
              <option key={n}>{n}</option>
            ))}
          </select>
          <select
            aria-label="Filter operator"
            value={draft.operator}
            onChange={(e) => setDraft({ ...draft, operator: e.target.value as Filter["operator"] })}
          >
            {OPERATORS.map((o) => (
              <option key={o}>{o}</option>
            ))}
          </select>
          <input
            aria-label="Filter value"
            value={draft.value}
            onChange={(e) => setDraft({ ...draft, value: e.target.value })}
          />
          <button className="button" type="submit">
            Filter
          </button>
          {filter && (
            <button
              className="button ghost"
              type="button"
              onClick={() => {
                setFilter(undefined);
                setDraft({ ...draft, value: "" });
              }}
            >
              Clear
            </button>
          )}
        </form>
        <button className="button primary" onClick={() => setEditing({})}>
          Insert row
        </button>
      </div>
      <ErrorBox error={rows.error} />
      <div className="rows-body">
        <DataGrid
          rows={rows.data?.data ?? []}
          columns={names}
          height="calc(100vh - 230px)"
          sort={sort}
          onSort={(s) => {
            setPage(0);
            setSort(s);
          }}
          selectedIndex={editing?.index}
          onRowClick={keys.length ? (row, index) => setEditing({ row, index }) : undefined}
          rowLabel={(row) => keys.map((k) => display(row[k])).join(",")}
        />
        {editing && (
          <RowForm
            key={editing.index ?? "new"}
            api={api}
            schema={schema}
            table={table}
            columns={columns}
            row={editing.row}
            onDone={() => {
              setEditing(undefined);
              rows.reload();
            }}
          />
        )}
      </div>
      <div className="pager">
        <button className="button ghost" disabled={page === 0} onClick={() => setPage(page - 1)}>
          ← Previous
        </button>
        <span>
          Page {page + 1}
          {pages !== undefined && ` of ${pages}`}{" "}
          {rows.data?.total !== undefined && `· ${rows.data.total} rows`}
        </span>
        <button
          className="button ghost"
          disabled={(rows.data?.data.length ?? 0) < PAGE_SIZE}
          onClick={() => setPage(page + 1)}
        >
          Next →
        </button>
        {rows.loading && <Spinner label="Loading rows" />}
        {!keys.length && <span className="muted small">No primary key: rows are read-only here.</span>}
      </div>
    </div>
  );
}

export default function TableEditor() {
  const { ref } = useParams() as { ref: string };
  const [params, setParams] = useSearchParams();
  const schema = params.get("schema") ?? "public";
  const table = params.get("table") ?? undefined;
  const view = params.get("view") === "structure" ? "structure" : "rows";
  const [creating, setCreating] = useState(false);
  const schemas = useAsync(() => listSchemas(ref), [ref]);
  const tables = useAsync(() => listTables(ref, schema), [ref, schema]);
  const exposed = useAsync(() => exposedSchemas(ref), [ref]);
  const columns = useAsync(
    () => (table ? listColumns(ref, schema, table) : Promise.resolve([])),
    [ref, schema, table],
  );
  const api = useProjectApi(ref);
  const select = (next: { schema?: string; table?: string; view?: string }) =>
    setParams(
      Object.fromEntries(Object.entries({ schema, ...next }).filter(([, v]) => v)) as Record<string, string>,
    );
  const info = tables.data?.find((t) => t.name === table);
  useEffect(() => setCreating(false), [schema, table]);
  // No table named in the link: the schema's first one opens, as the link then says. Only while the browser is
  // still on this page: the router renders a navigation as a transition, so a click to another page may already
  // have changed the address while this page is still shown, and replacing it would bring the user back here.
  const first = tables.data?.[0]?.name;
  const { pathname } = useLocation();
  useEffect(() => {
    if (!table && first && window.location.pathname === pathname)
      setParams({ schema, table: first }, { replace: true });
  }, [table, first, schema, setParams, pathname]);

  return (
    <div className="editor">
      <aside className="editor-side" aria-label="Tables">
        <label className="field">
          <span>Schema</span>
          <select
            aria-label="Schema"
            value={schema}
            onChange={(e) => select({ schema: e.target.value, table: undefined })}
          >
            {(schemas.data ?? [schema]).map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <button className="button primary full" onClick={() => setCreating(true)}>
          New table
        </button>
        <ErrorBox error={tables.error} />
        <ul className="table-list">
          {tables.data?.map((t) => (
            <li key={t.name}>
              <button
                className={`table-link${t.name === table ? " active" : ""}`}
                onClick={() => select({ table: t.name })}
              >
                <span aria-hidden="true">{t.kind === "view" ? "◫" : "▦"}</span> {t.name}
              </button>
            </li>
          ))}
        </ul>
        {tables.data && !tables.data.length && <Empty>No tables in {schema}.</Empty>}
      </aside>
      <section className="editor-main">
        {creating ? (
          <NewTable
            ref_={ref}
            schema={schema}
            tables={(tables.data ?? []).filter((t) => t.kind === "table").map((t) => t.name)}
            onClose={() => setCreating(false)}
            onCreated={(name) => {
              tables.reload();
              select({ table: name });
            }}
          />
        ) : table ? (
          <>
            <PageHeader title={`${schema}.${table}`}>
              {columns.data && <span className="muted small">{columns.data.length} columns</span>}
            </PageHeader>
            <div className="tabs view-tabs" role="tablist">
              {(["rows", "structure"] as const).map((v) => (
                <button
                  key={v}
                  role="tab"
                  aria-selected={view === v}
                  className={`tab${view === v ? " active" : ""}`}
                  onClick={() => select({ table, view: v === "rows" ? undefined : v })}
                >
                  {v === "rows" ? "Rows" : "Structure"}
                </button>
              ))}
            </div>
            <ErrorBox error={columns.error ?? api.error} />
            {exposed.data && !exposed.data.includes(schema) && (
              <div className="notice">
                The REST API does not serve the schema {schema}: add it to the exposed schemas in API settings
                to browse its rows.
              </div>
            )}
            {view === "structure" && columns.data && (
              <TableStructure
                key={`${schema}.${table}`}
                projectRef={ref}
                schema={schema}
                table={table}
                columns={columns.data}
                rls={Boolean(info?.rls)}
                onChanged={() => {
                  columns.reload();
                  tables.reload();
                }}
              />
            )}
            {view === "rows" && columns.data && api.data && (
              <Rows
                key={`${schema}.${table}`}
                api={api.data}
                schema={schema}
                table={table}
                columns={columns.data}
              />
            )}
          </>
        ) : (
          <Empty>Pick a table on the left, or create one.</Empty>
        )}
      </section>
    </div>
  );
}
