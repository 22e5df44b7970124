import { useState, type FormEvent } from "react";
import { ident, literal, runSql } from "../api";
import { COLUMN_TYPES, type ColumnInfo } from "../catalog";
import { useAsync } from "../useAsync";
import { ErrorBox } from "./Feedback";
import { useAction } from "../useAction";

interface Policy {
  policyname: string;
  cmd: string;
  roles: string[];
  qual: string | null;
  with_check: string | null;
}

const COMMANDS = ["ALL", "SELECT", "INSERT", "UPDATE", "DELETE"];

/** `to` roles: names quoted, except the PUBLIC pseudo-role (quoted it would name a role called "public"). */
function rolesSql(roles: string): string {
  const names = roles
    .split(",")
    .map((r) => r.trim())
    .filter(Boolean);
  return names.length
    ? names.map((r) => (r.toLowerCase() === "public" ? "public" : ident(r))).join(", ")
    : "public";
}

/**
 * A table's definition: columns (add, rename, change type, drop), row level security (on, off) and its policies (create, drop).
 * Every change is shown as the SQL it runs, and runs only when confirmed, through the Management API.
 */
export function TableStructure({
  projectRef,
  schema,
  table,
  columns,
  rls,
  onChanged,
}: {
  projectRef: string;
  schema: string;
  table: string;
  columns: ColumnInfo[];
  rls: boolean;
  onChanged: () => void;
}) {
  const target = `${ident(schema)}.${ident(table)}`;
  const [pending, setPending] = useState<string>();
  const { busy, error, run } = useAction();
  const policies = useAsync(
    () =>
      runSql<Policy>(
        projectRef,
        `select policyname, cmd, roles, qual, with_check from pg_policies
          where schemaname = ${literal(schema)} and tablename = ${literal(table)} order by policyname`,
      ),
    [projectRef, schema, table],
  );
  const [column, setColumn] = useState({ name: "", type: "text", default: "", nullable: true });
  const [change, setChange] = useState({ column: "", name: "", type: "" });
  const [policy, setPolicy] = useState({
    name: "",
    command: "SELECT",
    roles: "authenticated",
    using: "true",
    check: "",
  });

  async function runPending() {
    if (!pending) return;
    await run(async () => {
      await runSql(projectRef, pending);
      setPending(undefined);
      setChange({ column: "", name: "", type: "" });
      policies.reload();
      onChanged();
    });
  }

  function addColumn(e: FormEvent) {
    e.preventDefault();
    const parts = [`alter table ${target} add column ${ident(column.name.trim())} ${column.type}`];
    if (column.default.trim()) parts.push(`default ${column.default.trim()}`);
    if (!column.nullable) parts.push("not null");
    setPending(`${parts.join(" ")};`);
  }

  /** A rename, then a type change with the cast from the old type (`using`), as one change to run. */
  function changeColumn(e: FormEvent) {
    e.preventDefault();
    const from = change.column || columns[0]?.name;
    if (!from) return;
    const to = change.name.trim() || from;
    const statements: string[] = [];
    if (to !== from) statements.push(`alter table ${target} rename column ${ident(from)} to ${ident(to)};`);
    if (change.type)
      statements.push(
        `alter table ${target} alter column ${ident(to)} type ${change.type} using ${ident(to)}::${change.type};`,
      );
    if (statements.length) setPending(statements.join("\n"));
  }

  function createPolicy(e: FormEvent) {
    e.preventDefault();
    const lines = [
      `create policy ${ident(policy.name.trim())} on ${target}`,
      `  for ${policy.command.toLowerCase()}`,
    ];
    lines.push(`  to ${rolesSql(policy.roles)}`);
    if (policy.using.trim() && policy.command !== "INSERT") lines.push(`  using (${policy.using.trim()})`);
    if (policy.check.trim() && policy.command !== "SELECT" && policy.command !== "DELETE")
      lines.push(`  with check (${policy.check.trim()})`);
    setPending(`${lines.join("\n")};`);
  }

  return (
    <div className="structure">
      {pending && (
        <div className="card pending" aria-label="Change to run">
          <h3>SQL to run</h3>
          <pre className="sql-preview">{pending}</pre>
          <ErrorBox error={error} />
          <div className="form-actions">
            <button className="button primary" onClick={() => void runPending()} disabled={busy}>
              {busy ? "Running…" : "Run"}
            </button>
            <button className="button ghost" onClick={() => setPending(undefined)}>
              Cancel
            </button>
          </div>
        </div>
      )}
      <section className="card section">
        <h2>Columns</h2>
        <table className="columns-form" aria-label="Columns">
          <thead>
            <tr>
              <th>Name</th>
              <th>Type</th>
              <th>Default</th>
              <th>Nullable</th>
              <th>Key</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {columns.map((c) => (
              <tr key={c.name}>
                <td className="mono">{c.name}</td>
                <td className="mono">{c.type}</td>
                <td className="mono">{c.default ?? (c.identity ? "identity" : "")}</td>
                <td>{c.nullable ? "yes" : "no"}</td>
                <td>
                  {c.primary_key && <span className="badge">PK</span>}
                  {c.references && <span className="badge">→ {c.references}</span>}
                </td>
                <td>
                  <button
                    className="button ghost"
                    aria-label={`Drop column ${c.name}`}
                    onClick={() => setPending(`alter table ${target} drop column ${ident(c.name)};`)}
                  >
                    Drop
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <form className="form-row" aria-label="Add column" onSubmit={addColumn}>
          <label className="field">
            <span>Column</span>
            <input
              value={column.name}
              onChange={(e) => setColumn({ ...column, name: e.target.value })}
              required
            />
          </label>
          <label className="field">
            <span>Type</span>
            <select value={column.type} onChange={(e) => setColumn({ ...column, type: e.target.value })}>
              {COLUMN_TYPES.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </label>
          <label className="field">
            <span>Default</span>
            <input
              value={column.default}
              onChange={(e) => setColumn({ ...column, default: e.target.value })}
            />
          </label>
          <span className="checkbox">
            <input
              type="checkbox"
              checked={column.nullable}
              onChange={(e) => setColumn({ ...column, nullable: e.target.checked })}
            />{" "}
            Nullable
          </span>
          <button className="button" type="submit">
            Add column
          </button>
        </form>
        <form className="form-row" aria-label="Change column" onSubmit={changeColumn}>
          <label className="field">
            <span>Column</span>
            <select
              value={change.column || columns[0]?.name}
              onChange={(e) => setChange({ ...change, column: e.target.value })}
            >
              {columns.map((c) => (
                <option key={c.name}>{c.name}</option>
              ))}
            </select>
          </label>
          <label className="field">
            <span>New name</span>
            <input value={change.name} onChange={(e) => setChange({ ...change, name: e.target.value })} />
          </label>
          <label className="field">
            <span>New type</span>
            <select value={change.type} onChange={(e) => setChange({ ...change, type: e.target.value })}>
              <option value="">(unchanged)</option>
              {COLUMN_TYPES.filter((t) => !t.includes(" generated ")).map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </label>
          <button className="button" type="submit">
            Change column
          </button>
        </form>
      </section>
      <section className="card section">
        <div className="panel-head">
          <h2>Row level security: {rls ? "enabled" : "disabled"}</h2>
          <button
            className="button"
            onClick={() =>
              setPending(`alter table ${target} ${rls ? "disable" : "enable"} row level security;`)
            }
          >
            {rls ? "Disable RLS" : "Enable RLS"}
          </button>
        </div>
        <ErrorBox error={policies.error} />
        <table className="columns-form" aria-label="Policies">
          <thead>
            <tr>
              <th>Policy</th>
              <th>Command</th>
              <th>Roles</th>
              <th>Using</th>
              <th>With check</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {policies.data?.map((p) => (
              <tr key={p.policyname}>
                <td>{p.policyname}</td>
                <td>{p.cmd}</td>
                <td className="mono">{Array.isArray(p.roles) ? p.roles.join(", ") : String(p.roles)}</td>
                <td className="mono">{p.qual}</td>
                <td className="mono">{p.with_check}</td>
                <td>
                  <button
                    className="button ghost"
                    aria-label={`Drop policy ${p.policyname}`}
                    onClick={() => setPending(`drop policy ${ident(p.policyname)} on ${target};`)}
                  >
                    Drop
                  </button>
                </td>
              </tr>
            ))}
            {policies.data?.length === 0 && (
              <tr>
                <td colSpan={6} className="muted">
                  No policies
                  {rls ? ": with RLS on, only the table's owner and service_role reach its rows." : "."}
                </td>
              </tr>
            )}
          </tbody>
        </table>
        <form className="form-row" aria-label="New policy" onSubmit={createPolicy}>
          <label className="field">
            <span>Policy name</span>
            <input
              value={policy.name}
              onChange={(e) => setPolicy({ ...policy, name: e.target.value })}
              required
            />
          </label>
          <label className="field">
            <span>Command</span>
            <select
              value={policy.command}
              onChange={(e) => setPolicy({ ...policy, command: e.target.value })}
            >
              {COMMANDS.map((c) => (
                <option key={c}>{c}</option>
              ))}
            </select>
          </label>
          <label className="field">
            <span>Roles</span>
            <input value={policy.roles} onChange={(e) => setPolicy({ ...policy, roles: e.target.value })} />
          </label>
          <label className="field">
            <span>Using</span>
            <input
              className="mono"
              value={policy.using}
              onChange={(e) => setPolicy({ ...policy, using: e.target.value })}
            />
          </label>
          <label className="field">
            <span>With check</span>
            <input
              className="mono"
              value={policy.check}
              onChange={(e) => setPolicy({ ...policy, check: e.target.value })}
            />
          </label>
          <button className="button" type="submit">
            Create policy
          </button>
        </form>
      </section>
    </div>
  );
}
