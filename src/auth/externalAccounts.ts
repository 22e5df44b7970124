import type pg from "pg";
import type { AuthSettings } from "./authConfig";
import { AuthApiError, signupDisabled } from "./errors";
import type { ProviderUser } from "./idTokens";
import {
  deleteOtherIdentities,
  identitiesWithEmails,
  insertIdentity,
  lockIdentity,
  refreshIdentity,
  syncProviders,
} from "./store/identities";
import {
  insertExternalUser,
  lockUsersWithEmails,
  mergeUserMetadata,
  setUser,
  userById,
  type UserRow,
} from "./store/users";

/**
 * The user an external identity (an OAuth callback, an ID token) signs in, as the platform's auth server
 * decides it (models/linking.go DetermineAccountLinking, api/external.go createAccountFromExternalIdentity):
 *   - the identity known: its user, the identity's data refreshed;
 *   - else, with an address the provider verified (or any, under mailer_autoconfirm): linked to the one user
 *     who has that address or whose identities do; two such users: refused;
 *   - else a new user (signups allowed), with the provider's address unless another user has it.
 * A user not yet confirmed loses its password and other identities (they may be someone else's doing) and is
 * confirmed when the address is verified; else it signs in only with mailer_allow_unverified_email_sign_ins.
 */

export interface ExternalSignIn {
  user: UserRow;
  /** A new user was made: the before/after user-created hooks apply. */
  created: boolean;
  /** Signing in refused, with the user's changes kept (an unverified address). */
  refused?: AuthApiError;
}

export interface ExternalIdentity {
  provider: string;
  user: ProviderUser;
  /** identity_data, as identityData() makes it. */
  data: Record<string, unknown>;
  emailOptional: boolean;
}

const subjectOf = (identity: ExternalIdentity) =>
  String(identity.data.sub ?? identity.data.provider_id ?? "");

/** The provider's addresses that count as verified (all under mailer_autoconfirm), lower case. */
function verifiedEmails(settings: AuthSettings, user: ProviderUser): string[] {
  return user.emails
    .filter((e) => e.verified || settings.mailer_autoconfirm === true)
    .map((e) => e.email.toLowerCase());
}

type Decision =
  | { kind: "exists"; user: UserRow; identityId: string }
  | { kind: "link"; user: UserRow }
  | { kind: "create"; email: string | null };

async function decide(
  db: pg.PoolClient,
  settings: AuthSettings,
  identity: ExternalIdentity,
): Promise<Decision> {
  const known = await lockIdentity(db, identity.provider, subjectOf(identity));
  if (known) return { kind: "exists", user: (await userById(db, known.user_id))!, identityId: known.id };
  const candidate = identity.user.emails.find((e) => e.primary)?.email.toLowerCase() || null;
  const verified = verifiedEmails(settings, identity.user);
  if (!verified.length) {
    // An unverified address another user has is not taken.
    const taken = candidate ? (await lockUsersWithEmails(db, [candidate])).length > 0 : false;
    return { kind: "create", email: taken ? null : candidate };
  }
  const owners = new Set((await identitiesWithEmails(db, verified)).map((i) => i.user_id));
  if (owners.size > 1) {
    throw new AuthApiError(
      500,
      "unexpected_failure",
      "Multiple accounts with the same email address detected",
    );
  }
  if (owners.size === 1) return { kind: "link", user: (await userById(db, [...owners][0]))! };
  const users = await lockUsersWithEmails(db, verified);
  if (users.length > 1) {
    throw new AuthApiError(
      500,
      "unexpected_failure",
      "Multiple accounts with the same email address detected",
    );
  }
  return users.length ? { kind: "link", user: users[0] } : { kind: "create", email: candidate };
}

