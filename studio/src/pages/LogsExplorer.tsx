import { useMemo, useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { RequestsChart, TimeChart } from "../components/RequestsChart";
import { queryLogs, RANGES } from "../logs";
import { useAsync } from "../useAsync";

/** The log sources of the Management API's log query endpoint. */
const SOURCES = ["edge_logs", "function_logs", "function_edge_logs", "auth_logs", "postgres_logs"];
const sqlFor = (source: string) =>
  `select id, timestamp, event_message, metadata from ${source} order by timestamp desc limit 500`;
const DEFAULT_SQL = sqlFor("edge_logs");

const SERVICES = ["rest", "auth", "storage", "realtime"];

/** The project's requests per service over the last day (`usage.api-counts`), one bar series each. */
function Usage({ projectRef }: { projectRef: string }) {
  const usage = useAsync(
    () =>
      mgmt
        .get<{ result: Row[] }>(
          `/v1/projects/${projectRef}/analytics/endpoints/usage.api-counts?interval=1day`,
        )
        .then((r) => ({
          xs: r.result.map((row) => Date.parse(String(row.timestamp)) / 1000),
          series: SERVICES.map((service) => ({
            label: service,
            values: r.result.map((row) => Number(row[`total_${service}_requests`] ?? 0)),
          })),
        })),
    [projectRef],
  );
  if (!usage.data) return null;
  return (
    <section className="section" aria-label="Usage">
      <h2>Requests per service, last day</h2>
      <TimeChart xs={usage.data.xs} series={usage.data.series} label="Requests per service" />
    </section>
  );
}

/** The project's logs through the Management API's log query endpoint: a range, a query, a chart. */
export default function LogsExplorer() {
  const { ref } = useParams() as { ref: string };
  const [minutes, setMinutes] = useState(60);
  const [draft, setDraft] = useState(DEFAULT_SQL);
  const [query, setQuery] = useState({ sql: DEFAULT_SQL, minutes: 60, at: Date.now() });
  const logs = useAsync(() => queryLogs(ref, query.sql, query.minutes, query.at), [ref, query]);
  const times = useMemo(
    () => (logs.data ?? []).filter((r) => r.timestamp).map((r) => Date.parse(String(r.timestamp))),
    [logs.data],
  );
  const columns = logs.data?.length ? Object.keys(logs.data[0]) : ["timestamp", "event_message"];

  function run(e?: FormEvent) {
    e?.preventDefault();
    setQuery({ sql: draft, minutes, at: Date.now() });
  }

  return (
    <ListPage
      title="Logs explorer"
      list={logs}
      columns={columns}
      empty="No log events in this range."
      actions={
        <>
          <select
            aria-label="Log source"
            defaultValue="edge_logs"
            onChange={(e) => {
              setDraft(sqlFor(e.target.value));
              setQuery({ sql: sqlFor(e.target.value), minutes, at: Date.now() });
            }}
          >
            {SOURCES.map((source) => (
              <option key={source}>{source}</option>
            ))}
          </select>
          <select
            aria-label="Time range"
            value={minutes}
            onChange={(e) => setMinutes(Number(e.target.value))}
          >
            {RANGES.map(([label, value]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </>
      }
    >
      <form className="form-row" onSubmit={run} aria-label="Log query">
        <textarea
          aria-label="Log query SQL"
          rows={2}
          style={{ flex: 1 }}
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => (e.key === "Enter" && (e.ctrlKey || e.metaKey) ? run() : undefined)}
        />
        <button className="button primary" type="submit">
          Run
        </button>
      </form>
      <RequestsChart times={times} start={query.at - query.minutes * 60_000} end={query.at} />
      <Usage projectRef={ref} />
    </ListPage>
  );
}
