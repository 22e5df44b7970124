import { useParams } from "react-router";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

export default function Migrations() {
  const { ref } = useParams() as { ref: string };
  const migrations = useAsync(() => mgmt.get<Row[]>(`/v1/projects/${ref}/database/migrations`), [ref]);
  return (
    <ListPage
      title="Migrations"
      list={migrations}
      columns={["version", "name"]}
      empty="No migrations applied through the Management API or the CLI yet."
    />
  );
}
