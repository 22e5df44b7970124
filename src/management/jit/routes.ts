import { isIP } from "node:net";
import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { withAdminTransaction } from "../../db/transaction";
import { cidrContains } from "../../net/cidr";
import type { ProjectRuntime } from "../../projects/runtime";
import { randomSecret, sha256 } from "../../platform/ids";
import { configDocumentRoutes } from "../configDocument";
import { HttpError } from "../http";
import { routeTable } from "../route";
import { settingsDocument } from "../configDocument";
import { dropLogins, issueLogin, loginRole } from "./logins";
import {
  givenRoleOut,
  JitAccess,
  JitList,
  JitRole,
  JitRoleOut,
  roleOut,
  ROLES,
  rolesIn,
  UserRoles,
} from "./shapes";
import {
  createInvite,
  deleteInvite,
  emailsOf,
  grantsOf,
  isProjectMember,
  lowercaseEmailOf,
  pendingInvites,
  replaceGrants,
  takeInvitation,
} from "./store";

/**
 * Just-in-time database access. An admin maps organization members (or invited emails) to database roles of
 * the project, each until `expires_at` and from `allowed_networks`; with JIT access enabled, a mapped member
 * asks for access (POST .../database/jit with the role and the address it connects from) and gets a login
 * role of its own, a member of that role with CONNECT on the project's database only, whose password
 * Postgres accepts until the mapping expires (VALID UNTIL) and never after, without Strata doing anything.
 */

/** A login made for a mapping without an expiry is valid this long. */
const UNBOUNDED_LOGIN_SECONDS = 3600;

const STATE = { state: "disabled" as "enabled" | "disabled" };

/** Replaces a user's mappings on the project (in the control plane), dropping logins of removed roles. */
async function setGrants(ctx: AppContext, project: ProjectRuntime, userId: string, roles: JitRole[]) {
  await withAdminTransaction(ctx.platformPool, (client) => replaceGrants(client, project.ref, userId, roles));
  await dropLogins(
    project,
    userId,
    roles.map((r) => r.role),
  );
  // On the embedded cluster, each login's allowed networks are also rules of pg_hba.conf.
  await ctx.accessOf?.(project.record.clusterId)?.apply();
  return (await grantsOf(ctx.platformPool, project.ref, userId)).map(roleOut);
}

/** Ends a user's just-in-time access to a project: mappings and logins (a member removed from its organization). */
export async function revokeJitAccess(ctx: AppContext, ref: string, userId: string): Promise<void> {
  const project = await ctx.registry.get(ref);
  if (project) await setGrants(ctx, project, userId, []);
}

/** Every member's mappings, then the invitations not yet accepted. */
async function jitList(ctx: AppContext, ref: string) {
  const grants = await grantsOf(ctx.platformPool, ref);
  const userIds = [...new Set(grants.map((g) => g.user_id))];
  const email = await emailsOf(ctx.platformPool, userIds);
  const items: unknown[] = userIds.map((userId) => {
    const mine = grants.filter((g) => g.user_id === userId);
    const ends = mine.map((g) => g.expires_at?.getTime()).filter((t): t is number => t !== undefined);
    return {
      user_id: userId,
      primary_email: email.get(userId) ?? "",
      invite_id: null,
      expires_at: ends.length ? Math.floor(Math.max(...ends) / 1000) : null,
      user_roles: mine.map(roleOut),
    };
  });
  for (const invite of await pendingInvites(ctx.platformPool, ref))
    // Not yet anyone's: the invitee's user id is known once it accepts; until then it may be accepted.
    items.push({
      user_id: "",
      primary_email: invite.email,
      invite_id: invite.id,
      expires_at: Number(invite.expires_at),
      user_roles: invite.roles.map(givenRoleOut),
    });
  return { items };
}

