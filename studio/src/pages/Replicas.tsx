import { useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ErrorBox } from "../components/Feedback";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

/**
 * The project's read replicas (`GET /v1/projects/{ref}/read-replicas`, with their lag): set one up in a region,
 * remove one. Setting up needs the embedded cluster and an installation administrator: the API says so when not.
 */
export default function Replicas() {
  const { ref } = useParams() as { ref: string };
  const replicas = useAsync(() => mgmt.get<Row[]>(`/v1/projects/${ref}/read-replicas`), [ref]);
  const [region, setRegion] = useState("local");
  const [selected, setSelected] = useState<Row>();
  const [error, setError] = useState<Error>();
  async function act(work: () => Promise<unknown>) {
    setError(undefined);
    try {
      await work();
      setSelected(undefined);
      replicas.reload();
    } catch (e) {
      setError(e as Error);
    }
  }
  function setUp(e: FormEvent) {
    e.preventDefault();
    void act(() => mgmt.post(`/v1/projects/${ref}/read-replicas/setup`, { read_replica_region: region }));
  }
  return (
    <ListPage
      title="Read replicas"
      list={replicas}
      columns={["identifier", "status", "region", "db_host", "db_port", "lag_bytes", "lag_seconds", "error"]}
      empty="No read replicas: the primary serves every read."
      onRowClick={(row) => setSelected(row)}
    >
      <form className="card form-row" aria-label="New read replica" onSubmit={setUp}>
        <label className="field">
          <span>Region</span>
          <input value={region} onChange={(e) => setRegion(e.target.value)} required />
        </label>
        <button className="button primary" type="submit">
          Set up a read replica
        </button>
        {selected && (
          <button
            className="button danger"
            type="button"
            onClick={() =>
              window.confirm(`Remove read replica ${String(selected.identifier)}?`) &&
              void act(() =>
                mgmt.post(`/v1/projects/${ref}/read-replicas/remove`, {
                  database_identifier: selected.identifier,
                }),
              )
            }
          >
            Remove {String(selected.identifier)}
          </button>
        )}
        <ErrorBox error={error} />
      </form>
    </ListPage>
  );
}
