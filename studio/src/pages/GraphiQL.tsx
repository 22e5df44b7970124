import "graphiql/setup-workers/vite";
import "graphiql/style.css";
import { GraphiQL, type GraphiQLProps } from "graphiql";
import { useMemo } from "react";
import { useParams } from "react-router";
import { ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import { useProjectApi, type ProjectApi } from "../projectApi";

const FIRST_QUERY = `# The project's GraphQL API (/graphql/v1), as the service role: row level security does not apply.
# Ctrl-Enter runs the query; the docs on the left list every type.
{
  __schema {
    queryType {
      name
    }
  }
}
`;

/**
 * GraphQL requests to the project's /graphql/v1 with its key. The key goes in the request only, never in
 * GraphiQL's headers editor (which the browser keeps); headers written there are added to it.
 */
function fetcherOf(api: ProjectApi): GraphiQLProps["fetcher"] {
  return async (params, opts) => {
    const { data } = await api.call<unknown>("/graphql/v1", {
      method: "POST",
      body: params,
      headers: {
        ...(opts?.headers as Record<string, string> | undefined),
        ...(api.key.startsWith("ey") ? { authorization: `Bearer ${api.key}` } : {}),
      },
    });
    return data as Awaited<ReturnType<GraphiQLProps["fetcher"]>>;
  };
}

/** GraphiQL on the project's GraphQL API: its schema in the docs explorer, completion, history. */
export default function GraphiQLPage() {
  const { ref } = useParams() as { ref: string };
  const api = useProjectApi(ref);
  const fetcher = useMemo(() => api.data && fetcherOf(api.data), [api.data]);
  return (
    <div className="page graphiql-page">
      <PageHeader title="GraphiQL">
        {api.data && <code className="muted small">{api.data.url}/graphql/v1</code>}
      </PageHeader>
      <ErrorBox error={api.error} />
      {api.loading && <Spinner />}
      {fetcher && (
        <div className="graphiql-frame">
          <GraphiQL fetcher={fetcher} defaultQuery={FIRST_QUERY} />
        </div>
      )}
    </div>
  );
}
