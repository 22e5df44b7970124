import type { Readable } from "node:stream";
import type Sharp from "sharp";
import { invalidRequest, StorageError } from "./errors";

/**
 * Image transformation (`/render/image/...`), as the platform offers it: width and height (1-2500),
 * `resize` cover (crop to fill, the default), contain (fit inside) or fill (stretch), `quality` (20-100) and
 * `format` origin, webp or avif. Done with sharp (libvips), streaming from the stored bytes; the project
 * turns it on with `features.imageTransformation.enabled` in its storage config.
 */
export interface Transformations {
  width?: number;
  height?: number;
  resize?: "cover" | "contain" | "fill";
  quality?: number;
  format?: "origin" | "webp" | "avif";
}

const SIZE = { min: 1, max: 2500 };
const FIT = { cover: "cover", contain: "inside", fill: "fill" } as const;

function integerIn(value: unknown, name: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0)
    throw invalidRequest(`${name} must be a whole number`);
  return n === 0 ? undefined : Math.min(Math.max(n, min), max);
}

/** Transformations from a query string or a signed token's claims; refuses values outside the platform's set. */
export function transformationsOf(source: Record<string, unknown>): Transformations {
  const t: Transformations = {
    width: integerIn(source.width, "width", SIZE.min, SIZE.max),
    height: integerIn(source.height, "height", SIZE.min, SIZE.max),
    quality: integerIn(source.quality, "quality", 20, 100),
  };
  if (source.resize !== undefined && source.resize !== "") {
    if (source.resize !== "cover" && source.resize !== "contain" && source.resize !== "fill") {
      throw invalidRequest("resize must be one of cover, contain, fill");
    }
    t.resize = source.resize;
  }
  if (source.format !== undefined && source.format !== "") {
    if (source.format !== "origin" && source.format !== "webp" && source.format !== "avif") {
      throw invalidRequest("format must be one of origin, avif, webp");
    }
    t.format = source.format;
  }
  return t;
}

export function hasTransformations(t: Transformations): boolean {
  return Object.values(t).some((v) => v !== undefined);
}

/** The transformed image as a stream, and its media type. */
/** sharp (libvips) is loaded with the first transformation: a server that transforms no image never holds it. */
let sharpLibrary: typeof Sharp | undefined;
const sharp = (options: Sharp.SharpOptions) => (sharpLibrary ??= require("sharp") as typeof Sharp)(options);

export function transform(
  input: Readable,
  contentType: string,
  t: Transformations,
): { stream: Readable; contentType: string } {
  const image = sharp({ failOn: "error" });
  if (t.width || t.height) {
    image.resize({
      width: t.width,
      height: t.height,
      fit: FIT[t.resize ?? "cover"],
      withoutEnlargement: false,
    });
  }
  let type = contentType;
  if (t.format === "webp") {
    image.webp({ quality: t.quality ?? 80 });
    type = "image/webp";
  } else if (t.format === "avif") {
    image.avif({ quality: t.quality ?? 80 });
    type = "image/avif";
  } else if (t.quality) {
    if (/jpe?g/.test(contentType)) image.jpeg({ quality: t.quality });
    else if (/webp/.test(contentType)) image.webp({ quality: t.quality });
    else if (/png/.test(contentType)) image.png({ quality: t.quality });
  }
  input.on("error", (e) => image.destroy(e));
  return { stream: input.pipe(image), contentType: type };
}

export const notAnImage = () =>
  new StorageError(
    400,
    "InvalidRequest",
    "InvalidRequest",
    "The object is not an image that can be transformed",
  );

export const transformationsOff = () =>
  new StorageError(
    409,
    "FeatureNotEnabled",
    "FeatureNotEnabled",
    "The feature imageTransformation is not enabled for this resource",
  );
