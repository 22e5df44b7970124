import { useParams } from "react-router";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

export default function Backups() {
  const { ref } = useParams() as { ref: string };
  const backups = useAsync(
    () => mgmt.get<{ backups: Row[] }>(`/v1/projects/${ref}/database/backups`).then((b) => b.backups),
    [ref],
  );
  return (
    <ListPage
      title="Scheduled backups"
      list={backups}
      columns={["id", "status", "is_physical_backup", "inserted_at"]}
      empty="No backups yet: the daily backup runs on its schedule."
    />
  );
}
