import { useEffect, useState } from "react";
import { useParams } from "react-router";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ErrorBox } from "../components/Feedback";
import { ListPage } from "../components/ListPage";
import { useAsync } from "../useAsync";

/** The project's backups; a backup taken here shows its progress until it completes. */
export default function Backups() {
  const { ref } = useParams() as { ref: string };
  const [error, setError] = useState<Error>();
  const [busy, setBusy] = useState(false);
  const backups = useAsync(
    () => mgmt.get<{ backups: Row[] }>(`/v1/projects/${ref}/database/backups`).then((b) => b.backups),
    [ref],
  );
  const running = backups.data?.some((b) => b.status === "RUNNING");
  // While one runs, the list is read again each second: its progress shows until it completes.
  useEffect(() => {
    if (!running) return;
    const timer = setTimeout(backups.reload, 1000);
    return () => clearTimeout(timer);
  }, [running, backups.data, backups.reload]);

  async function take() {
    setBusy(true);
    setError(undefined);
    try {
      await mgmt.post(`/v1/projects/${ref}/database/backups`, {});
      backups.reload();
    } catch (e) {
      setError(e as Error);
    } finally {
      setBusy(false);
    }
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
    </ListPage>
  );
}
