import { useParams } from "react-router";
import { mgmt } from "../api";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

/** The project's auth configuration as the Management API answers it: providers and settings, one per row. */
export default function AuthSettings() {
  const { ref } = useParams() as { ref: string };
  const config = useAsync(
    () =>
      mgmt.get<Record<string, unknown>>(`/v1/projects/${ref}/config/auth`).then((c) =>
        Object.entries(c)
          .filter(([, value]) => value !== null && value !== "")
          .map(([setting, value]) => ({ setting, value })),
      ),
    [ref],
  );
  return (
    <ListPage
      title="Auth providers and settings"
      list={config}
      columns={["setting", "value"]}
      empty="No auth settings."
    />
  );
}
