import { Router } from "express";
import type { AppContext } from "../context";

/** `/rest/v1`: the PostgREST-compatible REST route (parse → plan → sql → respond). */
export function restRouter(_ctx: AppContext): Router {
  const router = Router();
  return router;
}
