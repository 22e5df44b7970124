import type { Request, Router } from "express";
import type pg from "pg";
import type { AppContext } from "../../context";
import { withAdminTransaction } from "../../db/transaction";
import { HttpError, isUserThemself } from "../http";
import { takeInvitation } from "../organizations/invitations";
import { addMember } from "../organizations/store";
import { routeTable } from "../route";
import { SESSION_SECONDS, createSession, endSession } from "./sessions";
import { acceptInvitationBody, acceptedInvitation, sessionResponse, signInBody } from "./shapes";
import { passwordChecker } from "./signIn";
import { createUser, markEmailVerified, userByEmail, type UserRow } from "./users";

/**
 * The installation's users signing in and out, and accepting invitations to organizations (Strata's own
 * endpoints; the spec has none). Sign-in and acceptance need no token: this router is mounted before
 * `requirePrincipal`.
 */

const userSummary = (u: UserRow) => ({ id: u.id, email: u.email, username: u.username });

/** The existing user an acceptance is for, proven by being signed in as them or by their password. */
async function provenUser(
  req: Request,
  user: UserRow,
  password: string | undefined,
  checkPassword: (email: string, password: string) => Promise<UserRow>,
): Promise<UserRow> {
  const principal = req.principal && isUserThemself(req.principal) ? req.principal : undefined;
  if (principal?.userId === user.id) return user;
  if (principal) throw new HttpError(403, "Forbidden: the invitation is for another email address");
  if (password === undefined)
    throw new HttpError(
      401,
      `Unauthorized: an account exists for ${user.email}: accept signed in as it, or give its password`,
    );
  return checkPassword(user.email, password);
}

export function accountRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const db = ctx.platformPool;
  const checkPassword = passwordChecker(db);
  // Attempts per address, besides the per-email count of passwordChecker.
  const perAddress = (name: string) => [{ name, points: 30, seconds: 60 }];

  routes.post(
    "/v1/account/sign-in",
    "Signs a user of the installation in with email and password: answers a session token (a bearer token acting as the user's personal access token until it expires or signs out); 400 alike for an unknown email and a wrong password, 429 after 5 failures of one email in 15 minutes",
    {
      access: { anyone: true },
      body: signInBody,
      status: 200,
      response: sessionResponse,
      rateLimits: perAddress("sign-in"),
    },
    async ({ body, res }) => {
      const user = await checkPassword(body.email, body.password);
      const session = await createSession(db, user.id);
      res.set("cache-control", "no-store");
      return {
        access_token: session.token,
        token_type: "Bearer" as const,
        expires_in: SESSION_SECONDS,
        expires_at: session.expiresAt.toISOString(),
        user: userSummary(user),
      };
    },
  );

  routes.post(
    "/v1/account/sign-out",
    "Ends the session the request carries as its bearer token; personal access tokens are deleted at /v1/profile/access-tokens",
    { access: { anyone: true }, status: 204 },
    async ({ req, res }) => {
      const principal = req.principal;
      if (!principal) throw new HttpError(401, req.authFailure ?? "Unauthorized");
      if (principal.via !== "session")
        throw new HttpError(
          400,
          "Sign-out ends a session; this request carries an access token (delete it at /v1/profile/access-tokens/{id})",
        );
      await endSession(db, principal.tokenId);
      res.status(204).end();
      return undefined;
    },
  );

  routes.post(
    "/v1/account/invitations/accept",
    "Accepts an invitation to an organization with its token: a new user sets a password (then signs in); an existing user accepts signed in as the invited email, or with their password. The invitation serves once",
    {
      access: { anyone: true },
      body: acceptInvitationBody,
      status: 200,
      response: acceptedInvitation,
      rateLimits: perAddress("accept-invitation"),
    },
    async ({ req, body }) =>
      withAdminTransaction(db, async (client) => {
        const invitation = await takeInvitation(client, body.token);
        if (!invitation) throw new HttpError(404, "Invitation not found, already accepted or expired");
        const existing = await userByEmail(client, invitation.email);
        const user = existing
          ? await provenUser(req, existing, body.password, checkPassword)
          : await newUser(client, invitation.email, body.password, body.username, invitation.mailed);
        // A mailed link reached the address: the email is proven.
        if (invitation.mailed) await markEmailVerified(client, user.id);
        const role = await addMember(client, invitation.organization_id, user.id, invitation.role_name);
        return {
          organization: {
            id: invitation.organization_id,
            slug: invitation.organization_slug,
            name: invitation.organization_name,
          },
          role_name: role,
          user: userSummary(user),
        };
      }),
  );

  return routes.router;
}

async function newUser(
  client: pg.ClientBase,
  email: string,
  password: string | undefined,
  username: string | undefined,
  mailed: boolean,
): Promise<UserRow> {
  if (password === undefined)
    throw new HttpError(400, "Invalid body: password: a new account needs a password");
  return createUser(client, {
    email,
    username: username ?? email.split("@")[0],
    password,
    emailVerified: mailed,
  });
}
