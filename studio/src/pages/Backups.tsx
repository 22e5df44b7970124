import { useEffect, useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { mgmt } from "../api";
import { DataGrid, type Row } from "../components/DataGrid";
import { ErrorBox } from "../components/Feedback";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";
import { useAction } from "../useAction";

/** Restores the database as it was at a time (point in time), after confirmation; the restores list shows progress. */
function Restore({ projectRef, onStarted }: { projectRef: string; onStarted: () => void }) {
  const [at, setAt] = useState("");
  const [error, setError] = useState<Error>();
  async function submit(e: FormEvent) {
    e.preventDefault();
    const target = new Date(at);
    if (!window.confirm(`Restore the database as it was at ${target.toISOString()}? Later changes are lost.`))
      return;
    setError(undefined);
    try {
      await mgmt.post(`/v1/projects/${projectRef}/database/backups/restore-pitr`, {
        recovery_time_target_unix: Math.floor(target.getTime() / 1000),
      });
      onStarted();
    } catch (err) {
      setError(err as Error);
    }
  }
  return (
    <form className="card form-row" aria-label="Restore" onSubmit={(e) => void submit(e)}>
      <label className="field">
        <span>Restore to (your local time)</span>
        <input type="datetime-local" step={1} value={at} onChange={(e) => setAt(e.target.value)} required />
      </label>
      <button className="button danger" type="submit">
        Restore
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

/** The project's backups; a backup taken here shows its progress until it completes. */
export default function Backups() {
  const { ref } = useParams() as { ref: string };
  const { busy, error, run } = useAction();
  const backups = useAsync(
    () => mgmt.get<{ backups: Row[] }>(`/v1/projects/${ref}/database/backups`).then((b) => b.backups),
    [ref],
  );
  const restores = useAsync(() => mgmt.get<Row[]>(`/v1/projects/${ref}/database/backups/restores`), [ref]);
  const running =
    backups.data?.some((b) => b.status === "RUNNING") || restores.data?.some((r) => r.status === "RUNNING");
  // While one runs, the list is read again each second: its progress shows until it completes.
  useEffect(() => {
    if (!running) return;
    const timer = setTimeout(() => {
      backups.reload();
      restores.reload();
    }, 1000);
    return () => clearTimeout(timer);
  }, [running, backups, restores]);

  async function take() {
    await run(async () => {
      await mgmt.post(`/v1/projects/${ref}/database/backups`, {});
      backups.reload();
    });
  }

  return (
    <ListPage
      title="Scheduled backups"
      list={backups}
      columns={["id", "kind", "status", "progress", "size_bytes", "inserted_at", "completed_at", "error"]}
      empty="No backups yet: the daily backup runs on its schedule."
      actions={
        <button className="button primary" onClick={() => void take()} disabled={busy || running}>
          {running ? "Backing up…" : "Take a backup now"}
        </button>
      }
    >
      <ErrorBox error={error} />
      <Restore projectRef={ref} onStarted={restores.reload} />
      {restores.data && restores.data.length > 0 && (
        <section className="section" aria-label="Restores">
          <h2>Restores</h2>
          <DataGrid
            rows={restores.data}
            columns={[
              "id",
              "status",
              "progress",
              "method",
              "recovery_time_target",
              "started_at",
              "finished_at",
              "error",
            ]}
            height={160}
          />
        </section>
      )}
    </ListPage>
  );
}
