import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { userProfile } from "../organizations/store";
import { routeTable } from "../route";

const profile = z.object({
  authsvc_id: z.string(),
  /** The product's name for `authsvc_id`. */
  gotrue_id: z.string(),
  primary_email: z.string(),
  username: z.string(),
});

/** The caller's own profile. */
export function profileRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  routes.get(
    "/v1/profile",
    "Gets the profile of the token's user",
    { access: {}, status: 200, response: profile },
    async ({ req }) => {
      const user = await userProfile(ctx.platformPool, req.principal!.userId);
      return { authsvc_id: user.id, gotrue_id: user.id, primary_email: user.email, username: user.username };
    },
  );
  return routes.router;
}
