import { useParams } from "react-router";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

/** The project's JWT signing keys (their public parts only, as the Management API lists them). */
export default function SigningKeys() {
  const { ref } = useParams() as { ref: string };
  const keys = useAsync(
    () => mgmt.get<{ keys: Row[] }>(`/v1/projects/${ref}/config/auth/signing-keys`).then((r) => r.keys),
    [ref],
  );
  return (
    <ListPage
      title="JWT signing keys"
      list={keys}
      columns={["id", "algorithm", "status", "created_at", "updated_at"]}
      empty="No asymmetric signing keys: tokens are signed with the legacy JWT secret."
    />
  );
}
