import { useState } from "react";
import { useParams } from "react-router";
import { ident, runSql } from "../api";
import type { Row } from "../components/DataGrid";
import { ErrorBox } from "../components/Feedback";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

/** The extensions the project's cluster offers; a click installs one (in schema extensions) or removes it. */
export default function Extensions() {
  const { ref } = useParams() as { ref: string };
  const [error, setError] = useState<Error>();
  const [search, setSearch] = useState("");
  const extensions = useAsync(
    () =>
      runSql<Row>(
        ref,
        `select name, default_version, installed_version, comment from pg_available_extensions order by name`,
      ),
    [ref],
  );
  const needle = search.trim().toLowerCase();
  const shown = needle ? extensions.data?.filter((e) => String(e.name).includes(needle)) : extensions.data;

  async function toggle(row: Row) {
    const name = String(row.name);
    const sql = row.installed_version
      ? `drop extension ${ident(name)};`
      : `create extension ${ident(name)} with schema extensions;`;
    if (!window.confirm(`Run:\n\n${sql}`)) return;
    setError(undefined);
    try {
      await runSql(ref, sql);
      extensions.reload();
    } catch (e) {
      setError(e as Error);
    }
  }

  return (
    <ListPage
      title="Extensions"
      list={{ ...extensions, data: shown }}
      columns={["name", "installed_version", "default_version", "comment"]}
      empty="No extension matches."
      onRowClick={(row) => void toggle(row)}
      actions={
        <input
          type="search"
          aria-label="Search extensions"
          placeholder="Search"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
        />
      }
    >
      <p className="muted small">
        A click installs an extension (schema extensions) or removes an installed one, after showing its SQL.
      </p>
      <ErrorBox error={error} />
    </ListPage>
  );
}
