import { useParams } from "react-router";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

export default function Functions() {
  const { ref } = useParams() as { ref: string };
  const functions = useAsync(() => mgmt.get<Row[]>(`/v1/projects/${ref}/functions`), [ref]);
  return (
    <ListPage
      title="Edge functions"
      list={functions}
      columns={["slug", "name", "status", "version", "verify_jwt", "updated_at"]}
      empty="No functions deployed yet: deploy one with the platform's CLI or the Management API."
    />
  );
}