/** Signs an external identity in (see above), in the caller's transaction. */
export async function signInExternal(
  db: pg.PoolClient,
  settings: AuthSettings,
  identity: ExternalIdentity,
): Promise<ExternalSignIn> {
  const decision = await decide(db, settings, identity);
  let user: UserRow;
  let identityId: string;
  const subject = subjectOf(identity);
  if (decision.kind === "create") {
    if (settings.disable_signup) throw signupDisabled();
    user = await insertExternalUser(db, {
      email: decision.email,
      confirmed: false,
      sso: false,
      provider: identity.provider,
      metadata: identity.data,
    });
    identityId = await insertIdentity(db, { ...identity, subject, userId: user.id });
  } else {
    user = decision.user;
    if (decision.kind === "exists") {
      identityId = decision.identityId;
      await refreshIdentity(db, identityId, identity.data);
    } else {
      identityId = await insertIdentity(db, { ...identity, subject, userId: user.id });
    }
    await mergeUserMetadata(db, user.id, "raw_user_meta_data", identity.data);
    await syncProviders(db, user.id);
  }
  if (user.banned_until && user.banned_until.getTime() > Date.now()) {
    throw new AuthApiError(403, "user_banned", "User is banned");
  }
  const candidate = identity.user.emails.find((e) => e.primary);
  const hasEmail = !(identity.emailOptional && !candidate?.email);
  let refused: AuthApiError | undefined;
  if (hasEmail && !user.email_confirmed_at) {
    await removeUnconfirmedAccess(db, user.id, identityId, identity);
    if (candidate?.verified || settings.mailer_autoconfirm === true) {
      await setUser(db, user.id, { email_confirmed_at: new Date() });
    } else if (settings.mailer_allow_unverified_email_sign_ins !== true) {
      const p = identity.provider;
      refused = new AuthApiError(
        422,
        "provider_email_needs_verification",
        `Unverified email with ${p}. Verify the email with ${p} in order to sign in`,
      );
    }
  }
  return { user: (await userById(db, user.id))!, created: decision.kind === "create", refused };
}

/**
 * A user not yet confirmed keeps only the identity signing in now: its password and other identities go, its
 * metadata becomes the identity's (models.User.RemoveUnconfirmedIdentities).
 */
async function removeUnconfirmedAccess(
  db: pg.PoolClient,
  userId: string,
  identityId: string,
  identity: ExternalIdentity,
): Promise<void> {
  await setUser(db, userId, { encrypted_password: null, raw_user_meta_data: JSON.stringify(identity.data) });
  await deleteOtherIdentities(db, userId, identityId);
  await syncProviders(db, userId);
}

/**
 * Links an external identity to the signed-in `target` (linkIdentity): refused when the identity is linked
 * already. A user without an address takes the provider's verified one, and stops being anonymous.
 */
export async function linkExternal(
  db: pg.PoolClient,
  target: UserRow,
  identity: ExternalIdentity,
): Promise<UserRow> {
  const subject = subjectOf(identity);
  const known = await lockIdentity(db, identity.provider, subject);
  if (known) {
    const whose = known.user_id === target.id ? "" : " to another user";
    throw new AuthApiError(422, "identity_already_exists", `Identity is already linked${whose}`);
  }
  await insertIdentity(db, { ...identity, subject, userId: target.id });
  const candidate = identity.user.emails.find((e) => e.primary) ?? identity.user.emails.at(-1);
  if (!target.email && candidate?.email) {
    if (!candidate.verified) {
      throw new AuthApiError(
        422,
        "email_not_confirmed",
        `Unverified email with ${identity.provider}. Verify the email with ${identity.provider} in order to link it`,
      );
    }
    if ((await lockUsersWithEmails(db, [candidate.email.toLowerCase()])).length) {
      throw new AuthApiError(
        422,
        "email_exists",
        "A user with this email address has already been registered",
      );
    }
    await setUser(db, target.id, {
      email: candidate.email.toLowerCase(),
      email_confirmed_at: new Date(),
      is_anonymous: false,
    });
  }
  await syncProviders(db, target.id);
  return (await userById(db, target.id))!;
}
