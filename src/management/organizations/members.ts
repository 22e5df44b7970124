import { Router } from "express";
import type pg from "pg";
import { z } from "zod";
import type { AppContext } from "../../context";
import { withAdminTransaction } from "../../db/transaction";
import { renderTemplate } from "../../auth/mailer";
import { InstallationMailError, mailConfigured, sendInstallationMail } from "../account/mail";
import { normalEmail } from "../account/users";
import { found, HttpError } from "../http";
import { revokeJitAccess } from "../jit/routes";
import { routeTable } from "../route";
import {
  createInvitation,
  deleteInvitation,
  findInvitation,
  INVITATION_DAYS,
  listInvitations,
  type InvitationRow,
} from "./invitations";
import { checkManagesRole, MEMBERS_READ } from "./roles";
import {
  createdInvitation,
  invitation,
  inviteMemberBody,
  memberV1,
  memberV1Of,
  updateMemberBody,
} from "./shapes";
import {
  findMember,
  hasMemberWithEmail,
  lockOrganization,
  ownerCount,
  projectsWithJitGrants,
  removeMember,
  setMemberRole,
  type MemberRow,
  type OrganizationRow,
} from "./store";

/**
 * Strata's own endpoints for an organization's members (the spec lists only their reading): invitations by
 * email, role changes and removal, for Owners and Administrators (`organization_admin_write`; only an Owner
 * deals with Owners). OAuth applications get none of them (no scope is listed).
 */

const invitationOut = (i: InvitationRow) => ({
  id: i.id,
  email: i.email,
  role_name: i.role_name,
  invited_at: i.invited_at.toISOString(),
  expires_at: i.expires_at.toISOString(),
  mailed: i.mailed,
});

/** The dashboard's page that accepts an invitation (the platform dashboard's path). */
function invitationLink(ctx: AppContext, org: OrganizationRow, token: string): string {
  const query = new URLSearchParams({ token, slug: org.slug });
  return `${ctx.config.publicUrl}/join?${query}`;
}

/** The invitation mail; the values are filled in HTML-escaped (the organization's name is its members' text). */
const INVITATION_MAIL =
  "<p>{{ .Data.inviter }} invited you to join <strong>{{ .Data.organization }}</strong> as {{ .Data.role }}.</p>" +
  '<p><a href="{{ .ConfirmationURL }}">Accept the invitation</a></p>' +
  `<p>The invitation expires in ${INVITATION_DAYS} days.</p>` +
  // For an installation without the dashboard page: the API call the page makes.
  "<p>Or accept through the API: <code>POST {{ .SiteURL }}/v1/account/invitations/accept</code> with " +
  '<code>{"token": "{{ .Token }}", "password": "&lt;your new password&gt;"}</code>.</p>';

function invitationMail(
  ctx: AppContext,
  org: OrganizationRow,
  invitation: InvitationRow,
  token: string,
  inviter: string,
) {
  return {
    to: invitation.email,
    // One line: no control character of the name reaches the header.
    subject: `You have been invited to join ${org.name.replace(/\p{Cc}+/gu, " ")}`,
    html: renderTemplate(INVITATION_MAIL, {
      SiteURL: ctx.config.publicUrl,
      Email: invitation.email,
      ConfirmationURL: invitationLink(ctx, org, token),
      Token: token,
      Data: { inviter, organization: org.name, role: invitation.role_name },
    }),
  };
}

function userIdOf(params: Record<string, string>): string {
  const userId = z.uuid().safeParse(params.user_id);
  if (!userId.success) throw new HttpError(400, "user_id must be a UUID");
  return userId.data;
}

/** Refuses (400) a change that would leave the organization without an Owner (`roleName` null: removal). */
async function checkKeepsOwner(
  client: pg.ClientBase,
  org: OrganizationRow,
  member: MemberRow,
  roleName: string | null,
): Promise<void> {
  if (member.role_name !== "Owner" || roleName === "Owner") return;
  if ((await ownerCount(client, org.id)) === 1)
    throw new HttpError(
      400,
      `${member.email} is the only Owner of ${org.slug}: make another member Owner first`,
    );
}

/**
 * Ends a removed member's just-in-time access to the organization's projects. Their mappings go first (no
 * new login can be had); a login of a project whose database cannot be reached now stays until it expires,
 * and is logged.
 */
async function endJitAccess(ctx: AppContext, org: OrganizationRow, userId: string): Promise<void> {
  for (const ref of await projectsWithJitGrants(ctx.platformPool, org.id, userId)) {
    await revokeJitAccess(ctx, ref, userId).catch((e) =>
      ctx.log.error(
        { ref, err: (e as Error).message },
        "a removed member's just-in-time logins were not dropped",
      ),
    );
  }
}

