import WebSocket from "ws";
import { mintLegacyKey } from "../../src/auth/legacyKeys";
import { withDatabase } from "../../src/db/urls";
import { adminQuery } from "../helpers/db";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt, waitForStatus } from "../management/client";

/**
 * Realtime of a project created through the Management API, at its own host, spoken as raw Phoenix frames
 * (vsn 1.0.0): its changes come from a slot in its own database, which is dropped when the project is paused
 * and before it is deleted (a database with an active slot could not be dropped).
 */

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
}, 60_000);

afterAll(async () => {
  await server.stop();
});

interface Socket {
  frames: any[];
  next(match: (f: any) => boolean): Promise<any>;
  send(frame: object): void;
  closed: Promise<void>;
}

async function connect(ref: string, apikey: string): Promise<Socket> {
  const url = `${server.url.replace("http", "ws")}/realtime/v1/websocket?apikey=${apikey}&vsn=1.0.0`;
  const ws = new WebSocket(url, { headers: { host: `${ref}.localhost` } });
  const frames: any[] = [];
  const waiters: { match: (f: any) => boolean; resolve: (f: any) => void }[] = [];
  ws.on("message", (data) => {
    const f = JSON.parse(data.toString());
    frames.push(f);
    for (const w of waiters.filter((w) => w.match(f))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(f);
    }
  });
  const closed = new Promise<void>((resolve) => ws.on("close", () => resolve()));
  await new Promise((resolve, reject) => {
    ws.on("open", resolve);
    ws.on("error", reject);
  });
  return {
    frames,
    closed,
    send: (frame) => ws.send(JSON.stringify(frame)),
    next: (match) => {
      const found = frames.find(match);
      return found ? Promise.resolve(found) : new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

async function joinChanges(socket: Socket, topic: string): Promise<void> {
  socket.send({
    topic: `realtime:${topic}`,
    event: "phx_join",
    ref: "1",
    join_ref: "1",
    payload: { config: { postgres_changes: [{ event: "INSERT", schema: "public", table: "notes" }] } },
  });
  const reply = await socket.next((f) => f.event === "phx_reply" && f.ref === "1");
  expect(reply.payload).toMatchObject({ status: "ok", response: { postgres_changes: [{ table: "notes" }] } });
  const system = await socket.next((f) => f.event === "system");
  expect(system.payload).toMatchObject({ status: "ok", message: "Subscribed to PostgreSQL" });
}

test("a project's slot lives in its own database and is dropped on pause and before delete", async () => {
  const created = await mgmt(server, "POST", "/v1/projects", {
    body: {
      name: "live",
      organization_slug: "default-org",
      db_pass: "a-strong-password",
      region: "us-east-1",
    },
  });
  expect(created.status).toBe(201);
  const ref: string = created.body.ref;
  await waitForStatus(server, ref, "ACTIVE_HEALTHY");
  const { rows } = await server.controlSql(
    "select database_name, legacy_keys_iat from platform.projects where ref = $1",
    [ref],
  );
  const database = rows[0].database_name;
  const jwtSecret = (await mgmt(server, "GET", `/v1/projects/${ref}/postgrest`)).body.jwt_secret;
  const anonKey = await mintLegacyKey(jwtSecret, "anon", Number(rows[0].legacy_keys_iat));
  await adminQuery(
    `create table public.notes (id int primary key, body text);
     grant select on public.notes to anon;
     alter publication supabase_realtime add table public.notes`,
    [],
    withDatabase(server.dbUrl, database),
  );
  const slots = async () =>
    (
      await server.sql(
        "select s.slot_name from pg_replication_slots s join pg_database d on d.oid = s.datoid where d.datname = $1",
        [database],
      )
    ).rows.map((r) => r.slot_name);

  // The default project's key opens no socket of this project.
  await expect(connect(ref, server.anonKey)).rejects.toThrow(/403/);

  const socket = await connect(ref, anonKey);
  await joinChanges(socket, "notes");
  expect(await slots()).toEqual([expect.stringMatching(new RegExp(`^strata_rt_${ref}_`))]);
  await adminQuery("insert into public.notes values (1, 'hello')", [], withDatabase(server.dbUrl, database));
  const change = await socket.next((f) => f.event === "postgres_changes");
  expect(change.payload.data).toMatchObject({
    table: "notes",
    type: "INSERT",
    record: { id: 1, body: "hello" },
  });

  expect((await mgmt(server, "POST", `/v1/projects/${ref}/pause`)).status).toBe(200);
  await socket.closed;
  expect(await slots()).toEqual([]);

  expect((await mgmt(server, "POST", `/v1/projects/${ref}/restore`)).status).toBe(200);
  await waitForStatus(server, ref, "ACTIVE_HEALTHY");
  const again = await connect(ref, anonKey);
  await joinChanges(again, "notes-again");
  expect(await slots()).toHaveLength(1);

  expect((await mgmt(server, "DELETE", `/v1/projects/${ref}`)).status).toBe(200);
  await again.closed;
  const exists = await server.sql("select 1 from pg_database where datname = $1", [database]);
  expect(exists.rowCount).toBe(0);
}, 60_000);
