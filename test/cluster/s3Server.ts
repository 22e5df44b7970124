import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import S3rver from "s3rver";
import { testTempDir } from "../helpers/tempDir";

/**
 * An S3-compatible server for the cluster test: s3rver (the suite's S3 server) behind a small front that
 * answers the multipart calls s3rver 3.7 lacks and `@tus/s3-store` makes: ListParts (s3rver answers 405),
 * AbortMultipartUpload (405) and ListMultipartUploads (501). The front records each multipart upload s3rver
 * begins and each part it stores (from s3rver's own answers), and forwards everything else unchanged. A
 * real S3-compatible server (MinIO, Garage, AWS) answers these calls itself.
 */

interface Part {
  number: number;
  etag: string;
  size: number;
  at: Date;
}

interface MultipartUpload {
  key: string;
  initiated: Date;
  parts: Map<number, Part>;
}

export interface S3TestServer {
  endpoint: string;
  env: Record<string, string>;
  stop(): Promise<void>;
}

const xml = (body: string) => `<?xml version="1.0" encoding="UTF-8"?>\n${body}`;
const NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"';

function noSuchUpload(res: ServerResponse): void {
  res.writeHead(404, { "content-type": "application/xml" });
  res.end(
    xml("<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>"),
  );
}

export async function startS3Server(bucket: string): Promise<S3TestServer> {
  const s3rver = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory: testTempDir("strata-s3-"),
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  const { port: backPort } = await s3rver.run();
  const uploads = new Map<string, MultipartUpload>();

  /** Forwards the request to s3rver; `seen` gets its answer's status, headers and body before the client. */
  function forward(
    req: IncomingMessage,
    res: ServerResponse,
    seen?: (status: number, headers: IncomingMessage["headers"], body: Buffer) => void,
  ): void {
    const back = request(
      { host: "127.0.0.1", port: backPort, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on("data", (c: Buffer) => chunks.push(c));
        answer.on("end", () => {
          const body = Buffer.concat(chunks);
          seen?.(answer.statusCode ?? 500, answer.headers, body);
          res.writeHead(answer.statusCode ?? 500, answer.headers);
          res.end(body);
        });
      },
    );
    back.on("error", () => res.destroy());
    req.pipe(back);
  }

  const front: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://s3");
    const [, , ...keyParts] = url.pathname.split("/");
    const key = decodeURIComponent(keyParts.join("/"));
    const q = url.searchParams;
    const uploadId = q.get("uploadId");
    const known = uploadId ? uploads.get(uploadId) : undefined;

    if (req.method === "POST" && q.has("uploads"))
      return forward(req, res, (status, _h, body) => {
        const id = /<UploadId>([^<]+)<\/UploadId>/.exec(body.toString())?.[1];
        if (status === 200 && id) uploads.set(id, { key, initiated: new Date(), parts: new Map() });
      });
    if (req.method === "PUT" && uploadId && q.has("partNumber")) {
      if (!known) return noSuchUpload(res);
      const number = Number(q.get("partNumber"));
      const size = Number(req.headers["x-amz-decoded-content-length"] ?? req.headers["content-length"]);
      return forward(req, res, (status, headers) => {
        if (status === 200)
          known.parts.set(number, { number, etag: String(headers.etag), size, at: new Date() });
      });
    }
    if (req.method === "POST" && uploadId) {
      if (!known) return noSuchUpload(res);
      return forward(req, res, (status) => {
        if (status === 200) uploads.delete(uploadId);
      });
    }
    if (req.method === "GET" && uploadId) {
      req.resume();
      if (!known) return noSuchUpload(res);
      const parts = [...known.parts.values()]
        .sort((a, b) => a.number - b.number)
        .map(
          (p) =>
            `<Part><PartNumber>${p.number}</PartNumber><LastModified>${p.at.toISOString()}</LastModified>` +
            `<ETag>${p.etag.replace(/"/g, "&quot;")}</ETag><Size>${p.size}</Size></Part>`,
        );
      res.writeHead(200, { "content-type": "application/xml" });
      return res.end(
        xml(
          `<ListPartsResult ${NS}><Bucket>${bucket}</Bucket><Key>${known.key}</Key><UploadId>${uploadId}</UploadId>` +
            `<IsTruncated>false</IsTruncated>${parts.join("")}</ListPartsResult>`,
        ),
      );
    }
    if (req.method === "DELETE" && uploadId) {
      req.resume();
      if (!known) return noSuchUpload(res);
      uploads.delete(uploadId);
      res.writeHead(204);
      return res.end();
    }
    if (req.method === "GET" && q.has("uploads") && !key) {
      req.resume();
      const listed = [...uploads.entries()].map(
        ([id, u]) =>
          `<Upload><Key>${u.key}</Key><UploadId>${id}</UploadId><Initiated>${u.initiated.toISOString()}</Initiated></Upload>`,
      );
      res.writeHead(200, { "content-type": "application/xml" });
      return res.end(
        xml(
          `<ListMultipartUploadsResult ${NS}><Bucket>${bucket}</Bucket><IsTruncated>false</IsTruncated>${listed.join("")}</ListMultipartUploadsResult>`,
        ),
      );
    }
    forward(req, res);
  });
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  return {
    endpoint,
    env: {
      STORAGE_S3_BUCKET: bucket,
      STORAGE_S3_ENDPOINT: endpoint,
      STORAGE_S3_ACCESS_KEY_ID: "S3RVER",
      STORAGE_S3_SECRET_ACCESS_KEY: "S3RVER",
    },
    async stop() {
      front.closeAllConnections();
      await new Promise((resolve) => front.close(resolve));
      await s3rver.close();
    },
  };
}
