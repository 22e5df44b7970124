import { spawn, execFileSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { S3Backend } from "../../src/storage/backend/s3";
import { sweepStorage } from "../../src/storage/sweep";
import { startTestServer, type TestServer } from "../helpers/server";

/**
 * What storage leaves behind when a write fails or a process dies: a full disk or a full database answers
 * 507 and keeps nothing; the sweep removes partial files of dead writers, bytes no row points at, expired
 * resumable uploads and stale S3 multipart uploads, and nothing that a live write or a row still needs.
 */

const DAY = 24 * 60 * 60 * 1000;
const INSUFFICIENT = {
  statusCode: "507",
  code: "InsufficientStorage",
  error: "InsufficientStorage",
  message: "There is not enough storage space left to store the object",
};

/** Sets a file's modification time `ms` in the past. */
function age(file: string, ms: number) {
  const then = new Date(Date.now() - ms);
  utimesSync(file, then, then);
}

/** The pid of a process that has ended. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid!;
}

describe("Storage when space runs out, and the sweep of leftovers", () => {
  let server: TestServer;
  let projectDir: string;
  const headers = () => ({ apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}` });

  const upload = async (name: string, bytes: number) => {
    const res = await fetch(`${server.url}/storage/v1/object/files/${name}`, {
      method: "POST",
      headers: { ...headers(), "content-type": "application/octet-stream" },
      body: Buffer.alloc(bytes, 7),
    });
    return { status: res.status, body: (await res.json()) as unknown };
  };
  const rows = async (name: string) =>
    (await server.sql("select version from storage.objects where name = $1", [name])).rows as {
      version: string;
    }[];

  beforeAll(async () => {
    server = await startTestServer();
    projectDir = path.join(server.strata.ctx.config.dataDir, "storage", server.ref);
    mkdirSync(projectDir, { recursive: true });
    const bucket = await fetch(`${server.url}/storage/v1/bucket`, {
      method: "POST",
      headers: { ...headers(), "content-type": "application/json" },
      body: JSON.stringify({ id: "files" }),
    });
    expect(bucket.status).toBe(200);
  });
  afterAll(() => server.stop());

  it("answers a full disk with 507, keeps no bytes and no row, and takes what fits", async () => {
    // A file system of 256 KiB under the project's directory: writing more fails with ENOSPC.
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", projectDir]);
    try {
      const full = await upload("too-big.bin", 1024 * 1024);
      expect(full).toEqual({ status: 507, body: INSUFFICIENT });
      expect(await rows("too-big.bin")).toEqual([]);
      expect(readdirSync(projectDir)).toEqual([]);

      const small = await upload("fits.bin", 10 * 1024);
      expect(small.status).toBe(200);
      const [row] = await rows("fits.bin");
      expect(readdirSync(projectDir)).toEqual([row.version]);
    } finally {
      execFileSync("umount", [projectDir]);
    }
  });

  it("answers PostgreSQL's disk_full (53100) on the row with 507 and removes the bytes", async () => {
    await server.sql(`
      create function public.disk_is_full() returns trigger language plpgsql as
        $$ begin raise exception 'could not extend file' using errcode = 'disk_full'; end $$;
      create trigger disk_is_full before insert on storage.objects
        for each row execute function public.disk_is_full();`);
    try {
      const before = readdirSync(projectDir);
      const res = await upload("no-room-for-the-row.bin", 64 * 1024);
      expect(res).toEqual({ status: 507, body: INSUFFICIENT });
      expect(await rows("no-room-for-the-row.bin")).toEqual([]);
      expect(readdirSync(projectDir)).toEqual(before);
    } finally {
      await server.sql("drop trigger disk_is_full on storage.objects; drop function public.disk_is_full()");
    }
    expect((await upload("room-again.bin", 1024)).status).toBe(200);
  });

  it("sweeps partial files of dead writers, old bytes without a row and expired resumable uploads, and nothing else", async () => {
    const host = createHash("sha256").update(os.hostname()).digest("hex").slice(0, 12);
    expect((await upload("kept.bin", 1024)).status).toBe(200);
    const [kept] = await rows("kept.bin");
    const file = (name: string, ageMs = 0) => {
      const at = path.join(projectDir, name);
      writeFileSync(at, "leftover");
      if (ageMs) age(at, ageMs);
      return at;
    };
    age(path.join(projectDir, kept.version), 2 * DAY);
    const dead = await deadPid();
    const leftovers = {
      deadWriter: file(`${randomUUID()}.${host}-${dead}.part`),
      oldOtherNode: file(`${randomUUID()}.0123456789ab-${process.pid}.part`, 2 * DAY),
      oldUnnamedWriter: file(`${randomUUID()}.${randomUUID()}.part`, 2 * DAY),
      oldWithoutRow: file(randomUUID(), 2 * DAY),
    };
    const live = {
      ownWrite: file(`${randomUUID()}.${host}-${process.pid}.part`),
      otherNodeWrite: file(`${randomUUID()}.0123456789ab-${dead}.part`),
      recentWithoutRow: file(randomUUID()),
      withRow: path.join(projectDir, kept.version),
    };
    // A project the control plane does not know (the data directory once served another database).
    const unknownDir = path.join(server.strata.ctx.config.dataDir, "storage", "zzzzzzzzzzzzzzzzzzzz");
    mkdirSync(unknownDir, { recursive: true });
    const unknown = path.join(unknownDir, randomUUID());
    writeFileSync(unknown, "someone's");
    age(unknown, 2 * DAY);

    // Resumable uploads: their parts and info file, one begun two days ago, one an hour ago, and parts
    // whose info file a crash kept from being written.
    const resumable = path.join(server.strata.ctx.config.dataDir, "storage-resumable");
    mkdirSync(resumable, { recursive: true });
    const tusUpload = (began: number) => {
      const id = `${server.ref}.${randomUUID()}`;
      writeFileSync(path.join(resumable, id), "part");
      writeFileSync(
        path.join(resumable, `${id}.json`),
        JSON.stringify({
          id,
          size: 100,
          offset: 0,
          creation_date: new Date(Date.now() - began).toISOString(),
        }),
      );
      return id;
    };
    const expired = tusUpload(2 * DAY);
    const current = tusUpload(60 * 60 * 1000);
    const withoutInfo = `${server.ref}.${randomUUID()}`;
    writeFileSync(path.join(resumable, withoutInfo), "part");
    age(path.join(resumable, withoutInfo), 2 * DAY);

    const result = await sweepStorage(server.strata.ctx, server.strata.ctx.storage!);
    expect(result).toEqual({ unfinished: 3, withoutRow: 1, expiredUploads: 2 });
    for (const [what, at] of Object.entries(leftovers))
      expect({ what, there: existsSync(at) }).toEqual({ what, there: false });
    for (const [what, at] of Object.entries(live))
      expect({ what, there: existsSync(at) }).toEqual({ what, there: true });
    expect(existsSync(unknown)).toBe(true);
    expect(readdirSync(resumable).sort()).toEqual([current, `${current}.json`].sort());
    expect(readdirSync(resumable)).not.toContain(expired);

    // The object whose bytes were kept still downloads.
    const download = await fetch(`${server.url}/storage/v1/object/files/kept.bin`, { headers: headers() });
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer())).toEqual(Buffer.alloc(1024, 7));
  });

  it("aborts S3 multipart uploads of Strata's keys begun over a day ago, and only those", async () => {
    // An S3 endpoint that lists three unfinished uploads over two pages and records what is aborted.
    const old = new Date(Date.now() - 2 * DAY).toISOString();
    const recent = new Date().toISOString();
    const oldKey = `${server.ref}/${randomUUID()}`;
    const pages = [
      {
        uploads: [[oldKey, "u1", old]],
        next: `<IsTruncated>true</IsTruncated><NextKeyMarker>${oldKey}</NextKeyMarker><NextUploadIdMarker>u1</NextUploadIdMarker>`,
      },
      {
        uploads: [
          [`${server.ref}/${randomUUID()}`, "u2", recent],
          ["someone-else/backup.tar", "u3", old],
        ],
        next: "<IsTruncated>false</IsTruncated>",
      },
    ];
    const aborted: string[] = [];
    const s3 = http.createServer((req, res) => {
      const url = new URL(req.url!, "http://s3");
      if (req.method === "DELETE") {
        aborted.push(`${decodeURIComponent(url.pathname)}?${url.searchParams.get("uploadId")}`);
        res.writeHead(204).end();
        return;
      }
      const page = pages[url.searchParams.get("key-marker") ? 1 : 0];
      const uploads = page.uploads
        .map(
          ([Key, UploadId, Initiated]) =>
            `<Upload><Key>${Key}</Key><UploadId>${UploadId}</UploadId><Initiated>${Initiated}</Initiated></Upload>`,
        )
        .join("");
      res.writeHead(200, { "content-type": "application/xml" });
      res.end(
        `<?xml version="1.0"?><ListMultipartUploadsResult><Bucket>objects</Bucket>${page.next}${uploads}</ListMultipartUploadsResult>`,
      );
    });
    await new Promise<void>((resolve) => s3.listen(0, "127.0.0.1", resolve));
    const backend = new S3Backend({
      bucket: "objects",
      endpoint: `http://127.0.0.1:${(s3.address() as AddressInfo).port}`,
      region: "us-east-1",
      accessKeyId: "test",
      secretAccessKey: "test",
      forcePathStyle: true,
    });
    try {
      expect(await backend.removeUnfinished(new Date(Date.now() - DAY))).toBe(1);
      expect(aborted).toEqual([`/objects/${oldKey}?u1`]);
    } finally {
      await backend.close();
      s3.close();
    }
  });
});
