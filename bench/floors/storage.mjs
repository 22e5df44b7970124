// The storage floor: node:http streaming an object's bytes to and from the same backend as Strata (a directory,
// or an S3-compatible server through the same AWS SDK), with its MD5 (the ETag) and ONE metadata statement
// per request on storage.objects. No API key, no JWT, no role, no policies.
//
//   node bench/floors/storage.mjs <port> <database url>
//   env FLOOR_DIR=<directory> | FLOOR_S3_ENDPOINT=<url> FLOOR_S3_BUCKET=<bucket>
// POST /object/<bucket>/<name>: stores the body (a new name each time); GET /object/<bucket>/<name>: streams it.
import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename } from "node:fs/promises";
import http from "node:http";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";

const [port, url] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: url, max: 10 });
const dir = process.env.FLOOR_DIR;
const s3 = process.env.FLOOR_S3_ENDPOINT ? await s3Backend() : undefined;

async function s3Backend() {
  const { S3Client, GetObjectCommand } = await import("@aws-sdk/client-s3");
  const { Upload } = await import("@aws-sdk/lib-storage");
  const client = new S3Client({
    region: "us-east-1",
    endpoint: process.env.FLOOR_S3_ENDPOINT,
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
  });
  const Bucket = process.env.FLOOR_S3_BUCKET;
  return {
    write: (Key, Body) => new Upload({ client, params: { Bucket, Key, Body } }).done(),
    read: async (Key) => (await client.send(new GetObjectCommand({ Bucket, Key }))).Body,
  };
}

function hashing() {
  const hash = createHash("md5");
  let size = 0;
  const stream = new Transform({
    transform(chunk, _e, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  return { stream, result: () => ({ size, md5: hash.digest("hex") }) };
}

async function store(req, key) {
  const measure = hashing();
  if (s3) {
    await s3.write(key, req.pipe(measure.stream));
  } else {
    const file = path.join(dir, key);
    await mkdir(path.dirname(file), { recursive: true });
    await pipeline(req, measure.stream, createWriteStream(`${file}.part`, { flags: "wx" }));
    await rename(`${file}.part`, file);
  }
  return measure.result();
}

http
  .createServer(async (req, res) => {
    const m = /^\/object\/([^/]+)\/(.+)$/.exec(req.url ?? "");
    if (!m) return res.writeHead(404).end();
    const [, bucket, name] = m;
    try {
      if (req.method === "POST") {
        const version = randomUUID();
        const { size, md5 } = await store(req, `floor/${version}`);
        const metadata = {
          eTag: `"${md5}"`,
          size,
          mimetype: req.headers["content-type"],
          contentLength: size,
        };
        await pool.query(
          "insert into storage.objects (bucket_id, name, version, metadata) values ($1, $2, $3, $4)",
          [bucket, decodeURIComponent(name), version, metadata],
        );
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify({ Key: `${bucket}/${name}` }));
      }
      const { rows } = await pool.query(
        "select version, metadata from storage.objects where bucket_id = $1 and name = $2",
        [bucket, decodeURIComponent(name)],
      );
      if (!rows.length) return res.writeHead(404).end();
      const key = `floor/${rows[0].version}`;
      const bytes = s3 ? await s3.read(key) : createReadStream(path.join(dir, key));
      res.writeHead(200, {
        "content-type": rows[0].metadata.mimetype ?? "application/octet-stream",
        "content-length": String(rows[0].metadata.size),
        etag: rows[0].metadata.eTag,
      });
      await pipeline(bytes, res);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500).end(String(e));
      else res.destroy();
    }
  })
  .listen(Number(port), "127.0.0.1", () => console.log("listening"));
