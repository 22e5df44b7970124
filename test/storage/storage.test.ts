import { createHash, randomUUID } from "node:crypto";
import { createReadStream, existsSync, readdirSync, statSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { CreateBucketCommand, HeadObjectCommand, S3Client } from "@aws-sdk/client-s3";
import type { SupabaseClient } from "@supabase/supabase-js";
import S3rver from "s3rver";
import sharp from "sharp";
import * as tus from "tus-js-client";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { clientFor, userToken } from "../rest/fixtures";
import { testTempDir } from "../helpers/tempDir";

/**
 * /storage/v1 through the platform's JavaScript client, against the local disk and then against an
 * S3-compatible server (s3rver) started here. Effects are checked through a second channel: the
 * storage tables with SQL, and the stored bytes on disk or in the S3 bucket.
 */

const sha256 = (data: Buffer | Uint8Array) => createHash("sha256").update(data).digest("hex");
const blobBytes = async (blob: Blob) => Buffer.from(await blob.arrayBuffer());

interface Backend {
  name: string;
  env(): Record<string, string>;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Whether bytes are stored under the object's version (the second channel). */
  holds(server: TestServer, version: string): Promise<boolean>;
}

const disk: Backend = {
  name: "the local disk",
  env: () => ({}),
  start: async () => {},
  stop: async () => {},
  holds: async (server, version) =>
    existsSync(path.join(server.strata.ctx.config.dataDir, "storage", server.ref, version)),
};

function s3Backend(): Backend {
  let s3rver: S3rver;
  let endpoint = "";
  let client: S3Client;
  const bucket = "strata-objects";
  return {
    name: "an S3-compatible server",
    env: () => ({
      STORAGE_S3_BUCKET: bucket,
      STORAGE_S3_ENDPOINT: endpoint,
      STORAGE_S3_ACCESS_KEY_ID: "S3RVER",
      STORAGE_S3_SECRET_ACCESS_KEY: "S3RVER",
    }),
    async start() {
      const directory = testTempDir("strata-s3-");
      s3rver = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory });
      const { port } = await s3rver.run();
      endpoint = `http://127.0.0.1:${port}`;
      client = new S3Client({
        region: "us-east-1",
        endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
      });
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
    },
    async stop() {
      client.destroy();
      await s3rver.close();
    },
    async holds(server, version) {
      return client.send(new HeadObjectCommand({ Bucket: bucket, Key: `${server.ref}/${version}` })).then(
        () => true,
        () => false,
      );
    },
  };
}

