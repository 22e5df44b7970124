import { useEffect, useRef, useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { createClient, type RealtimeChannel, type SupabaseClient } from "@supabase/supabase-js";
import { DataGrid, type Row } from "../components/DataGrid";
import { ErrorBox, PageHeader } from "../components/Feedback";
import { useProjectApi } from "../projectApi";

const MAX_MESSAGES = 500;

/** Joins a channel of the project's Realtime (its own client library, the project's key) and shows what passes. */
export default function RealtimeInspector() {
  const { ref } = useParams() as { ref: string };
  const api = useProjectApi(ref);
  const client = useRef<SupabaseClient>(undefined);
  const channel = useRef<RealtimeChannel>(undefined);
  const [name, setName] = useState("room-1");
  const [databaseChanges, setDatabaseChanges] = useState(true);
  const [status, setStatus] = useState<string>("not joined");
  const [messages, setMessages] = useState<Row[]>([]);
  const [event, setEvent] = useState("message");
  const [payload, setPayload] = useState('{"hello": "world"}');
  const [error, setError] = useState<Error>();

  useEffect(() => {
    if (!api.data) return;
    client.current = createClient(api.data.url, api.data.key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    return () => void client.current?.removeAllChannels();
  }, [api.data]);

  const record = (type: string, eventName: string, body: unknown) =>
    setMessages((m) =>
      [{ at: new Date().toISOString(), type, event: eventName, payload: body }, ...m].slice(0, MAX_MESSAGES),
    );

  function join(e: FormEvent) {
    e.preventDefault();
    if (!client.current) return;
    setError(undefined);
    if (channel.current) void client.current.removeChannel(channel.current);
    let joined = client.current
      .channel(name, { config: { broadcast: { self: true }, presence: { key: "studio" } } })
      .on("broadcast", { event: "*" }, (m) => record("broadcast", m.event, m.payload))
      .on("presence", { event: "sync" }, () => record("presence", "sync", joined.presenceState()));
    if (databaseChanges)
      joined = joined.on("postgres_changes", { event: "*", schema: "public" }, (m) =>
        record("postgres_changes", `${m.eventType} ${m.schema}.${m.table}`, m.new ?? m.old),
      );
    joined.subscribe((state, err) => {
      setStatus(state.toLowerCase().replace(/_/g, " "));
      if (err) setError(err);
      if (state === "SUBSCRIBED") void joined.track({ user: "studio", online_at: new Date().toISOString() });
    });
    channel.current = joined;
  }

  async function send(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      await channel.current?.send({ type: "broadcast", event, payload: JSON.parse(payload) });
    } catch (err) {
      setError(err as Error);
    }
  }

  return (
    <div className="page">
      <PageHeader title="Realtime inspector">
        <span className="muted small" aria-live="polite">
          Channel: {status}
        </span>
      </PageHeader>
      <ErrorBox error={api.error ?? error} />
      <form className="form-row" onSubmit={join} aria-label="Join a channel">
        <label className="field">
          <span>Channel</span>
          <input value={name} onChange={(e) => setName(e.target.value)} required />
        </label>
        <span className="checkbox">
          <input
            type="checkbox"
            checked={databaseChanges}
            onChange={(e) => setDatabaseChanges(e.target.checked)}
          />{" "}
          Database changes (schema public)
        </span>
        <button className="button primary" type="submit" disabled={!api.data}>
          Join
        </button>
      </form>
      <form className="form-row" onSubmit={(e) => void send(e)} aria-label="Send a broadcast">
        <label className="field">
          <span>Event</span>
          <input value={event} onChange={(e) => setEvent(e.target.value)} required />
        </label>
        <label className="field" style={{ flex: 1 }}>
          <span>Payload (JSON)</span>
          <input className="mono" value={payload} onChange={(e) => setPayload(e.target.value)} />
        </label>
        <button className="button" type="submit" disabled={!channel.current}>
          Broadcast
        </button>
      </form>
      <DataGrid rows={messages} columns={["at", "type", "event", "payload"]} height="calc(100vh - 330px)" />
    </div>
  );
}