export function memberRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const db = ctx.platformPool;
  const manage = { permission: "organization_admin_write" } as const;

  routes.post(
    "/v1/organizations/:slug/members/invitations",
    "Invites an email to the organization with a role: the installation mails the link (STRATA_SMTP_URL), or, with no SMTP server, answers it once as invitation_link; a new invitation of the same email replaces the earlier one",
    {
      organization: true,
      access: manage,
      body: inviteMemberBody,
      status: 201,
      response: createdInvitation,
    },
    async ({ organization: org, body, req, res }) => {
      checkManagesRole(org.role_name, body.role_name);
      const email = normalEmail(body.email);
      if (await hasMemberWithEmail(db, org.id, email))
        throw new HttpError(409, `${email} is already a member of ${org.slug}`);
      const mailed = mailConfigured(ctx.config);
      try {
        // The invitation stays only if its mail went: a refused mail leaves nothing behind.
        return await withAdminTransaction(db, async (client) => {
          const made = await createInvitation(client, {
            organizationId: org.id,
            email,
            roleName: body.role_name,
            mailed,
            invitedBy: req.principal!.userId,
          });
          if (!mailed) {
            res.set("cache-control", "no-store");
            return {
              ...invitationOut(made.invitation),
              invitation_link: invitationLink(ctx, org, made.token),
            };
          }
          const inviter = (await findMember(client, org.id, req.principal!.userId))?.email ?? "A member";
          await sendInstallationMail(
            ctx.config,
            invitationMail(ctx, org, made.invitation, made.token, inviter),
          );
          return invitationOut(made.invitation);
        });
      } catch (e) {
        if (!(e instanceof InstallationMailError)) throw e;
        ctx.log.error({ err: e.reason }, "invitation mail not sent");
        throw new HttpError(
          502,
          "The invitation mail could not be sent: the installation's SMTP server did not take it",
        );
      }
    },
  );

  routes.get(
    "/v1/organizations/:slug/members/invitations",
    "Lists the organization's invitations not yet accepted (without their links)",
    {
      organization: true,
      access: MEMBERS_READ,
      status: 200,
      response: invitation.array(),
    },
    async ({ organization: org }) => (await listInvitations(db, org.id)).map(invitationOut),
  );

  routes.delete(
    "/v1/organizations/:slug/members/invitations/:id",
    "Revokes an invitation: its link stops working",
    { organization: true, access: manage, status: 200, response: z.object({}) },
    async ({ organization: org, params }) => {
      const id = z.uuid().safeParse(params.id);
      const invited = found(
        id.success ? await findInvitation(db, org.id, id.data) : undefined,
        "Invitation",
        params.id,
      );
      checkManagesRole(org.role_name, invited.role_name);
      await deleteInvitation(db, invited.id);
      return {};
    },
  );

  routes.patch(
    "/v1/organizations/:slug/members/:user_id",
    "Changes a member's role; the organization keeps at least one Owner",
    { organization: true, access: manage, body: updateMemberBody, status: 200, response: memberV1 },
    async ({ organization: org, params, body }) => {
      const userId = userIdOf(params);
      return withAdminTransaction(db, async (client) => {
        await lockOrganization(client, org.id);
        const member = found(await findMember(client, org.id, userId), "Member", userId);
        checkManagesRole(org.role_name, member.role_name);
        checkManagesRole(org.role_name, body.role_name);
        await checkKeepsOwner(client, org, member, body.role_name);
        await setMemberRole(client, org.id, userId, body.role_name);
        return memberV1Of({ ...member, role_name: body.role_name });
      });
    },
  );

  routes.delete(
    "/v1/organizations/:slug/members/:user_id",
    "Removes a member: their tokens and sessions no longer reach the organization, their OAuth grants there and just-in-time database access to its projects end",
    { organization: true, access: manage, status: 200, response: z.object({}) },
    async ({ organization: org, params }) => {
      const userId = userIdOf(params);
      await withAdminTransaction(db, async (client) => {
        await lockOrganization(client, org.id);
        const member = found(await findMember(client, org.id, userId), "Member", userId);
        checkManagesRole(org.role_name, member.role_name);
        await checkKeepsOwner(client, org, member, null);
        await removeMember(client, org.id, userId);
      });
      await endJitAccess(ctx, org, userId);
      return {};
    },
  );

  return routes.router;
}
