import { useState } from "react";
import { useParams } from "react-router";
import { mgmt } from "../api";
import { ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import { projectUrl } from "../projectApi";
import { useSession } from "../session";
import type { ApiKey } from "../types";
import { useAsync } from "../useAsync";

/** A key shown masked as the API lists it; its full value fetched only when asked for. */
function KeyRow({ ref_, apiKey }: { ref_: string; apiKey: ApiKey }) {
  const [revealed, setRevealed] = useState<string>();
  const [error, setError] = useState<Error>();
  const masked = apiKey.api_key.includes("·");
  async function reveal() {
    try {
      const keys = await mgmt.get<ApiKey[]>(`/v1/projects/${ref_}/api-keys?reveal=true`);
      setRevealed(keys.find((k) => k.id === apiKey.id)?.api_key);
    } catch (e) {
      setError(e as Error);
    }
  }
  return (
    <div className="key-row">
      <div>
        <div>{apiKey.name}</div>
        <div className="muted small">{apiKey.type}</div>
      </div>
      <div className="key-value" aria-label={`${apiKey.name} key`}>
        {revealed ?? apiKey.api_key}
      </div>
      {masked && !revealed ? (
        <button className="button" onClick={() => void reveal()}>
          Reveal
        </button>
      ) : (
        <button
          className="button ghost"
          onClick={() => void navigator.clipboard?.writeText(revealed ?? apiKey.api_key)}
        >
          Copy
        </button>
      )}
      <ErrorBox error={error} />
    </div>
  );
}

export default function SettingsApi() {
  const { ref } = useParams() as { ref: string };
  const { session } = useSession();
  const keys = useAsync(() => mgmt.get<ApiKey[]>(`/v1/projects/${ref}/api-keys`), [ref]);
  const url = projectUrl(ref, session.project_domain);
  return (
    <div className="page">
      <PageHeader title="API settings" />
      <section className="card section">
        <h2>Project URL</h2>
        <div className="keys">
          <div className="key-row">
            <div>REST</div>
            <div className="key-value">{url}/rest/v1</div>
          </div>
          <div className="key-row">
            <div>GraphQL</div>
            <div className="key-value">{url}/graphql/v1</div>
          </div>
        </div>
      </section>
      <section className="card section">
        <h2>API keys</h2>
        <ErrorBox error={keys.error} />
        {keys.loading && <Spinner />}
        <div className="keys">
          {keys.data?.map((k) => (
            <KeyRow key={k.id} ref_={ref} apiKey={k} />
          ))}
        </div>
      </section>
    </div>
  );
}
