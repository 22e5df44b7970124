import { timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { withAdminTransaction } from "../../db/transaction";
import { runUtilityStatement } from "../../db/utility";
import { checkCidr, cidrContains, jitLoginRole } from "../../projects/access";
import type { ProjectRuntime } from "../../projects/runtime";
import { randomSecret, sha256 } from "../../platform/ids";
import { HttpError } from "../http";
import { routeTable } from "../route";
import { readSettings, writeSettings } from "../settings";

/**
 * Just-in-time database access. An admin maps organization members (or invited emails) to database roles of
 * the project, each until `expires_at` and from `allowed_networks`; with JIT access enabled, a mapped member
 * asks for access (POST .../database/jit with the role and the address it connects from) and gets a login
 * role of its own, a member of that role with CONNECT on the project's database only, whose password
 * Postgres accepts until the mapping expires (VALID UNTIL) and never after, without Strata doing anything.
 */

/** The platform's role names and the project's roles they stand for. */
function databaseRole(project: ProjectRuntime, role: string): string {
  if (role === "postgres") return project.record.ownerRole;
  if (role === "supabase_read_only_user") return `strata_read_${project.ref}`;
  return role;
}
const ROLES = ["postgres", "supabase_read_only_user", "anon", "authenticated", "service_role"] as const;
/** A login made for a mapping without an expiry is valid this long. */
const UNBOUNDED_LOGIN_SECONDS = 3600;

const cidrItems = (family: 4 | 6) =>
  z
    .array(
      z.object({
        cidr: z.string().superRefine((value, check) => {
          const problem = checkCidr(value, family);
          if (problem) check.addIssue({ code: "custom", message: `${value} ${problem}` });
        }),
      }),
    )
    .max(100);

const JitRole = z
  .object({
    role: z.enum(ROLES, { error: `role must be one of ${ROLES.join(", ")}` }),
    expires_at: z.number().int().positive().optional(),
    allowed_networks: z
      .object({ allowed_cidrs: cidrItems(4).optional(), allowed_cidrs_v6: cidrItems(6).optional() })
      .optional(),
    branches_only: z.boolean().optional(),
  })
  .strict();
type JitRole = z.infer<typeof JitRole>;
const JitRoleOut = z.object({
  role: z.string(),
  expires_at: z.number().int().optional(),
  allowed_networks: z.object({
    allowed_cidrs: z.array(z.object({ cidr: z.string() })),
    allowed_cidrs_v6: z.array(z.object({ cidr: z.string() })),
  }),
  branches_only: z.boolean(),
});

interface GrantRow {
  user_id: string;
  role: string;
  expires_at: Date | null;
  allowed_cidrs: string[];
  allowed_cidrs_v6: string[];
  branches_only: boolean;
}

function roleOut(row: GrantRow) {
  return {
    role: row.role,
    ...(row.expires_at ? { expires_at: Math.floor(row.expires_at.getTime() / 1000) } : {}),
    allowed_networks: {
      allowed_cidrs: row.allowed_cidrs.map((cidr) => ({ cidr })),
      allowed_cidrs_v6: row.allowed_cidrs_v6.map((cidr) => ({ cidr })),
    },
    branches_only: row.branches_only,
  };
}

/** A role as given (an invitation keeps it so) in the answered shape. */
const givenRoleOut = (r: JitRole) => ({
  role: r.role,
  ...(r.expires_at !== undefined ? { expires_at: r.expires_at } : {}),
  allowed_networks: {
    allowed_cidrs: r.allowed_networks?.allowed_cidrs ?? [],
    allowed_cidrs_v6: r.allowed_networks?.allowed_cidrs_v6 ?? [],
  },
  branches_only: r.branches_only ?? false,
});

const rolesIn = (roles: JitRole[]) => {
  const names = roles.map((r) => r.role);
  if (new Set(names).size !== names.length) throw new HttpError(400, "Each role may be listed once");
  return roles;
};

function loginRole(project: ProjectRuntime, userId: string, role: string): string {
  return jitLoginRole(project.ref, userId, role);
}

async function grantsOf(ctx: AppContext, ref: string, userId?: string): Promise<GrantRow[]> {
  const { rows } = await ctx.platformPool.query<GrantRow>(
    `select user_id, role, expires_at, allowed_cidrs, allowed_cidrs_v6, branches_only from platform.jit_grants
      where project_ref = $1 and ($2::uuid is null or user_id = $2) order by user_id, role`,
    [ref, userId ?? null],
  );
  return rows;
}

/** Drops the login roles made for a user (all of them, or those of roles no longer mapped). */
async function dropLogins(project: ProjectRuntime, userId: string, keep: string[] = []): Promise<void> {
  const prefix = loginRole(project, userId, "");
  const { rows } = await project.adminPool.query(
    "select rolname from pg_roles where starts_with(rolname, $1)",
    [prefix],
  );
  const drop = rows.map((r) => r.rolname as string).filter((r) => !keep.includes(r.slice(prefix.length)));
  if (!drop.length) return;
  await withAdminTransaction(project.adminPool, async (client) => {
    for (const role of drop) {
      await client.query("select pg_terminate_backend(pid) from pg_stat_activity where usename = $1", [role]);
      await runUtilityStatement(client, "drop owned by %I", [role]);
      await runUtilityStatement(client, "drop role %I", [role]);
    }
  });
}

/** Replaces a user's mappings on the project (in the control plane), dropping logins of removed roles. */
async function setGrants(ctx: AppContext, project: ProjectRuntime, userId: string, roles: JitRole[]) {
  await withAdminTransaction(ctx.platformPool, async (client) => {
    await client.query("delete from platform.jit_grants where project_ref = $1 and user_id = $2", [
      project.ref,
      userId,
    ]);
    for (const r of roles) {
      await client.query(
        `insert into platform.jit_grants (project_ref, user_id, role, expires_at, allowed_cidrs, allowed_cidrs_v6, branches_only)
         values ($1, $2, $3, to_timestamp($4), $5, $6, $7)`,
        [
          project.ref,
          userId,
          r.role,
          r.expires_at ?? null,
          (r.allowed_networks?.allowed_cidrs ?? []).map((c) => c.cidr),
          (r.allowed_networks?.allowed_cidrs_v6 ?? []).map((c) => c.cidr),
          r.branches_only ?? false,
        ],
      );
    }
  });
  await dropLogins(
    project,
    userId,
    roles.map((r) => r.role),
  );
  // On the embedded cluster, each login's allowed networks are also rules of pg_hba.conf.
  await ctx.accessOf?.(project.record.clusterId)?.apply();
  return (await grantsOf(ctx, project.ref, userId)).map(roleOut);
}

async function memberOfProject(ctx: AppContext, project: ProjectRuntime, userId: string): Promise<boolean> {
  const { rows } = await ctx.platformPool.query(
    `select from platform.organization_members m join platform.projects p on p.organization_id = m.organization_id
      where p.ref = $1 and m.user_id = $2`,
    [project.ref, userId],
  );
  return rows.length > 0;
}

/** Whether `token` is the one whose SHA-256 is `storedHash`, in time independent of where they differ. */
function tokenMatches(token: string, storedHash: string): boolean {
  const presented = Buffer.from(sha256(token), "hex");
  const stored = Buffer.from(storedHash, "hex");
  return stored.length === presented.length && timingSafeEqual(stored, presented);
}

/**
 * Takes the project's invitation for `email` that `token` opens: deleted as it is taken, so it serves once
 * (of two acceptances at once, one gets it); an expired one is refused. Answers the roles it gives.
 */
async function takeInvitation(
  ctx: AppContext,
  ref: string,
  email: string,
  token: string,
): Promise<JitRole[]> {
  const { rows } = await ctx.platformPool.query<{ id: string; token_hash: string }>(
    "select id, token_hash from platform.jit_invites where project_ref = $1 and email = $2",
    [ref, email],
  );
  const invite = rows.find((r) => tokenMatches(token, r.token_hash));
  const { rows: taken } = invite
    ? await ctx.platformPool.query<{ roles: JitRole[]; expired: boolean }>(
        "delete from platform.jit_invites where id = $1 returning roles, expires_at <= now() as expired",
        [invite.id],
      )
    : { rows: [] };
  if (!taken.length) throw new HttpError(404, "No such invitation");
  if (taken[0].expired) throw new HttpError(403, "The invitation has expired: ask for a new one");
  return taken[0].roles;
}

const STATE = { state: "disabled" as "enabled" | "disabled" };

export function jitRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/database/jit";
  const jitRead = { permission: "database_jit_read" };
  const jitWrite = { permission: "database_jit_write" };
  const caller = (req: { principal?: { userId: string } }) => req.principal!.userId;

  routes.get(
    "/v1/projects/:ref/jit-access",
    "Gets whether just-in-time access is enabled",
    {
      access: { permission: "project_admin_read", scope: "database:read" },
      response: z.object({ state: z.enum(["enabled", "disabled"]), appliedSuccessfully: z.boolean() }),
      status: 200,
    },
    async ({ project }) => ({
      state: (await readSettings(ctx, project.ref, "jit_access", STATE)).state,
      appliedSuccessfully: true,
    }),
  );
  routes.put(
    "/v1/projects/:ref/jit-access",
    "Enables or disables just-in-time access (disabling drops every JIT login of the project)",
    {
      project: "database",
      access: { permission: "project_admin_write", scope: "database:write" },
      body: z.object({ state: z.enum(["enabled", "disabled"]) }).strict(),
      response: z.object({ state: z.enum(["enabled", "disabled"]), appliedSuccessfully: z.boolean() }),
      status: 200,
    },
    async ({ project, body }) => {
      const stored = await writeSettings(ctx, project.ref, "jit_access", STATE, { state: body.state });
      if (body.state === "disabled")
        for (const userId of new Set((await grantsOf(ctx, project.ref)).map((g) => g.user_id)))
          await dropLogins(project, userId);
      return { state: stored.state, appliedSuccessfully: true };
    },
  );

  routes.get(
    base,
    "Lists the caller's just-in-time roles",
    {
      access: { ...jitRead, scope: "database:read" },
      response: z.object({ user_id: z.string(), user_roles: z.array(JitRoleOut) }),
      status: 200,
    },
    async ({ project, req }) => ({
      user_id: caller(req),
      user_roles: (await grantsOf(ctx, project.ref, caller(req))).map(roleOut),
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
      if ((await readSettings(ctx, project.ref, "jit_access", STATE)).state !== "enabled")
        throw new HttpError(403, "Just-in-time access is not enabled for this project");
      const grant = (await grantsOf(ctx, project.ref, caller(req))).find((g) => g.role === body.role);
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
      const database = decodeURIComponent(new URL(project.record.adminUrl).pathname.slice(1));
      await withAdminTransaction(project.adminPool, async (client) => {
        const exists = await client.query("select from pg_roles where rolname = $1", [login]);
        await runUtilityStatement(
          client,
          exists.rowCount
            ? "alter role %I login password %L valid until %L"
            : "create role %I login password %L valid until %L",
          [login, password, until.toISOString()],
        );
        await runUtilityStatement(client, "grant %I to %I", [databaseRole(project, grant.role), login]);
        await runUtilityStatement(client, "grant connect on database %I to %I", [database, login]);
      });
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
      response: z.object({ user_id: z.string(), user_roles: z.array(JitRoleOut) }),
      status: 200,
    },
    async ({ project, body }) => {
      if (!(await memberOfProject(ctx, project, body.user_id)))
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
    {
      access: jitRead,
      response: z.object({
        items: z.array(
          z.object({
            user_id: z.string(),
            primary_email: z.string(),
            invite_id: z.string().nullable(),
            expires_at: z.number().int().nullable(),
            user_roles: z.array(JitRoleOut),
          }),
        ),
      }),
      status: 200,
    },
    async ({ project }) => {
      const grants = await grantsOf(ctx, project.ref);
      const { rows: users } = await ctx.platformPool.query(
        "select id::text, email from platform.users where id = any($1::uuid[])",
        [[...new Set(grants.map((g) => g.user_id))]],
      );
      const email = new Map(users.map((u) => [u.id as string, u.email as string]));
      const items: unknown[] = [...new Set(grants.map((g) => g.user_id))].map((userId) => {
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
      const { rows: invites } = await ctx.platformPool.query(
        `select id, email, roles, extract(epoch from expires_at)::bigint as expires_at from platform.jit_invites
          where project_ref = $1 and expires_at > now() order by created_at`,
        [project.ref],
      );
      for (const invite of invites)
        // Not yet anyone's: the invitee's user id is known once it accepts; until then it may be accepted.
        items.push({
          user_id: "",
          primary_email: invite.email,
          invite_id: invite.id,
          expires_at: Number(invite.expires_at),
          user_roles: (invite.roles as JitRole[]).map(givenRoleOut),
        });
      return { items };
    },
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
      await ctx.platformPool.query(
        "delete from platform.jit_invites where project_ref = $1 and expires_at <= now()",
        [project.ref],
      );
      const { rows } = await ctx.platformPool.query(
        `insert into platform.jit_invites (project_ref, email, token_hash, roles) values ($1, lower($2), $3, $4)
         returning id`,
        [project.ref, body.email, sha256(token), JSON.stringify(rolesIn(body.roles))],
      );
      return { email: body.email, invite_id: rows[0].id, user_roles: body.roles.map(givenRoleOut), token };
    },
  );
  routes.post(
    `${base}/invite/accept`,
    "Accepts an invitation as the signed-in member whose email it names",
    {
      project: "database",
      access: {},
      body: z.object({ email: z.email(), token: z.string().min(1) }).strict(),
      response: z.object({ user_id: z.string(), user_roles: z.array(JitRoleOut) }),
      status: 200,
    },
    async ({ project, body, req }) => {
      const { rows: me } = await ctx.platformPool.query(
        "select lower(email) as email from platform.users where id = $1",
        [caller(req)],
      );
      if (me[0]?.email !== body.email.toLowerCase())
        throw new HttpError(403, "The invitation is for another email address");
      const invited = await takeInvitation(ctx, project.ref, me[0].email, body.token);
      const current = (await grantsOf(ctx, project.ref, caller(req))).map(roleOut);
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
      const { rowCount } = await ctx.platformPool.query(
        "delete from platform.jit_invites where project_ref = $1 and id = $2",
        [project.ref, id.data],
      );
      if (!rowCount) throw new HttpError(404, "No such invitation");
      return {};
    },
  );
  return routes.router;
}
