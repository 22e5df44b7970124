/**
 * Storage against its floor, each in a process of its own: `npm run bench:storage [-- --sizes 1,100,1024
 * --skip-1gb --backends disk,s3 --seconds S --concurrency C --quick]`.
 *
 * Per backend (the data directory's disk; an S3-compatible server, s3rver, in a process of its own): Strata
 * (`strata start` on an embedded PostgreSQL, the service key) and the floor (bench/floors/storage.mjs:
 * node:http streaming the same bytes to the same backend, MD5 included, one insert into storage.objects per
 * object, nothing else), and this process as the client. Upload and download throughput per size (MB/s, one
 * transfer at a time), then small objects (1 KB) for S seconds with C concurrent clients: uploads and
 * downloads a second (after a second of each side not counted). Each measure runs floor, Strata, Strata,
 * floor and keeps each side's better run (`--verbose` prints all four on stderr).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import pg from "pg";
import { withDatabase } from "../src/db/urls";
import { argument, serverNode, startServerProcess, stopServerProcess } from "./process";
import { flag, freePort, management, printTable, startHelper, stopHelper, type Row } from "./report";

const QUICK = flag("quick");
const VERBOSE = flag("verbose");
const SIZES_MB = argument("sizes", QUICK ? "1" : "1,100,1024")
  .split(",")
  .map(Number)
  .filter((mb) => !(flag("skip-1gb") && mb >= 1024));
const BACKENDS = argument("backends", "disk,s3").split(",");
const SECONDS = Number(argument("seconds", QUICK ? "1" : "5"));
const CONCURRENCY = Number(argument("concurrency", "8"));
/** Strata's port (its PostgreSQL's is the next); 0: free ones. */
const PORT = Number(argument("port", "0"));
const TOKEN = "sbp_" + "5702".repeat(8) + "01234567";
const MB = 1024 * 1024;
const SMALL = 1024;
const DAY_MS = 24 * 60 * 60 * 1000;
const CHUNK = randomBytes(MB);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One side of the comparison: how to address an object and the headers it needs. */
interface Side {
  port: number;
  objectPath: (name: string) => string;
  headers: Record<string, string>;
}

/** `size` bytes of a random megabyte repeated, produced as the request reads them. */
function bytes(size: number): Readable {
  let left = size;
  return new Readable({
    read() {
      const n = Math.min(left, CHUNK.length);
      left -= n;
      this.push(n ? CHUNK.subarray(0, n) : null);
    },
  });
}

function upload(side: Side, name: string, size: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port: side.port,
        method: "POST",
        path: side.objectPath(name),
        agent,
        headers: { ...side.headers, "content-type": "application/octet-stream", "content-length": size },
      },
      (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () =>
          res.statusCode === 200 ? resolve() : reject(new Error(`upload: ${res.statusCode} ${body}`)),
        );
      },
    );
    req.on("error", (e) => reject(new Error(`upload of ${name} to :${side.port}: ${e.message}`)));
    bytes(size).pipe(req);
  });
}

function download(side: Side, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(
        { host: "127.0.0.1", port: side.port, path: side.objectPath(name), agent, headers: side.headers },
        (res) => {
          let size = 0;
          res.on("data", (d: Buffer) => (size += d.length));
          res.on("end", () =>
            res.statusCode === 200 ? resolve(size) : reject(new Error(`download: ${res.statusCode}`)),
          );
        },
      )
      .on("error", (e) => reject(new Error(`download of ${name} from :${side.port}: ${e.message}`)));
  });
}

/** MB/s of `count` transfers of `size` MB made one after another. */
async function throughput(count: number, sizeMb: number, transfer: (i: number) => Promise<unknown>) {
  const started = performance.now();
  for (let i = 0; i < count; i++) await transfer(i);
  return (count * sizeMb) / ((performance.now() - started) / 1000);
}

