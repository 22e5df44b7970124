import type { AuthSettings } from "../authConfig";
import { withAdminTransaction } from "../../db/transaction";
import type { UserCall } from "../call";
import { AuthApiError, userNotFound } from "../errors";
import { uuid } from "../input";
import { deleteIdentity, identityRowsOf, syncProviders, type IdentityRow } from "../store/identities";
import { lockUsersWithEmails, setUser, userById, type UserRow } from "../store/users";
import { providerRedirect } from "./oauth";

/**
 * A signed-in user's identities (auth-js linkIdentity, unlinkIdentity; getUserIdentities reads GET /user):
 * both only with the project's security_manual_linking_enabled, as the platform's auth server has them.
 */

export function requireManualLinking(settings: AuthSettings): void {
  if (settings.security_manual_linking_enabled !== true) {
    throw new AuthApiError(404, "manual_linking_disabled", "Manual linking is disabled");
  }
}

function signedInUser(call: UserCall): UserRow {
  requireManualLinking(call.settings);
  if (!call.caller.user) throw userNotFound();
  return call.caller.user;
}

/**
 * GET /user/identities/authorize: the provider's authorize URL of a sign-in that links its identity to the
 * caller; answered as `{url}` with skip_http_redirect=true (auth-js does), else as a redirect.
 */
export async function linkAuthorize(call: UserCall) {
  const user = signedInUser(call);
  const url = await providerRedirect(call, user.id);
  if (call.req.query.skip_http_redirect === "true") return { url };
  call.res.redirect(302, url);
}

/** DELETE /user/identities/:id: one of the caller's identities removed, never its last one. */
export async function unlink(call: UserCall) {
  const user = signedInUser(call);
  const id = String(call.req.params.id);
  if (!uuid.safeParse(id).success) {
    throw new AuthApiError(404, "validation_failed", "identity_id must be an UUID");
  }
  await withAdminTransaction(call.project.authPool, async (db) => {
    const identities = await identityRowsOf(db, user.id);
    if (identities.length <= 1) {
      throw new AuthApiError(
        422,
        "single_identity_not_deletable",
        "User must have at least 1 identity after unlinking",
      );
    }
    const removed = identities.find((i) => i.id === id);
    if (!removed) throw new AuthApiError(422, "identity_not_found", "Identity doesn't exist");
    await deleteIdentity(db, removed.id);
    if (removed.provider === "phone") {
      await setUser(db, user.id, { phone: null, phone_confirmed_at: null });
    } else {
      const current = (await userById(db, user.id))!;
      await emailFromIdentities(
        db,
        current,
        identities.filter((i) => i.id !== removed.id),
        call.settings,
      );
    }
    await syncProviders(db, user.id);
  });
  return {};
}

/**
 * The user's address after an identity went (models.User.UpdateUserEmailFromIdentities): kept while an
 * identity has it, else the first remaining identity's (verified before unverified before none) that no
 * other user has; unconfirmed unless that identity verified it (or mailer_autoconfirm).
 */
async function emailFromIdentities(
  db: Parameters<typeof setUser>[0],
  user: UserRow,
  remaining: IdentityRow[],
  settings: AuthSettings,
): Promise<void> {
  const emailOf = (i: IdentityRow) => i.email ?? "";
  if (remaining.some((i) => emailOf(i) === (user.email ?? ""))) return;
  const verified = (i: IdentityRow) => i.identity_data.email_verified === true;
  const rank = (i: IdentityRow) => (!emailOf(i) ? 2 : verified(i) ? 0 : 1);
  const ordered = [...remaining].sort((a, b) => rank(a) - rank(b));
  for (const identity of ordered) {
    const email = emailOf(identity);
    if (email && (await lockUsersWithEmails(db, [email])).length) continue;
    const confirmed = Boolean(email) && (verified(identity) || settings.mailer_autoconfirm === true);
    await setUser(db, user.id, {
      email: email || null,
      ...(confirmed ? {} : { email_confirmed_at: null }),
    });
    return;
  }
  throw new AuthApiError(
    422,
    "email_conflict_identity_not_deletable",
    "Unable to unlink identity due to email conflict",
  );
}
