import type { NextFunction, Request, Response } from "express";

/**
 * CORS of the data APIs: any origin, the clients' methods, the headers a preflight asks for, and the response
 * headers a browser app may read. The headers are fixed, so they are written as they are, without a CORS
 * library's per-request option callbacks (the same answers the `cors` package gives for these options).
 */
const METHODS = "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS";
const EXPOSED = [
  "content-range",
  "content-profile",
  "content-disposition",
  "content-length",
  "content-type",
  "etag",
  "link",
  "location",
  "preference-applied",
  "range-unit",
  "x-total-count",
  "sb-error-code",
].join(",");
const MAX_AGE = "86400";

export function dataCors(req: Request, res: Response, next: NextFunction): void {
  res.setHeader("Access-Control-Allow-Origin", "*");
  if (req.method !== "OPTIONS") {
    res.setHeader("Access-Control-Expose-Headers", EXPOSED);
    return next();
  }
  // A preflight: answered here, 204 with no body.
  res.setHeader("Access-Control-Allow-Methods", METHODS);
  res.vary("Access-Control-Request-Headers");
  const asked = req.headers["access-control-request-headers"];
  if (asked) res.setHeader("Access-Control-Allow-Headers", asked);
  res.setHeader("Access-Control-Max-Age", MAX_AGE);
  res.setHeader("Access-Control-Expose-Headers", EXPOSED);
  res.statusCode = 204;
  res.setHeader("Content-Length", "0");
  res.end();
}
