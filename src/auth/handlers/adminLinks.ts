import type pg from "pg";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { mailed, type AuthCall } from "../call";
import { AuthApiError, emailExists, userNotFound } from "../errors";
import { afterUserCreated, beforeUserCreated } from "../hook";
import { email, metadata, parse } from "../input";
import { issueToken } from "../otp";
import { hashPassword } from "../passwords";
import { redirectTarget } from "../redirects";
import { apiUser, insertUser, setUser, userByEmail, userById, type UserRow } from "../store/users";

/** The admin API's links (auth-js `auth.admin`): invitations mailed, and links generated without a mail. */

const inviteBody = z.object({ email, data: metadata.optional() });
const generateLinkBody = z.object({
  type: z.enum(["signup", "invite", "magiclink", "recovery", "email_change_current", "email_change_new"]),
  email,
  new_email: email.optional(),
  password: z.string().optional(),
  data: metadata.optional(),
  redirect_to: z.string().optional(),
});

/** A new invited user, after the before-user-created hook (whose refusal undoes the insert). */
async function insertInvited(
  db: pg.PoolClient,
  { project, settings, req }: AuthCall,
  body: { email: string; data?: Record<string, unknown> },
): Promise<UserRow> {
  const user = (await insertUser(db, {
    email: body.email,
    passwordHash: null,
    confirmed: false,
    metadata: body.data ?? {},
    invited: true,
  }))!;
  await beforeUserCreated(project.authPool, settings, user, req.ip);
  return user;
}

/** POST /invite: an invitation mailed to an address without a confirmed user (made, or invited again). */
export async function invite(call: AuthCall) {
  const { project, req, settings } = call;
  const body = parse(inviteBody, req.body);
  const redirectTo = redirectTarget(settings, req.query.redirect_to ?? req.body?.redirect_to);
  let created: UserRow | undefined;
  const row = await withAdminTransaction(project.authPool, async (db) => {
    let user = await userByEmail(db, body.email);
    if (user?.email_confirmed_at) throw emailExists();
    if (!user) {
      user = await insertInvited(db, call, body);
      created = user;
    } else {
      user = await setUser(db, user.id, { invited_at: new Date() });
    }
    await issueToken(db, settings, user, "invite", mailed(call, redirectTo));
    return (await userById(db, user.id))!;
  });
  if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
  return apiUser(project.authPool, row);
}

/** POST /admin/generate_link: a verification link and code made as a mail would carry them, nothing sent. */
export async function generateLink(call: AuthCall) {
  const { project, req, settings } = call;
  const body = parse(generateLinkBody, req.body);
  const redirectTo = redirectTarget(settings, body.redirect_to ?? req.query.redirect_to);
  const common = { apiUrl: call.apiUrl, redirectTo, send: false };
  const outcome = await withAdminTransaction(project.authPool, async (db) => {
    let user = await userByEmail(db, body.email);
    let issued;
    switch (body.type) {
      case "signup": {
        if (user?.email_confirmed_at) throw emailExists();
        if (!user) {
          user = (await insertUser(db, {
            email: body.email,
            passwordHash: body.password ? await hashPassword(body.password) : null,
            confirmed: false,
            metadata: body.data ?? {},
          }))!;
          await beforeUserCreated(project.authPool, settings, user, req.ip);
        }
        issued = await issueToken(db, settings, user, "confirmation", common);
        break;
      }
      case "invite": {
        if (user?.email_confirmed_at) throw emailExists();
        if (!user) user = await insertInvited(db, call, body);
        issued = await issueToken(db, settings, user, "invite", common);
        break;
      }
      case "magiclink":
      case "recovery": {
        if (!user) throw userNotFound();
        const kind =
          body.type === "recovery" ? "recovery" : user.email_confirmed_at ? "magic_link" : "confirmation";
        issued = await issueToken(db, settings, user, kind, common);
        break;
      }
      default: {
        if (!user) throw userNotFound();
        if (!body.new_email) throw new AuthApiError(400, "validation_failed", "new_email is required");
        if (await userByEmail(db, body.new_email)) throw emailExists();
        user = await setUser(db, user.id, { email_change: body.new_email, email_change_confirm_status: 0 });
        const current = body.type === "email_change_current";
        issued = await issueToken(db, settings, user, "email_change", {
          ...common,
          to: current ? user.email! : body.new_email,
          tokenColumn: current ? "email_change_token_current" : "email_change_token_new",
        });
      }
    }
    return { issued, user: (await userById(db, user.id))! };
  });
  return {
    ...(await apiUser(project.authPool, outcome.user)),
    action_link: outcome.issued.link,
    email_otp: outcome.issued.otp,
    hashed_token: outcome.issued.hashedToken,
    verification_type: outcome.issued.type,
    redirect_to: redirectTo,
  };
}
