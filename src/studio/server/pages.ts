import { existsSync } from "node:fs";
import path from "node:path";
import express, { type RequestHandler } from "express";
import type { AppContext } from "../../context";

/**
 * The built dashboard (`npm run build:studio` → dist/studio): hashed assets under /studio/assets with a long
 * cache, and its one HTML page for every page path of the dashboard (the browser's router takes it from there).
 */

/** The package's root: the nearest folder above this file with a package.json (from src/ or from dist/src/). */
function packageRoot(dir: string): string {
  return existsSync(path.join(dir, "package.json")) ? dir : packageRoot(path.dirname(dir));
}

/** Where `npm run build:studio` writes the dashboard. */
export const STUDIO_DIST = path.join(packageRoot(__dirname), "dist/studio");

/** The dashboard's page paths, as the platform's: /, /sign-in, /join, /projects, /org/<slug>/..., /project/<ref>/... */
export const PAGE_PATH = /^\/(?:sign-in|join|projects|org\/[^/]+(?:\/.*)?|project\/[^/]+(?:\/.*)?)?\/?$/;

/**
 * The page's policy: scripts and styles from this origin only (the editor and charts set inline styles), data
 * calls to this origin and to the projects' hosts (`<ref>.<STRATA_DOMAIN>`), never framed by another page.
 */
function pagePolicy(ctx: AppContext): string {
  const projects = `*.${ctx.config.domain}:*`;
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    `img-src 'self' data: blob: ${projects}`,
    `media-src 'self' blob: ${projects}`,
    `connect-src 'self' ${projects} ws://${projects} wss://${projects}`,
    "font-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export function studioAssets(): RequestHandler {
  return express.static(path.join(STUDIO_DIST, "assets"), {
    immutable: true,
    maxAge: "365d",
    index: false,
    redirect: false,
    fallthrough: false,
  });
}

export function studioPage(ctx: AppContext): RequestHandler {
  const policy = pagePolicy(ctx);
  const page = path.join(STUDIO_DIST, "index.html");
  return (_req, res) => {
    // Checked per request: a build that finishes after the server started is served.
    if (!existsSync(page)) {
      res.status(503).json({ message: "The dashboard is not built: run `npm run build:studio`" });
      return;
    }
    res.setHeader("Cache-Control", "no-cache");
    res.setHeader("Content-Security-Policy", policy);
    res.setHeader("X-Frame-Options", "DENY");
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Referrer-Policy", "same-origin");
    res.sendFile(page);
  };
}
