import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { mailed, type AuthCall } from "../call";
import { email, parse, pkceFields, pkceOf } from "../input";
import { issueToken } from "../otp";
import { redirectTarget } from "../redirects";
import { userByEmail } from "../store/users";

/** POST /recover (auth-js resetPasswordForEmail): a recovery link and code by mail. */

const recoverBody = z.object({ email, ...pkceFields });

export async function recover(call: AuthCall) {
  const { project, req, settings } = call;
  const body = parse(recoverBody, req.body);
  const pkce = pkceOf(body);
  const redirectTo = redirectTarget(settings, req.query.redirect_to);
  await withAdminTransaction(project.authPool, async (db) => {
    const user = await userByEmail(db, body.email);
    // No mail and the same answer for an unknown address: nothing to learn about who has an account.
    if (!user) return;
    await issueToken(db, settings, user, "recovery", mailed(call, redirectTo, pkce));
  });
  return {};
}
