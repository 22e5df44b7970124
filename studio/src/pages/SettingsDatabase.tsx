import { useState, type FormEvent, type ReactNode } from "react";
import { useParams } from "react-router";
import { mgmt } from "../api";
import { ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import { useAsync } from "../useAsync";
import { useAction } from "../useAction";

/**
 * The project's database settings through the Management API: SSL enforcement, network restrictions (the
 * addresses allowed to connect directly) and Postgres settings. Each form shows the API's answer or refusal.
 */

/** A form that sends one change and shows the API's refusal in its own words. */
function SettingForm({
  label,
  send,
  children,
  submit,
}: {
  label: string;
  send: () => Promise<unknown>;
  children: ReactNode;
  submit: string;
}) {
  const { busy, error, run } = useAction();
  const [saved, setSaved] = useState(false);
  async function onSubmit(e: FormEvent) {
    e.preventDefault();
    setSaved(false);
    await run(async () => {
      await send();
      setSaved(true);
    });
  }
  return (
    <form className="form-row" aria-label={label} onSubmit={(e) => void onSubmit(e)}>
      {children}
      <button className="button primary" type="submit" disabled={busy}>
        {busy ? "Saving…" : submit}
      </button>
      {saved && (
        <span className="muted small" role="note">
          Saved
        </span>
      )}
      <ErrorBox error={error} />
    </form>
  );
}

interface Ssl {
  currentConfig: { database: boolean };
  appliedSuccessfully: boolean;
}

function SslEnforcement({ projectRef }: { projectRef: string }) {
  const path = `/v1/projects/${projectRef}/ssl-enforcement`;
  const ssl = useAsync(() => mgmt.get<Ssl>(path), [path]);
  const [enforced, setEnforced] = useState<boolean>();
  const value = enforced ?? ssl.data?.currentConfig.database ?? false;
  return (
    <section className="card section">
      <h2>SSL enforcement</h2>
      <ErrorBox error={ssl.error} />
      {ssl.data && (
        <SettingForm
          label="SSL enforcement"
          submit="Save"
          send={async () => {
            await mgmt.put(path, { requestedConfig: { database: value } });
            ssl.reload();
          }}
        >
          <span className="checkbox">
            <input
              type="checkbox"
              aria-label="Enforce SSL"
              checked={value}
              onChange={(e) => setEnforced(e.target.checked)}
            />{" "}
            Refuse direct connections without TLS (other than from this machine)
          </span>
          <span className="muted small">
            {ssl.data.appliedSuccessfully
              ? "Applied to the database"
              : "Stored; applies where Strata runs the cluster"}
          </span>
        </SettingForm>
      )}
    </section>
  );
}

interface Restrictions {
  config: { dbAllowedCidrs: string[]; dbAllowedCidrsV6: string[] };
  status: "applied" | "stored";
}

const linesOf = (text: string) =>
  text
    .split(/[\n,]/)
    .map((l) => l.trim())
    .filter(Boolean);

function NetworkRestrictions({ projectRef }: { projectRef: string }) {
  const path = `/v1/projects/${projectRef}/network-restrictions`;
  const current = useAsync(() => mgmt.get<Restrictions>(path), [path]);
  const [v4, setV4] = useState<string>();
  const [v6, setV6] = useState<string>();
  return (
    <section className="card section">
      <h2>Network restrictions</h2>
      <p className="muted small">
        The addresses (CIDR) allowed to connect to the database directly; the APIs are not restricted.
      </p>
      <ErrorBox error={current.error} />
      {current.data && (
        <SettingForm
          label="Network restrictions"
          submit="Apply"
          send={async () => {
            await mgmt.post(`${path}/apply`, {
              dbAllowedCidrs: linesOf(v4 ?? current.data!.config.dbAllowedCidrs.join("\n")),
              dbAllowedCidrsV6: linesOf(v6 ?? current.data!.config.dbAllowedCidrsV6.join("\n")),
            });
            current.reload();
          }}
        >
          <label className="field">
            <span>IPv4 CIDRs, one a line</span>
            <textarea
              rows={3}
              className="mono"
              value={v4 ?? current.data.config.dbAllowedCidrs.join("\n")}
              onChange={(e) => setV4(e.target.value)}
            />
          </label>
          <label className="field">
            <span>IPv6 CIDRs, one a line</span>
            <textarea
              rows={3}
              className="mono"
              value={v6 ?? current.data.config.dbAllowedCidrsV6.join("\n")}
              onChange={(e) => setV6(e.target.value)}
            />
          </label>
          <span className="muted small">Status: {current.data.status}</span>
        </SettingForm>
      )}
    </section>
  );
}

/** The settings the API takes as booleans or numbers; every other one is a string such as `30s` or `64MB`. */
const BOOLEAN_SETTINGS = new Set([
  "log_checkpoints",
  "log_connections",
  "log_disconnections",
  "log_duration",
  "log_lock_waits",
  "track_commit_timestamp",
  "hot_standby_feedback",
]);
const NUMBER_SETTINGS = new Set([
  "max_connections",
  "max_locks_per_transaction",
  "max_parallel_maintenance_workers",
  "max_parallel_workers",
  "max_parallel_workers_per_gather",
  "max_replication_slots",
  "max_wal_senders",
  "max_worker_processes",
  "random_page_cost",
]);
const COMMON_SETTINGS = [
  "statement_timeout",
  "idle_in_transaction_session_timeout",
  "lock_timeout",
  "work_mem",
  "maintenance_work_mem",
  "max_connections",
  "shared_buffers",
  "log_lock_waits",
  "random_page_cost",
];

function valueOf(name: string, text: string): unknown {
  if (BOOLEAN_SETTINGS.has(name)) return text.trim() === "true" || text.trim() === "on";
  if (NUMBER_SETTINGS.has(name) && text.trim() !== "") return Number(text);
  return text.trim();
}

function PostgresConfig({ projectRef }: { projectRef: string }) {
  const path = `/v1/projects/${projectRef}/config/database/postgres`;
  const config = useAsync(() => mgmt.get<Record<string, unknown>>(path), [path]);
  const [name, setName] = useState(COMMON_SETTINGS[0]);
  const [value, setValue] = useState("");
  const rows = Object.entries(config.data ?? {}).map(([setting, v]) => ({ setting, value: v }));
  return (
    <section className="card section">
      <h2>Postgres settings</h2>
      <p className="muted small">
        Settings of this project's database apply to its new sessions; cluster-wide ones (and restarts) are
        the installation administrators'.
      </p>
      <ErrorBox error={config.error} />
      {config.loading && !config.data && <Spinner />}
      <SettingForm
        label="Postgres setting"
        submit="Save setting"
        send={async () => {
          await mgmt.put(path, { [name]: valueOf(name, value) });
          config.reload();
        }}
      >
        <label className="field">
          <span>Setting</span>
          <input list="postgres-settings" value={name} onChange={(e) => setName(e.target.value)} required />
          <datalist id="postgres-settings">
            {COMMON_SETTINGS.map((s) => (
              <option key={s} value={s} />
            ))}
          </datalist>
        </label>
        <label className="field">
          <span>Value</span>
          <input className="mono" value={value} onChange={(e) => setValue(e.target.value)} required />
        </label>
      </SettingForm>
      {rows.length > 0 && (
        <table className="columns-form" aria-label="Postgres settings">
          <thead>
            <tr>
              <th>Setting</th>
              <th>Value</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.setting}>
                <td className="mono">{r.setting}</td>
                <td className="mono">{String(r.value)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export default function SettingsDatabase() {
  const { ref } = useParams() as { ref: string };
  return (
    <div className="page">
      <PageHeader title="Database settings" />
      <SslEnforcement projectRef={ref} />
      <NetworkRestrictions projectRef={ref} />
      <PostgresConfig projectRef={ref} />
    </div>
  );
}