/** Requests a second of `send` with CONCURRENCY clients for SECONDS. */
async function rate(send: () => Promise<unknown>, seconds = SECONDS): Promise<number> {
  const end = Date.now() + seconds * 1000;
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        await send();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

async function bench(backend: string): Promise<Row[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "strata-bench-storage-"));
  const s3Port = await freePort();
  const floorPort = await freePort();
  const s3Env = {
    STORAGE_S3_BUCKET: "bench",
    STORAGE_S3_ENDPOINT: `http://127.0.0.1:${s3Port}`,
    STORAGE_S3_ACCESS_KEY_ID: "S3RVER",
    STORAGE_S3_SECRET_ACCESS_KEY: "S3RVER",
  };
  const s3 =
    backend === "s3"
      ? await startHelper(serverNode(), ["bench/floors/s3rver.mjs", String(s3Port), dir, "bench"])
      : undefined;
  const server = await startServerProcess({
    name: "strata-bench-storage",
    port: PORT,
    pgPort: PORT + 1,
    jwtSecret: "bench-secret-" + randomUUID(),
    managementToken: TOKEN,
    // A new installation takes its first base backup of the cluster half a minute after it starts (then daily):
    // a copy of the cluster on the same disk and the server's thread pool, landing in whichever measure runs
    // then. Not storage's work, and the floor has none: the check is put off past the bench.
    env: { BACKUP_SCHEDULE_CHECK_MS: String(DAY_MS), ...(s3 ? s3Env : {}) },
  });
  const mgmt = management(`http://127.0.0.1:${server.port}`, TOKEN);
  let floor: Awaited<ReturnType<typeof startHelper>> | undefined;
  try {
    await mgmt("PATCH", `/v1/projects/${server.ref}/config/storage`, { fileSizeLimit: 4 * 1024 * MB });
    const auth = { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}` };
    for (const id of ["bench", "floor"]) {
      const res = await fetch(`http://127.0.0.1:${server.port}/storage/v1/bucket`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ id, name: id }),
      });
      if (!res.ok) throw new Error(`bucket ${id}: ${res.status} ${await res.text()}`);
    }
    const [{ db }] = (await mgmt("POST", `/v1/projects/${server.ref}/database/query`, {
      query: "select current_database() as db",
    })) as { db: string }[];
    floor = await startHelper(
      serverNode(),
      ["bench/floors/storage.mjs", String(floorPort), withDatabase(server.superuserUrl, db)],
      s3
        ? { FLOOR_S3_ENDPOINT: s3Env.STORAGE_S3_ENDPOINT, FLOOR_S3_BUCKET: "bench" }
        : { FLOOR_DIR: path.join(dir, "floor") },
    );
    const sides: Record<"floor" | "strata", Side> = {
      floor: { port: floorPort, objectPath: (n) => `/object/floor/${n}`, headers: {} },
      strata: { port: server.port, objectPath: (n) => `/storage/v1/object/bench/${n}`, headers: auth },
    };
    const rows: Row[] = [];
    const both = async (
      name: string,
      unit: string,
      measure: (side: Side, tag: string, seconds?: number) => Promise<number>,
      { warmUp = false } = {},
    ) => {
      // Concurrent clients meet connections still to be opened and database sessions with cold caches at first,
      // on either side: a second of each side first, not counted, or the last run (the floor's) is the only
      // warm one.
      if (warmUp) {
        await measure(sides.floor, "wf", 1);
        await measure(sides.strata, "ws", 1);
      }
      // Floor, Strata, Strata, floor: each side's better run, so a burst of the machine's other load in one
      // run does not decide the ratio.
      const f1 = await measure(sides.floor, "f1");
      const s1 = await measure(sides.strata, "s1");
      const s2 = await measure(sides.strata, "s2");
      const f2 = await measure(sides.floor, "f2");
      if (VERBOSE)
        console.error(
          `${name}: floor ${f1.toFixed(1)}, ${f2.toFixed(1)}; Strata ${s1.toFixed(1)}, ${s2.toFixed(1)}`,
        );
      rows.push({
        name,
        unit,
        floor: Math.max(f1, f2),
        strata: Math.max(s1, s2),
        better: "higher",
        target: 0.9,
      });
    };
    for (const mb of SIZES_MB) {
      const count = mb <= 1 ? 20 : mb <= 100 ? 3 : 1;
      const label = mb >= 1024 ? `${mb / 1024} GB` : `${mb} MB`;
      await both(`upload ${label} ×${count}`, "MB/s", (side, tag) =>
        throughput(count, mb, (i) => upload(side, `${tag}-${mb}-${i}`, mb * MB)),
      );
      await both(`download ${label} ×${count}`, "MB/s", (side, tag) =>
        throughput(count, mb, (i) => download(side, `${tag}-${mb}-${i}`)),
      );
    }
    await both(
      `small upload 1 KB, ${CONCURRENCY} clients`,
      "req/s",
      (side, tag, seconds) => {
        let n = 0;
        return rate(() => upload(side, `${tag}-small-${n++}`, SMALL), seconds);
      },
      { warmUp: true },
    );
    await both(
      `small download 1 KB, ${CONCURRENCY} clients`,
      "req/s",
      (side, tag, seconds) => rate(() => download(side, `${tag}-small-0`), seconds),
      { warmUp: true },
    );
    // The rows the floor wrote are not Strata's: gone before the server stops.
    const admin = new pg.Client({ connectionString: withDatabase(server.superuserUrl, db) });
    await admin.connect();
    await admin.query("delete from storage.objects where bucket_id = 'floor'");
    await admin.end();
    return rows;
  } finally {
    if (floor) await stopHelper(floor);
    await stopServerProcess(server);
    if (s3) await stopHelper(s3);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  let met = true;
  for (const backend of BACKENDS) {
    const rows = await bench(backend);
    met =
      printTable(`storage on ${backend === "s3" ? "an S3-compatible server (s3rver)" : "disk"}`, rows) && met;
  }
  console.log(`\nstorage: ${met ? "every target met" : "targets NOT met"}`);
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
