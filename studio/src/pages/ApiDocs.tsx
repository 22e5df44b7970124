import { useParams } from "react-router";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useProjectApi } from "../projectApi";
import { useAsync } from "../useAsync";

interface OpenApi {
  paths: Record<string, Record<string, { summary?: string; description?: string }>>;
}

/** The project's REST API from its own OpenAPI document: every path and method, with its summary. */
export default function ApiDocs() {
  const { ref } = useParams() as { ref: string };
  const api = useProjectApi(ref);
  const operations = useAsync(async () => {
    if (!api.data) return undefined as unknown as Row[];
    const { data } = await api.data.call<OpenApi>("/rest/v1/", {
      headers: { accept: "application/openapi+json" },
    });
    return Object.entries(data.paths).flatMap(([path, methods]) =>
      Object.entries(methods)
        .filter(([method]) => ["get", "post", "patch", "put", "delete"].includes(method))
        .map(([method, op]) => ({
          method: method.toUpperCase(),
          path: `/rest/v1${path}`,
          summary: op.summary ?? op.description ?? "",
        })),
    );
  }, [api.data]);
  return (
    <ListPage
      title="REST API"
      list={{ ...operations, error: operations.error ?? api.error }}
      columns={["method", "path", "summary"]}
      empty="The REST API serves no table yet."
    >
      {api.data && (
        <p className="muted small">
          Base URL <code>{api.data.url}/rest/v1</code>; GraphQL at <code>{api.data.url}/graphql/v1</code>.
        </p>
      )}
    </ListPage>
  );
}