describe.each([disk, s3Backend()])("Storage on $name", (backend) => {
  let server: TestServer;
  let service: SupabaseClient;
  let anon: SupabaseClient;

  beforeAll(async () => {
    await backend.start();
    server = await startTestServer(backend.env());
    service = clientFor(server, server.serviceKey);
    anon = clientFor(server);
  });
  afterAll(async () => {
    await server.stop();
    await backend.stop();
  });

  async function objectRow(bucket: string, name: string) {
    const { rows } = await server.sql(
      "select id, owner_id, version, metadata from storage.objects where bucket_id = $1 and name = $2",
      [bucket, name],
    );
    return rows[0] as { id: string; owner_id: string | null; version: string; metadata: any } | undefined;
  }

  async function userClient(): Promise<{ id: string; client: SupabaseClient }> {
    const id = randomUUID();
    return { id, client: clientFor(server, server.anonKey, await userToken(server, id)) };
  }

  it("creates, reads, changes, empties and deletes buckets, refusing a taken id and a bucket still in use", async () => {
    const created = await service.storage.createBucket("docs", {
      public: false,
      fileSizeLimit: "1KB",
      allowedMimeTypes: ["text/plain"],
    });
    expect(created).toEqual({ data: { name: "docs" }, error: null });
    const { rows } = await server.sql(
      "select public, file_size_limit, allowed_mime_types from storage.buckets where id = 'docs'",
    );
    expect(rows).toEqual([{ public: false, file_size_limit: "1024", allowed_mime_types: ["text/plain"] }]);

    const taken = await service.storage.createBucket("docs");
    expect(taken.error).toMatchObject({ message: "The resource already exists", statusCode: "409" });

    expect(
      (await service.storage.updateBucket("docs", { public: true, fileSizeLimit: 2048 })).error,
    ).toBeNull();
    const got = await service.storage.getBucket("docs");
    expect(got.data).toMatchObject({
      id: "docs",
      public: true,
      file_size_limit: 2048,
      allowed_mime_types: ["text/plain"],
    });
    expect((await service.storage.listBuckets()).data?.map((b) => b.id)).toContain("docs");

    await service.storage.from("docs").upload("a/one.txt", Buffer.from("one"), { contentType: "text/plain" });
    const busy = await service.storage.deleteBucket("docs");
    expect(busy.error).toMatchObject({
      message: "The bucket you tried to delete is not empty",
      statusCode: "409",
    });
    const version = (await objectRow("docs", "a/one.txt"))!.version;
    expect(await backend.holds(server, version)).toBe(true);

    expect((await service.storage.emptyBucket("docs")).error).toBeNull();
    expect(await objectRow("docs", "a/one.txt")).toBeUndefined();
    expect(await backend.holds(server, version)).toBe(false);
    expect((await service.storage.deleteBucket("docs")).data).toEqual({ message: "Successfully deleted" });
    expect(
      (await server.sql("select count(*)::int as n from storage.buckets where id = 'docs'")).rows,
    ).toEqual([{ n: 0 }]);
    const gone = await service.storage.getBucket("docs");
    expect(gone.error).toMatchObject({ message: "Bucket not found", statusCode: "404" });

    // The Management API's usage counts storage requests.
    const counts = await mgmt(
      server,
      "GET",
      `/v1/projects/${server.ref}/analytics/endpoints/usage.api-counts?interval=1hr`,
    );
    const storageRequests = counts.body.result.reduce((n: number, r: any) => n + r.total_storage_requests, 0);
    expect(storageRequests).toBeGreaterThanOrEqual(9);
  });

  it("uploads, downloads, lists, moves, copies and removes objects; the bytes follow the rows", async () => {
    await service.storage.createBucket("files");
    const files = service.storage.from("files");
    const png = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");
    const up = await files.upload("img/a.png", new File([png], "a.png", { type: "image/png" }), {
      cacheControl: "120",
    });
    expect(up).toMatchObject({ data: { path: "img/a.png", fullPath: "files/img/a.png" }, error: null });
    await files.upload("img/sub/b.txt", Buffer.from("bee"), { contentType: "text/plain" });
    await files.upload("readme.txt", "read me", { contentType: "text/plain" });

    const down = await files.download("img/a.png");
    expect(sha256(await blobBytes(down.data!))).toBe(sha256(png));
    expect(down.data!.type).toBe("image/png");
    const info = await files.info("img/a.png");
    expect(info.data).toMatchObject({
      name: "img/a.png",
      size: png.length,
      contentType: "image/png",
      cacheControl: "max-age=120",
    });
    expect((await files.exists("img/a.png")).data).toBe(true);
    expect((await files.exists("img/none.png")).data).toBe(false);

    const root = await files.list();
    expect(root.data?.map((e) => [e.name, e.id === null])).toEqual([
      ["img", true],
      ["readme.txt", false],
    ]);
    const img = await files.list("img", { sortBy: { column: "name", order: "desc" } });
    expect(img.data?.map((e) => e.name)).toEqual(["sub", "a.png"]);

    // A move renames the row: the same stored bytes answer at the new name.
    const before = (await objectRow("files", "img/a.png"))!;
    expect((await files.move("img/a.png", "moved/a.png")).error).toBeNull();
    const after = (await objectRow("files", "moved/a.png"))!;
    expect(after.version).toBe(before.version);
    expect(await objectRow("files", "img/a.png")).toBeUndefined();

    // A copy stores its own bytes: removing the original leaves the copy whole.
    expect((await files.copy("moved/a.png", "copy/a.png")).data).toEqual({ path: "files/copy/a.png" });
    const copy = (await objectRow("files", "copy/a.png"))!;
    expect(copy.version).not.toBe(after.version);
    const removed = await files.remove(["moved/a.png", "no/such.png"]);
    expect(removed.data?.map((o) => o.name)).toEqual(["moved/a.png"]);
    expect(await backend.holds(server, after.version)).toBe(false);
    expect(await backend.holds(server, copy.version)).toBe(true);
    expect(sha256(await blobBytes((await files.download("copy/a.png")).data!))).toBe(sha256(png));
  });

  it("answers byte ranges of an object: 206 with the range's bytes, 416 for one past its end", async () => {
    await service.storage.createBucket("ranged");
    await service.storage.from("ranged").upload("digits.txt", "0123456789", { contentType: "text/plain" });
    const ranged = async (range: string) => {
      const res = await fetch(`${server.url}/storage/v1/object/ranged/digits.txt`, {
        headers: { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}`, range },
      });
      return [res.status, res.headers.get("content-range"), await res.text()];
    };
    expect(await ranged("bytes=2-5")).toEqual([206, "bytes 2-5/10", "2345"]);
    expect(await ranged("bytes=7-")).toEqual([206, "bytes 7-9/10", "789"]);
    expect(await ranged("bytes=-3")).toEqual([206, "bytes 7-9/10", "789"]);
    expect(await ranged("bytes=8-40")).toEqual([206, "bytes 8-9/10", "89"]);
    expect((await ranged("bytes=20-30"))[0]).toBe(416);
    expect(await ranged("bytes=0-")).toEqual([206, "bytes 0-9/10", "0123456789"]);
  });

  it("pages through keys with list-v2, by name with a cursor, with or without folders", async () => {
    await service.storage.createBucket("keys");
    const keys = service.storage.from("keys");
    for (const name of ["a/1.txt", "a/2.txt", "a/sub/3.txt", "b.txt", "c/4.txt"]) {
      await keys.upload(name, name, { contentType: "text/plain" });
    }
    const flat = await keys.listV2({ limit: 2 });
    expect(flat.data).toMatchObject({
      hasNext: true,
      folders: [],
      objects: [{ name: "a/1.txt" }, { name: "a/2.txt" }],
    });
    const rest = await keys.listV2({ limit: 10, cursor: flat.data!.nextCursor });
    expect(rest.data!.objects.map((o) => o.name)).toEqual(["a/sub/3.txt", "b.txt", "c/4.txt"]);
    expect(rest.data!.hasNext).toBe(false);
    const top = await keys.listV2({ with_delimiter: true });
    expect(top.data!.folders.map((f) => f.name)).toEqual(["a/", "c/"]);
    expect(top.data!.objects.map((o) => o.name)).toEqual(["b.txt"]);
    const inA = await keys.listV2({
      prefix: "a/",
      with_delimiter: true,
      sortBy: { column: "name", order: "desc" },
    });
    expect(inA.data!.folders.map((f) => f.name)).toEqual(["a/sub/"]);
    expect(inA.data!.objects.map((o) => o.name)).toEqual(["a/2.txt", "a/1.txt"]);
    const bad = await keys.listV2({ cursor: "not-a-cursor" });
    expect(bad.error).toMatchObject({ statusCode: "400" });
  });

  it("transforms images once the project turns it on: size, fit, format, signed and public", async () => {
    await service.storage.createBucket("pics", { public: true });
    const pics = service.storage.from("pics");
    const png = await sharp({ create: { width: 40, height: 20, channels: 3, background: "#3366cc" } })
      .png()
      .toBuffer();
    await pics.upload("wide.png", png, { contentType: "image/png" });
    await pics.upload("note.txt", "not an image", { contentType: "text/plain" });
    const transform = { width: 10, height: 10, resize: "cover" as const };

    const off = await pics.download("wide.png", { transform });
    expect(off.error).toMatchObject({ statusCode: "409" });
    await mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/storage`, {
      body: { features: { imageTransformation: { enabled: true } } },
    });

    const cover = await pics.download("wide.png", { transform });
    expect(await sharp(await blobBytes(cover.data!)).metadata()).toMatchObject({ width: 10, height: 10 });
    const contain = await pics.download("wide.png", {
      transform: { width: 10, height: 10, resize: "contain" },
    });
    expect(await sharp(await blobBytes(contain.data!)).metadata()).toMatchObject({ width: 10, height: 5 });
    const webp = await pics.download("wide.png", { transform: { width: 20, format: "webp" as never } });
    expect(webp.data!.type).toBe("image/webp");
    expect(await sharp(await blobBytes(webp.data!)).metadata()).toMatchObject({ format: "webp", width: 20 });

    const signed = await pics.createSignedUrl("wide.png", 60, {
      transform: { width: 8, height: 4, resize: "fill" },
    });
    expect(signed.data!.signedUrl).toContain("/render/image/sign/pics/wide.png?token=");
    const viaSigned = Buffer.from(await (await fetch(signed.data!.signedUrl)).arrayBuffer());
    expect(await sharp(viaSigned).metadata()).toMatchObject({ width: 8, height: 4 });
    const publicUrl = pics.getPublicUrl("wide.png", { transform: { width: 5, height: 5 } }).data.publicUrl;
    const viaPublic = Buffer.from(await (await fetch(publicUrl)).arrayBuffer());
    expect(await sharp(viaPublic).metadata()).toMatchObject({ width: 5, height: 5 });

    const text = await pics.download("note.txt", { transform });
    expect(text.error).toMatchObject({ statusCode: "400" });
    // The stored original is untouched.
    expect(sha256(await blobBytes((await pics.download("wide.png")).data!))).toBe(sha256(png));
  });

  it("replaces an object with upsert or update and drops the replaced bytes; without upsert a taken name is 409", async () => {
    await service.storage.createBucket("notes");
    const notes = service.storage.from("notes");
    await notes.upload("n.txt", "first", { contentType: "text/plain" });
    const first = (await objectRow("notes", "n.txt"))!;
    const taken = await notes.upload("n.txt", "second");
    expect(taken.error).toMatchObject({ message: "The resource already exists", statusCode: "409" });
    expect((await objectRow("notes", "n.txt"))!.version).toBe(first.version);

    expect(
      (await notes.upload("n.txt", "second", { upsert: true, contentType: "text/plain" })).error,
    ).toBeNull();
    const second = (await objectRow("notes", "n.txt"))!;
    expect(second.id).toBe(first.id);
    expect(await backend.holds(server, first.version)).toBe(false);
    expect(await (await notes.download("n.txt")).data!.text()).toBe("second");

    expect((await notes.update("n.txt", "third", { contentType: "text/plain" })).error).toBeNull();
    expect(await (await notes.download("n.txt")).data!.text()).toBe("third");
    const missing = await notes.update("none.txt", "x");
    expect(missing.error).toMatchObject({ statusCode: "404" });
    expect(await objectRow("notes", "none.txt")).toBeUndefined();
  });

  it("serves signed URLs without a key until they expire; an altered token or another path is refused", async () => {
    await service.storage.createBucket("private");
    await service.storage.from("private").upload("s.txt", "signed body", { contentType: "text/plain" });
    const long = await service.storage
      .from("private")
      .createSignedUrl("s.txt", 600, { download: "named.txt" });
    const res = await fetch(long.data!.signedUrl);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("signed body");
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename=named\.txt/);

    const url = new URL(long.data!.signedUrl);
    const token = url.searchParams.get("token")!;
    const tampered = new URL(url);
    tampered.searchParams.set("token", token.slice(0, -2) + (token.endsWith("A") ? "BB" : "AA"));
    const refused = await fetch(tampered);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ statusCode: "400", code: "InvalidJWT" });

    await service.storage.from("private").upload("other.txt", "other", { contentType: "text/plain" });
    const elsewhere = new URL(url);
    elsewhere.pathname = elsewhere.pathname.replace("s.txt", "other.txt");
    expect((await fetch(elsewhere)).status).toBe(400);

    const short = await service.storage.from("private").createSignedUrl("s.txt", 1);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const expired = await fetch(short.data!.signedUrl);
    expect(expired.status).toBe(400);
    expect(((await expired.json()) as { message: string }).message).toMatch(/exp/);

    const many = await service.storage.from("private").createSignedUrls(["s.txt", "nope.txt"], 60);
    expect(many.data?.map((d) => d.error)).toEqual([
      null,
      "Either the object does not exist or you do not have access to it",
    ]);
  });

  it("takes an upload at a signed upload URL without a policy, owned by the signer", async () => {
    await service.storage.createBucket("inbox");
    const { id, client } = await userClient();
    await server.sql(
      `create policy "inbox users upload" on storage.objects for insert to authenticated with check (bucket_id = 'inbox')`,
    );
    const signed = await client.storage.from("inbox").createSignedUploadUrl(`${id}/cat.bin`);
    expect(signed.error).toBeNull();
    const up = await anon.storage
      .from("inbox")
      .uploadToSignedUrl(`${id}/cat.bin`, signed.data!.token, Buffer.from("meow"), {
        contentType: "application/octet-stream",
      });
    expect(up.error).toBeNull();
    expect((await objectRow("inbox", `${id}/cat.bin`))!.owner_id).toBe(id);
    // Without an insert policy for anon, anon cannot sign one for itself.
    const refused = await anon.storage.from("inbox").createSignedUploadUrl("anon/cat.bin");
    expect(refused.error).toMatchObject({ statusCode: "403" });
  });

  it("serves a public bucket's objects without any key, and a private bucket's not at all", async () => {
    await service.storage.createBucket("open", { public: true });
    await service.storage.createBucket("closed", { public: false });
    await service.storage.from("open").upload("p.txt", "public", { contentType: "text/plain" });
    await service.storage.from("closed").upload("p.txt", "private", { contentType: "text/plain" });
    const open = await fetch(service.storage.from("open").getPublicUrl("p.txt").data.publicUrl);
    expect(open.status).toBe(200);
    expect(await open.text()).toBe("public");
    // A page among a project's files cannot act as the API's origin (the Studio's session lives there).
    expect(open.headers.get("content-security-policy")).toBe("sandbox");
    expect(open.headers.get("x-content-type-options")).toBe("nosniff");
    const closed = await fetch(service.storage.from("closed").getPublicUrl("p.txt").data.publicUrl);
    expect(closed.status).toBe(400);
    expect(await closed.json()).toMatchObject({ statusCode: "404", message: "Bucket not found" });
  });

  it("lets RLS policies keep two users' files apart", async () => {
    await service.storage.createBucket("homes");
    await server.sql(`
      create policy "homes insert own" on storage.objects for insert to authenticated
        with check (bucket_id = 'homes' and (storage.foldername(name))[1] = auth.uid()::text);
      create policy "homes read own" on storage.objects for select to authenticated
        using (bucket_id = 'homes' and owner_id = auth.uid()::text);
      create policy "homes delete own" on storage.objects for delete to authenticated
        using (bucket_id = 'homes' and owner_id = auth.uid()::text);
    `);
    const alice = await userClient();
    const bob = await userClient();
    const aliceFiles = alice.client.storage.from("homes");
    const bobFiles = bob.client.storage.from("homes");
    expect(
      (await aliceFiles.upload(`${alice.id}/a.txt`, "alice's", { contentType: "text/plain" })).error,
    ).toBeNull();
    expect(
      (await bobFiles.upload(`${bob.id}/b.txt`, "bob's", { contentType: "text/plain" })).error,
    ).toBeNull();
    const intruder = await bobFiles.upload(`${alice.id}/evil.txt`, "x", { contentType: "text/plain" });
    expect(intruder.error).toMatchObject({
      message: "new row violates row-level security policy",
      statusCode: "403",
    });
    expect(await objectRow("homes", `${alice.id}/evil.txt`)).toBeUndefined();

    expect((await aliceFiles.list(alice.id)).data?.map((e) => e.name)).toEqual(["a.txt"]);
    expect((await bobFiles.list(alice.id)).data).toEqual([]);
    expect((await bobFiles.download(`${alice.id}/a.txt`)).error).toMatchObject({ statusCode: "404" });
    expect((await bobFiles.remove([`${alice.id}/a.txt`])).data).toEqual([]);
    expect(await objectRow("homes", `${alice.id}/a.txt`)).toBeDefined();
    expect(await (await aliceFiles.download(`${alice.id}/a.txt`)).data!.text()).toBe("alice's");
    expect((await anon.storage.from("homes").list(alice.id)).data).toEqual([]);
  });

  it("enforces the bucket's size and media types and the project's fileSizeLimit, leaving nothing behind", async () => {
    await service.storage.createBucket("limited", {
      public: false,
      fileSizeLimit: 10,
      allowedMimeTypes: ["image/*"],
    });
    const limited = service.storage.from("limited");
    const big = await limited.upload("big.png", Buffer.alloc(11), { contentType: "image/png" });
    expect(big.error).toMatchObject({
      message: "The object exceeded the maximum allowed size",
      statusCode: "413",
    });
    const form = await limited.upload("big2.png", new Blob([Buffer.alloc(11)], { type: "image/png" }));
    expect(form.error).toMatchObject({ statusCode: "413" });
    const text = await limited.upload("t.txt", Buffer.alloc(3), { contentType: "text/plain" });
    expect(text.error).toMatchObject({ message: "mime type text/plain is not supported", statusCode: "415" });
    expect((await limited.upload("ok.png", Buffer.alloc(10), { contentType: "image/png" })).error).toBeNull();

    await service.storage.createBucket("roomy");
    expect(
      (
        await mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/storage`, {
          body: { fileSizeLimit: 5 },
        })
      ).status,
    ).toBe(200);
    const overGlobal = await service.storage.from("roomy").upload("six.bin", Buffer.alloc(6));
    expect(overGlobal.error).toMatchObject({ statusCode: "413" });
    await mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/storage`, {
      body: { fileSizeLimit: 52428800 },
    });
    const { rows } = await server.sql(
      "select name from storage.objects where bucket_id in ('limited', 'roomy') order by name",
    );
    expect(rows).toEqual([{ name: "ok.png" }]);
    const managed = await mgmt(server, "GET", `/v1/projects/${server.ref}/storage/buckets`);
    expect(managed.body.map((b: { id: string }) => b.id)).toEqual(
      expect.arrayContaining(["limited", "roomy"]),
    );
  });

  it("refuses hostile names and bodies with a 4xx and changes nothing", async () => {
    await service.storage.createBucket("safe");
    const count = async () =>
      (await server.sql("select count(*)::int as n from storage.objects where bucket_id = 'safe'")).rows[0].n;
    const post = (p: string, body: string = "x", headers: Record<string, string> = {}) =>
      fetch(`${server.url}/storage/v1/object/${p}`, {
        method: "POST",
        headers: { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}`, ...headers },
        body,
      });
    for (const hostile of [
      "safe/../x.txt",
      "safe/a/%2e%2e/%2e%2e/x.txt",
      "safe/a%2Fb.txt",
      "safe/a%00b.txt",
      "safe/a%5Cb.txt",
      `safe/${"n".repeat(1025)}`,
      "safe/a//b.txt",
    ]) {
      const res = await post(hostile);
      expect([400, 404]).toContain(res.status);
      expect(await res.json()).toHaveProperty("statusCode");
    }
    const injected = await service.storage.createBucket("x'; drop table storage.objects; --");
    expect(injected.error).toMatchObject({ statusCode: "400", message: "Bucket name invalid" });
    expect((await service.storage.createBucket("../up")).error).toMatchObject({ statusCode: "400" });
    expect(await count()).toBe(0);
    expect(
      (await server.sql("select to_regclass('storage.objects') is not null as present")).rows[0].present,
    ).toBe(true);

    // A body shorter than its declared length, cut off half way: no row, no bytes.
    const filesBefore = storedFileCount(server);
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(new URL(server.url).port), "127.0.0.1", () => {
        socket.write(
          `POST /storage/v1/object/safe/cut.bin HTTP/1.1\r\nHost: localhost\r\napikey: ${server.serviceKey}\r\n` +
            `Authorization: Bearer ${server.serviceKey}\r\nContent-Type: application/octet-stream\r\n` +
            `Content-Length: 100000\r\n\r\n` +
            "x".repeat(50000),
        );
        setTimeout(() => socket.destroy(), 300);
      });
      socket.on("close", () => resolve());
      socket.on("error", () => resolve());
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await objectRow("safe", "cut.bin")).toBeUndefined();
    expect(storedFileCount(server)).toBe(filesBefore);

    const notJson = await fetch(`${server.url}/storage/v1/bucket`, {
      method: "POST",
      headers: { apikey: server.serviceKey, "content-type": "application/json" },
      body: "{not json",
    });
    expect(notJson.status).toBe(400);
    const noKey = await fetch(`${server.url}/storage/v1/bucket`);
    expect(noKey.status).toBe(401);
  });

  it("streams a 100 MB upload and download: the first bytes are stored before the last are sent", async () => {
    await service.storage.createBucket("big");
    // The platform's default limit is 50 MB: the project raises it, and the next upload obeys.
    await mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/storage`, {
      body: { fileSizeLimit: 200 * 1024 * 1024 },
    });
    const size = 100 * 1024 * 1024;
    const chunk = 256 * 1024;
    const hash = createHash("sha256");
    let sent = 0;
    // On disk, how much of the object was written when 80 MB had been sent: a server that held the body in
    // memory would have written nothing yet.
    let storedMidway = -1;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 80 * 1024 * 1024 && backend === disk) storedMidway = partialBytes(server);
        if (sent >= size) {
          controller.close();
          return;
        }
        const part = Buffer.alloc(chunk, sent / chunk);
        hash.update(part);
        sent += chunk;
        controller.enqueue(part);
      },
    });
    const up = await service.storage.from("big").upload("blob.bin", body, {
      contentType: "application/octet-stream",
      duplex: "half",
    });
    expect(up.error).toBeNull();
    if (backend === disk) expect(storedMidway).toBeGreaterThan(40 * 1024 * 1024);

    const res = await fetch(`${server.url}/storage/v1/object/authenticated/big/blob.bin`, {
      headers: { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}` },
    });
    const downloaded = createHash("sha256");
    let received = 0;
    for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
      downloaded.update(part);
      received += part.length;
    }
    const expected = hash.digest("hex");
    expect(received).toBe(size);
    expect(downloaded.digest("hex")).toBe(expected);
    const row = (await objectRow("big", "blob.bin"))!;
    expect(row.metadata.size).toBe(size);
    expect(await backend.holds(server, row.version)).toBe(true);
    if (backend === disk) {
      const file = path.join(server.strata.ctx.config.dataDir, "storage", server.ref, row.version);
      expect(statSync(file).size).toBe(size);
      const onDisk = createHash("sha256");
      for await (const part of createReadStream(file)) onDisk.update(part as Buffer);
      expect(onDisk.digest("hex")).toBe(expected);
    }
  });
});

/** Bytes of the uploads still being written (their `.part` files). */
function partialBytes(server: TestServer): number {
  const dir = path.join(server.strata.ctx.config.dataDir, "storage", server.ref);
  if (!existsSync(dir)) return 0;
  return readdirSync(dir)
    .filter((f) => f.endsWith(".part"))
    .reduce((sum, f) => sum + statSync(path.join(dir, f)).size, 0);
}

/** Files under the data directory's storage folder (bytes and partial writes). */
function storedFileCount(server: TestServer): number {
  const dir = path.join(server.strata.ctx.config.dataDir, "storage", server.ref);
  return existsSync(dir) ? readdirSync(dir).length : 0;
}

describe("Resumable (TUS) uploads", () => {
  let server: TestServer;
  let service: SupabaseClient;
  beforeAll(async () => {
    server = await startTestServer();
    service = clientFor(server, server.serviceKey);
  });
  afterAll(() => server.stop());

  const endpoint = () => `${server.url}/storage/v1/upload/resumable`;
  const headersFor = (token: string) => ({ apikey: server.anonKey, authorization: `Bearer ${token}` });

  /** Starts a tus-js-client upload; resolves with its URL once `stopAfter` bytes were sent (then aborts). */
  function tusUpload(
    data: Buffer,
    options: { token: string; bucket: string; name: string; uploadUrl?: string; stopAfter?: number },
  ): Promise<{ url: string | null; done: boolean; error?: Error }> {
    return new Promise((resolve) => {
      const upload: tus.Upload = new tus.Upload(data, {
        endpoint: endpoint(),
        uploadUrl: options.uploadUrl,
        headers: headersFor(options.token),
        chunkSize: 256 * 1024,
        retryDelays: [],
        metadata: {
          bucketName: options.bucket,
          objectName: options.name,
          contentType: "application/octet-stream",
        },
        onProgress(sent) {
          if (options.stopAfter && sent >= options.stopAfter) {
            void upload.abort().then(() => resolve({ url: upload.url, done: false }));
          }
        },
        onSuccess: () => resolve({ url: upload.url, done: true }),
        onError: (error) => resolve({ url: upload.url, done: false, error }),
      });
      upload.start();
    });
  }

  it("resumes an interrupted upload where it stopped and stores the whole file once, for its owner only", async () => {
    await service.storage.createBucket("uploads");
    await server.sql(`
      create policy "uploads insert" on storage.objects for insert to authenticated with check (bucket_id = 'uploads');
      create policy "uploads read own" on storage.objects for select to authenticated using (owner_id = auth.uid()::text);
    `);
    const alice = randomUUID();
    const token = await userToken(server, alice);
    const data = Buffer.alloc(2 * 1024 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31) % 251;

    const first = await tusUpload(data, {
      token,
      bucket: "uploads",
      name: "big/file.bin",
      stopAfter: 700 * 1024,
    });
    expect(first.done).toBe(false);
    expect(await objectCount(server, "uploads")).toBe(0);

    // Another user cannot look at or continue it.
    const bob = await userToken(server, randomUUID());
    const peek = await fetch(first.url!, {
      method: "HEAD",
      headers: { ...headersFor(bob), "tus-resumable": "1.0.0" },
    });
    expect(peek.status).toBe(404);

    const head = await fetch(first.url!, {
      method: "HEAD",
      headers: { ...headersFor(token), "tus-resumable": "1.0.0" },
    });
    const offset = Number(head.headers.get("upload-offset"));
    expect(offset).toBeGreaterThan(0);
    expect(offset).toBeLessThan(data.length);

    const resumed = await tusUpload(data, {
      token,
      bucket: "uploads",
      name: "big/file.bin",
      uploadUrl: first.url!,
    });
    expect(resumed.error).toBeUndefined();
    expect(resumed.done).toBe(true);
    const { rows } = await server.sql(
      "select owner_id, (metadata->>'size')::int as size from storage.objects where bucket_id = 'uploads'",
    );
    expect(rows).toEqual([{ owner_id: alice, size: data.length }]);
    const client = clientFor(server, server.anonKey, token);
    const down = await client.storage.from("uploads").download("big/file.bin");
    expect(sha256(await blobBytes(down.data!))).toBe(sha256(data));
  });

  it("refuses at creation an upload the bucket's limit or the caller's policies would refuse", async () => {
    await service.storage.createBucket("small", { public: false, fileSizeLimit: 1000 });
    const token = await userToken(server, randomUUID());
    const tooBig = await fetch(endpoint(), {
      method: "POST",
      headers: {
        ...headersFor(server.serviceKey),
        "tus-resumable": "1.0.0",
        "upload-length": "1001",
        "upload-metadata": `bucketName ${Buffer.from("small").toString("base64")},objectName ${Buffer.from("x.bin").toString("base64")}`,
      },
    });
    expect(tooBig.status).toBe(413);
    expect(await tooBig.json()).toMatchObject({
      statusCode: "413",
      message: "The object exceeded the maximum allowed size",
    });
    const refused = await tusUpload(Buffer.alloc(10), { token, bucket: "small", name: "x.bin" });
    expect(refused.done).toBe(false);
    expect(String(refused.error)).toMatch(/row-level security/);
    expect(await objectCount(server, "small")).toBe(0);
  });
});

async function objectCount(server: TestServer, bucket: string): Promise<number> {
  const { rows } = await server.sql("select count(*)::int as n from storage.objects where bucket_id = $1", [
    bucket,
  ]);
  return rows[0].n;
}