export function jitRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/database/jit";
  const jitRead = { permission: "database_jit_read" };
  const jitWrite = { permission: "database_jit_write" };
  const caller = (req: { principal?: { userId: string } }) => req.principal!.userId;
  const access = settingsDocument(ctx, "jit_access", STATE);

  configDocumentRoutes(routes, {
    path: "/v1/projects/:ref/jit-access",
    store: access,
    read: {
      summary: "Gets whether just-in-time access is enabled",
      access: { permission: "project_admin_read", scope: "database:read" },
      response: JitAccess,
      answer: (stored) => ({ state: stored.state, appliedSuccessfully: true }),
    },
    update: {
      method: "put",
      summary: "Enables or disables just-in-time access (disabling drops every JIT login of the project)",
      project: "database",
      access: { permission: "project_admin_write", scope: "database:write" },
      body: z.object({ state: z.enum(["enabled", "disabled"]) }).strict(),
      response: JitAccess,
      status: 200,
      answer: async (stored, { project, body }) => {
        if (body.state === "disabled")
          for (const userId of new Set((await grantsOf(ctx.platformPool, project.ref)).map((g) => g.user_id)))
            await dropLogins(project, userId);
        return { state: stored.state, appliedSuccessfully: true };
      },
    },
  });

  routes.get(
    base,
    "Lists the caller's just-in-time roles",
    { access: { ...jitRead, scope: "database:read" }, response: UserRoles, status: 200 },
    async ({ project, req }) => ({
      user_id: caller(req),
      user_roles: (await grantsOf(ctx.platformPool, project.ref, caller(req))).map(roleOut),
    }),
  );
  routes.post(
    base,
    "Requests access as one of the caller's roles from `rhost`: answers a login valid until the mapping expires",
    {
      project: "database",
      access: { ...jitRead, scope: "database:read" },
      body: z
        .object({
          role: z.string().min(1),
          rhost: z.string().refine((a) => isIP(a) !== 0, "must be an IP address"),
        })
        .strict(),
      response: z.object({
        user_id: z.string(),
        user_role: JitRoleOut,
        db_user: z.string(),
        db_password: z.string(),
        valid_until: z.string(),
      }),
      status: 200,
    },
    async ({ project, body, req }) => {
      if ((await access.read(project.ref)).state !== "enabled")
        throw new HttpError(403, "Just-in-time access is not enabled for this project");
      const grant = (await grantsOf(ctx.platformPool, project.ref, caller(req))).find(
        (g) => g.role === body.role,
      );
      if (!grant) throw new HttpError(403, `No just-in-time access to role ${body.role}`);
      if (grant.expires_at && grant.expires_at.getTime() <= Date.now())
        throw new HttpError(403, `Just-in-time access to role ${body.role} has expired`);
      const networks = isIP(body.rhost) === 4 ? grant.allowed_cidrs : grant.allowed_cidrs_v6;
      const anyNetwork = !grant.allowed_cidrs.length && !grant.allowed_cidrs_v6.length;
      if (!anyNetwork && !networks.some((c) => cidrContains(c, body.rhost)))
        throw new HttpError(403, `${body.rhost} is not in the allowed networks of role ${body.role}`);
      const login = loginRole(project, caller(req), grant.role);
      const password = randomSecret(24);
      const until = grant.expires_at ?? new Date(Date.now() + UNBOUNDED_LOGIN_SECONDS * 1000);
      await issueLogin(project, login, grant.role, password, until);
      return {
        user_id: caller(req),
        user_role: roleOut(grant),
        db_user: login,
        db_password: password,
        valid_until: until.toISOString(),
      };
    },
  );
  routes.put(
    base,
    "Sets a member's just-in-time roles (replacing the previous ones)",
    {
      project: "database",
      access: jitWrite,
      body: z.object({ user_id: z.uuid(), roles: z.array(JitRole).max(ROLES.length) }).strict(),
      response: UserRoles,
      status: 200,
    },
    async ({ project, body }) => {
      if (!(await isProjectMember(ctx.platformPool, project.ref, body.user_id)))
        throw new HttpError(400, "user_id is not a member of the project's organization");
      return {
        user_id: body.user_id,
        user_roles: await setGrants(ctx, project, body.user_id, rolesIn(body.roles)),
      };
    },
  );
  routes.get(
    `${base}/list`,
    "Lists every member's just-in-time roles and the pending invitations",
    { access: jitRead, response: JitList, status: 200 },
    async ({ project }) => jitList(ctx, project.ref),
  );
  routes.delete(
    `${base}/:user_id`,
    "Removes all of a member's just-in-time roles and drops their logins",
    { project: "database", access: jitWrite, response: z.object({}), status: 200 },
    async ({ project, req }) => {
      const userId = z.uuid().safeParse(req.params.user_id);
      if (!userId.success) throw new HttpError(400, "user_id must be a UUID");
      await setGrants(ctx, project, userId.data, []);
      return {};
    },
  );
  routes.post(
    `${base}/invite`,
    "Invites an email to just-in-time roles; the token is answered once, for the invitee, and accepted once within 7 days",
    {
      access: jitWrite,
      body: z.object({ email: z.email(), roles: z.array(JitRole).min(1).max(ROLES.length) }).strict(),
      response: z.object({
        email: z.string(),
        invite_id: z.string(),
        user_roles: z.array(JitRoleOut),
        token: z.string(),
      }),
      status: 200,
    },
    async ({ project, body }) => {
      const token = randomSecret(24);
      const id = await createInvite(
        ctx.platformPool,
        project.ref,
        body.email,
        sha256(token),
        rolesIn(body.roles),
      );
      return { email: body.email, invite_id: id, user_roles: body.roles.map(givenRoleOut), token };
    },
  );
  routes.post(
    `${base}/invite/accept`,
    "Accepts an invitation as the signed-in member whose email it names",
    {
      project: "database",
      access: {},
      body: z.object({ email: z.email(), token: z.string().min(1) }).strict(),
      response: UserRoles,
      status: 200,
    },
    async ({ project, body, req }) => {
      const email = await lowercaseEmailOf(ctx.platformPool, caller(req));
      if (email !== body.email.toLowerCase())
        throw new HttpError(403, "The invitation is for another email address");
      const invited = await takeInvitation(ctx.platformPool, project.ref, email, body.token);
      const current = (await grantsOf(ctx.platformPool, project.ref, caller(req))).map(roleOut);
      const merged = [
        ...current.filter((c) => !invited.some((i) => i.role === c.role)),
        ...invited,
      ] as JitRole[];
      return { user_id: caller(req), user_roles: await setGrants(ctx, project, caller(req), merged) };
    },
  );
  routes.delete(
    `${base}/invite/:invite_id`,
    "Revokes an invitation",
    { access: jitWrite, response: z.object({}), status: 200 },
    async ({ project, req }) => {
      const id = z.uuid().safeParse(req.params.invite_id);
      if (!id.success) throw new HttpError(400, "invite_id must be a UUID");
      if (!(await deleteInvite(ctx.platformPool, project.ref, id.data)))
        throw new HttpError(404, "No such invitation");
      return {};
    },
  );
  return routes.router;
}
