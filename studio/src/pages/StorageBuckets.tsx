import { useParams } from "react-router";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useProjectApi } from "../projectApi";
import { useAsync } from "../useAsync";

/** The project's storage buckets, through its storage API (the project's own key). */
export default function StorageBuckets() {
  const { ref } = useParams() as { ref: string };
  const api = useProjectApi(ref);
  const buckets = useAsync(
    async () =>
      api.data ? (await api.data.call<Row[]>("/storage/v1/bucket")).data : (undefined as unknown as Row[]),
    [api.data],
  );
  return (
    <ListPage
      title="Storage buckets"
      list={{ ...buckets, error: buckets.error ?? api.error }}
      columns={["name", "public", "file_size_limit", "allowed_mime_types", "created_at"]}
      empty="No buckets yet."
    />
  );
}
