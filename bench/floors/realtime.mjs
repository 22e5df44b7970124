// The realtime floor: a bare `ws` server speaking just enough of Phoenix (vsn 1.0.0) for the benchmark's
// clients. A broadcast frame is relayed as received to every other socket joined to its topic; postgres
// changes are read from a replication slot of their own (pg-logical-replication, pgoutput, publication
// supabase_realtime) and written to every socket that joined with postgres_changes, the change's JSON
// encoded once. No API key, no JWT, no authorisation, no filters.
//
//   node bench/floors/realtime.mjs <port> <database url (a superuser's)>
// Prints "listening" when up.
import { LogicalReplicationService, PgoutputPlugin } from "pg-logical-replication";
import pg from "pg";
import { WebSocketServer } from "ws";

const [port, url] = process.argv.slice(2);
const SLOT = "bench_floor";
/** topic -> the sockets joined to it (and their join_ref). */
const topics = new Map();
/** Joins with postgres_changes: {ws, topic, joinRef}. */
const changeSubscribers = new Set();
/** The replication service, once the first postgres_changes join started it. */
let replication;

const reply = (ws, frame, response = {}) =>
  ws.send(
    JSON.stringify({
      join_ref: frame.join_ref,
      ref: frame.ref,
      topic: frame.topic,
      event: "phx_reply",
      payload: { status: "ok", response },
    }),
  );

async function startReplication() {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(
    "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1",
    [SLOT],
  );
  await admin.query("select pg_create_logical_replication_slot($1, 'pgoutput')", [SLOT]);
  await admin.end();
  const service = new LogicalReplicationService(
    { connectionString: url },
    { acknowledge: { auto: true, timeoutSeconds: 1 } },
  );
  const plugin = new PgoutputPlugin({ protoVersion: 1, publicationNames: ["supabase_realtime"] });
  let commitTimestamp = "";
  service.on("data", (_lsn, msg) => {
    if (msg.tag === "relation") for (const c of msg.columns) c.parser = (raw) => raw;
    else if (msg.tag === "begin") commitTimestamp = new Date(Number(msg.commitTime / 1000n)).toISOString();
    else if (msg.tag === "insert") {
      const data = JSON.stringify({
        schema: msg.relation.schema,
        table: msg.relation.name,
        commit_timestamp: commitTimestamp,
        type: "INSERT",
        columns: msg.relation.columns.map((c) => ({ name: c.name, type: String(c.typeOid) })),
        record: msg.new,
        errors: null,
      });
      for (const s of changeSubscribers) {
        s.ws.send(
          `{"join_ref":${JSON.stringify(s.joinRef)},"ref":null,"topic":${JSON.stringify(s.topic)},"event":"postgres_changes","payload":{"ids":[1],"data":${data}}}`,
        );
      }
    }
  });
  service.subscribe(plugin, SLOT).catch((e) => console.error(e));
  return service;
}

const wss = new WebSocketServer({ port: Number(port), host: "127.0.0.1" }, () => console.log("listening"));
wss.on("connection", (ws) => {
  const joined = [];
  ws.on("message", async (data) => {
    const text = data.toString();
    const frame = JSON.parse(text);
    if (frame.event === "heartbeat") return reply(ws, frame);
    if (frame.event === "phx_join") {
      const changes = frame.payload?.config?.postgres_changes ?? [];
      let set = topics.get(frame.topic);
      if (!set) topics.set(frame.topic, (set = new Set()));
      const entry = { ws, topic: frame.topic, joinRef: frame.join_ref };
      set.add(entry);
      joined.push(entry);
      reply(ws, frame, { postgres_changes: changes.map((c, i) => ({ ...c, id: i + 1 })) });
      if (changes.length) {
        changeSubscribers.add(entry);
        replication ??= startReplication();
        await replication;
        ws.send(
          JSON.stringify({
            join_ref: frame.join_ref,
            ref: null,
            topic: frame.topic,
            event: "system",
            payload: {
              status: "ok",
              extension: "postgres_changes",
              message: "Subscribed to PostgreSQL",
              channel: frame.topic,
            },
          }),
        );
      }
      return;
    }
    if (frame.event === "broadcast") {
      for (const s of topics.get(frame.topic) ?? []) if (s.ws !== ws) s.ws.send(text);
    }
  });
  ws.on("close", () => {
    for (const entry of joined) {
      topics.get(entry.topic)?.delete(entry);
      changeSubscribers.delete(entry);
    }
  });
});
process.on("SIGTERM", async () => {
  wss.close();
  await (await replication)?.destroy?.().catch(() => {});
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin
    .query(
      "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1 and not active",
      [SLOT],
    )
    .catch(() => {});
  await admin.end();
  process.exit(0);
});
