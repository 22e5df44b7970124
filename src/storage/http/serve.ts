import type { Request, Response } from "express";
import { TENANT_CONTENT_POLICY } from "../../http/tenantContent";
import type { ByteRange } from "../backend/types";
import { invalidRange } from "../errors";
import { notAnImage, transform, type Transformations } from "../images";
import type { ObjectRow } from "../store";
import type { ProjectInput } from "./route";

/** What serving needs of a route's input. */
type Serving = Pick<ProjectInput, "req" | "res" | "service" | "project">;

/** The headers every served object or image carries; `?download[=name]` makes it an attachment. */
function setServedHeaders(
  req: Request,
  res: Response,
  contentType: string,
  cacheControl: string | undefined,
) {
  res.setHeader("content-type", contentType);
  res.setHeader("cache-control", cacheControl ?? "no-cache");
  res.setHeader("x-robots-tag", "none");
  res.setHeader("content-security-policy", TENANT_CONTENT_POLICY);
  res.setHeader("x-content-type-options", "nosniff");
  const download = req.query.download;
  if (typeof download === "string") {
    const encoded = encodeURIComponent(download);
    res.setHeader(
      "content-disposition",
      download ? `attachment; filename=${encoded}; filename*=UTF-8''${encoded}` : "attachment;",
    );
  }
}

/** `Range: bytes=a-b` (one range) within `size`; undefined for the whole object; 416 when unsatisfiable. */
function rangeOf(header: string | undefined, size: number): ByteRange | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  let start: number;
  let end: number;
  if (m[1] === "") {
    start = Math.max(size - Number(m[2]), 0);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start > end || start >= size) throw invalidRange();
  return { start, end };
}

/** Streams an object with its stored headers, a range of it, or only the headers (HEAD, a matching ETag). */
export async function serveObject({ req, res, service, project }: Serving, row: ObjectRow) {
  const meta = row.metadata;
  const size = meta?.size ?? 0;
  const range = rangeOf(req.headers.range, size);
  setServedHeaders(req, res, meta?.mimetype ?? "application/octet-stream", meta?.cacheControl);
  if (meta?.eTag) res.setHeader("etag", meta.eTag);
  if (meta?.lastModified) res.setHeader("last-modified", new Date(meta.lastModified).toUTCString());
  res.setHeader("accept-ranges", "bytes");
  if (meta?.eTag && req.headers["if-none-match"] === meta.eTag) {
    res.status(304).end();
    return;
  }
  if (range) {
    res.status(206);
    res.setHeader("content-range", `bytes ${range.start}-${range.end}/${size}`);
  }
  res.setHeader("content-length", String(range ? range.end - range.start + 1 : size));
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  const bytes = await service.bytesOf(project, row, range);
  bytes.on("error", () => res.destroy());
  bytes.pipe(res);
}

/** Streams a transformed image; an object that is not an image, or does not decode, is a 400. */
export async function serveImage(
  { req, res, service, project }: Serving,
  row: ObjectRow,
  t: Transformations,
) {
  const meta = row.metadata;
  if (!meta?.mimetype.startsWith("image/")) throw notAnImage();
  const { stream, contentType } = transform(await service.bytesOf(project, row), meta.mimetype, t);
  // Headers go out once the image decoded: a broken image is still an answer, not a cut connection.
  await new Promise<void>((resolve, reject) => {
    stream.once("readable", resolve);
    stream.once("error", () => reject(notAnImage()));
  });
  setServedHeaders(req, res, contentType, meta.cacheControl);
  stream.on("error", () => res.destroy());
  stream.pipe(res);
}
