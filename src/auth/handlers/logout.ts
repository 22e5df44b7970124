import { z } from "zod";
import type { UserCall } from "../call";
import { endSessions } from "../store/sessions";

/** POST /logout (auth-js signOut): ends this session (`local`), the user's others, or all of them (`global`). */
export async function logout({ project, req, res, caller: { user, sessionId } }: UserCall) {
  const scope = z.enum(["global", "local", "others"]).catch("global").parse(req.query.scope);
  if (user && sessionId) await endSessions(project.authPool, user.id, sessionId, scope);
  res.status(204).end();
}
