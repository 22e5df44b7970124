import { useEffect, useState } from "react";
import { queryLogs, RANGES } from "../logs";
import { useAsync } from "../useAsync";
import { DataGrid } from "./DataGrid";
import { Empty, ErrorBox, Spinner } from "./Feedback";

/** How often the open tab asks for new lines. */
const REFRESH_MS = 5000;
const LIMIT = 200;

/** The function's rows of log source `function_logs` (invocations and printed lines), newest first. */
const sqlFor = (slug: string) =>
  `select timestamp, metadata->>'kind' as kind, metadata->>'level' as level,
          (metadata->>'status')::int as status, (metadata->>'duration_ms')::int as duration_ms, event_message
     from function_logs
    where metadata->>'slug' = '${slug.replaceAll("'", "''")}'
    order by timestamp desc limit ${LIMIT}`;

/** A function's logs tab: its invocations and printed lines in a time range, refreshed while the tab is open. */
export function FunctionLogs({ projectRef: ref, slug }: { projectRef: string; slug: string }) {
  const [minutes, setMinutes] = useState(60);
  const logs = useAsync(() => queryLogs(ref, sqlFor(slug), minutes, Date.now()), [ref, slug, minutes]);
  const { reload } = logs;
  useEffect(() => {
    const timer = setTimeout(reload, REFRESH_MS);
    return () => clearTimeout(timer);
    // Each answer arms the next refresh.
  }, [logs.data, logs.error]);

  return (
    <section className="section" aria-label="Function logs">
      <div className="form-row">
        <select aria-label="Time range" value={minutes} onChange={(e) => setMinutes(Number(e.target.value))}>
          {RANGES.map(([label, value]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
        <button className="button" onClick={reload}>
          Refresh
        </button>
      </div>
      <ErrorBox error={logs.error} />
      {logs.loading && !logs.data && <Spinner />}
      {logs.data &&
        (logs.data.length ? (
          <DataGrid
            rows={logs.data}
            columns={["timestamp", "kind", "level", "status", "duration_ms", "event_message"]}
            height="calc(100vh - 260px)"
          />
        ) : (
          <Empty>No invocations or log lines of this function in this range.</Empty>
        ))}
    </section>
  );
}
