import { useParams } from "react-router";
import { runSql } from "../api";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

/** The database's roles as the project's owner sees them in the catalog. */
export default function Roles() {
  const { ref } = useParams() as { ref: string };
  const roles = useAsync(
    () =>
      runSql<Row>(
        ref,
        `select rolname as name, rolcanlogin as can_login, rolcreaterole as create_role, rolbypassrls as bypass_rls,
                rolconnlimit as connection_limit
           from pg_roles where rolname !~ '^pg_' order by rolname`,
      ),
    [ref],
  );
  return (
    <ListPage
      title="Database roles"
      list={roles}
      columns={["name", "can_login", "create_role", "bypass_rls", "connection_limit"]}
      empty="No roles."
    />
  );
}
