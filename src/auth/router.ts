import { Router } from "express";
import type { AppContext } from "../context";

/** `/auth/v1`: JWKS, users, sessions, as the platform's auth client calls them. */
export function authRouter(_ctx: AppContext): Router {
  const router = Router();
  return router;
}
