import { Router, type Request } from "express";
import type pg from "pg";
import { z } from "zod";
import { withAdminTransaction } from "../db/transaction";
import { bearerAuthOf } from "../http/gate";
import type { ProjectRuntime } from "../projects/runtime";
import type { AuthSettings } from "./authConfig";
import type { RequestAuth } from "./dataAuth";
import { AuthApiError } from "./errors";
import { afterUserCreated, beforeUserCreated } from "./hook";
import { issueToken } from "./otp";
import { hashPassword } from "./passwords";
import { redirectTarget } from "./redirects";
import { validatePhone } from "./sms";
import type { AuthToolkit, Handle } from "./router";
import {
  apiUser,
  insertPhoneUser,
  insertUser,
  mergeUserMetadata,
  setUser,
  syncProviders,
  toFactor,
  upsertEmailIdentity,
  upsertPhoneIdentity,
  userByEmail,
  userById,
  type UserRow,
} from "./users";

const DEFAULT_PER_PAGE = 50;
const MAX_PER_PAGE = 1000;

const email = z.string().trim().toLowerCase().email();
const metadata = z.record(z.string(), z.unknown());
const userFields = {
  email: email.optional(),
  password: z.string().min(1).optional(),
  email_confirm: z.boolean().optional(),
  phone: z.string().optional(),
  phone_confirm: z.boolean().optional(),
  user_metadata: metadata.optional(),
  app_metadata: metadata.optional(),
  ban_duration: z.string().optional(),
  role: z.string().optional(),
};
const createBody = z.object(userFields);
const updateBody = z.object(userFields);
const inviteBody = z.object({ email, data: metadata.optional() });
const generateLinkBody = z.object({
  type: z.enum(["signup", "invite", "magiclink", "recovery", "email_change_current", "email_change_new"]),
  email,
  new_email: email.optional(),
  password: z.string().optional(),
  data: metadata.optional(),
  redirect_to: z.string().optional(),
});
const uuid = z.string().uuid();

function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AuthApiError(400, "validation_failed", `${issue.path.join(".") || "body"}: ${issue.message}`);
  }
  return parsed.data;
}

const UNITS: Record<string, number> = {
  h: 3600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 0.001,
  µs: 0.001,
  ns: 1e-6,
};

/** A Go duration (`24h`, `1h30m`, `90s`) in milliseconds, as ban_duration is given; `none` lifts a ban. */
function durationMs(value: string): number {
  if (!/^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$/.test(value)) {
    throw new AuthApiError(400, "validation_failed", "invalid format for ban duration");
  }
  let total = 0;
  for (const [, n, , unit] of value.matchAll(/(\d+(\.\d+)?)(h|ms|m|s|us|µs|ns)/g))
    total += Number(n) * UNITS[unit];
  return total;
}

const userNotFound = () => new AuthApiError(404, "user_not_found", "User not found");

/** The admin API (auth-js `auth.admin`): only for the service role (service key or a service_role token). */
export function adminRoutes(tk: AuthToolkit, handle: Handle): Router {
  const router = Router({ caseSensitive: true });

  /** A new invited user, after the before-user-created hook (whose refusal undoes the insert). */
  async function insertInvited(
    db: pg.PoolClient,
    project: ProjectRuntime,
    settings: AuthSettings,
    body: { email: string; data?: Record<string, unknown> },
    ip: string | undefined,
  ): Promise<UserRow> {
    const user = (await insertUser(db, {
      email: body.email,
      passwordHash: null,
      confirmed: false,
      metadata: body.data ?? {},
      invited: true,
    }))!;
    await beforeUserCreated(project.authPool, settings, user, ip);
    return user;
  }

  async function requireAdmin(project: ProjectRuntime, req: Request, keyAuth: RequestAuth) {
    const bearer = await bearerAuthOf(project, req, "anon", { thirdParty: false }).catch(() => undefined);
    const role = bearer ? bearer.role : keyAuth.role;
    if (role !== "service_role") throw new AuthApiError(403, "not_admin", "User not allowed");
  }

  async function userOf(project: ProjectRuntime, id: string): Promise<UserRow> {
    const user = uuid.safeParse(id).success ? await userById(project.authPool, id) : undefined;
    if (!user) throw userNotFound();
    return user;
  }

  const admin: Handle = (handler, options) =>
    handle(async (project, req, res, keyAuth) => {
      await requireAdmin(project, req, keyAuth);
      return handler(project, req, res, keyAuth);
    }, options);

  router.get(
    "/admin/users",
    admin(async (project, req, res) => {
      const page = Math.max(1, Number.parseInt(String(req.query.page ?? ""), 10) || 1);
      const perPage = Math.min(
        MAX_PER_PAGE,
        Math.max(1, Number.parseInt(String(req.query.per_page ?? ""), 10) || DEFAULT_PER_PAGE),
      );
      const total = Number(
        (await project.authPool.query("select count(*)::int as n from auth.users")).rows[0].n,
      );
      const { rows } = await project.authPool.query(
        "select * from auth.users order by created_at, id limit $1 offset $2",
        [perPage, (page - 1) * perPage],
      );
      const users = [];
      for (const row of rows) users.push(await apiUser(project.authPool, row));
      const lastPage = Math.max(1, Math.ceil(total / perPage));
      const base = `${tk.apiUrl(req)}/admin/users`;
      const links = [];
      if (page < lastPage) links.push(`<${base}?page=${page + 1}&per_page=${perPage}>; rel="next"`);
      links.push(`<${base}?page=${lastPage}&per_page=${perPage}>; rel="last"`);
      res.set("x-total-count", String(total));
      res.set("Link", links.join(", "));
      return { aud: "authenticated", users };
    }),
  );

  /** Applies the admin's fields to a user within the caller's transaction. */
  async function applyFields(
    db: pg.PoolClient,
    user: UserRow,
    body: z.infer<typeof updateBody>,
  ): Promise<void> {
    const columns: Record<string, unknown> = {};
    if (body.email !== undefined && body.email !== user.email) columns.email = body.email;
    if (body.password !== undefined) columns.encrypted_password = await hashPassword(body.password);
    if (body.email_confirm === true && !user.email_confirmed_at) columns.email_confirmed_at = new Date();
    if (body.email_confirm === false) columns.email_confirmed_at = null;
    if (body.role !== undefined) columns.role = body.role;
    const phone = body.phone ? validatePhone(body.phone) : undefined;
    if (phone !== undefined && phone !== user.phone) columns.phone = phone;
    if (body.phone_confirm === true && !user.phone_confirmed_at) columns.phone_confirmed_at = new Date();
    if (body.phone_confirm === false) columns.phone_confirmed_at = null;
    if (columns.phone_confirmed_at && user.is_anonymous) columns.is_anonymous = false;
    if (body.ban_duration !== undefined) {
      columns.banned_until =
        body.ban_duration === "none" ? null : new Date(Date.now() + durationMs(body.ban_duration));
    }
    if (Object.keys(columns).length) {
      const updated = await setUser(db, user.id, columns);
      await upsertEmailIdentity(db, updated);
      await upsertPhoneIdentity(db, updated);
      if (updated.phone) await syncProviders(db, user.id);
    }
    if (columns.banned_until) await db.query("delete from auth.sessions where user_id = $1", [user.id]);
    if (body.user_metadata) await mergeUserMetadata(db, user.id, "raw_user_meta_data", body.user_metadata);
    if (body.app_metadata) await mergeUserMetadata(db, user.id, "raw_app_meta_data", body.app_metadata);
  }

  const emailExists = () =>
    new AuthApiError(422, "email_exists", "A user with this email address has already been registered");
  const phoneExists = () =>
    new AuthApiError(422, "phone_exists", "Phone number already registered by another user");
  /** A unique violation is the email or number of another user. */
  const uniqueViolation = (e: { code?: string; constraint?: string }): never => {
    if (e.code === "23505") throw e.constraint === "users_phone_key" ? phoneExists() : emailExists();
    throw e;
  };

  router.post(
    "/admin/users",
    admin(async (project, req) => {
      const body = parseBody(createBody, req.body);
      if (!body.email && !body.phone) {
        throw new AuthApiError(
          400,
          "validation_failed",
          "Cannot create a user without either an email or phone",
        );
      }
      const phone = body.phone ? validatePhone(body.phone) : undefined;
      const passwordHash = body.password === undefined ? null : await hashPassword(body.password);
      const row = await withAdminTransaction(project.authPool, async (db) => {
        const user = body.email
          ? await insertUser(db, {
              email: body.email,
              passwordHash,
              confirmed: Boolean(body.email_confirm),
              metadata: {},
            })
          : await insertPhoneUser(db, {
              phone: phone!,
              passwordHash,
              confirmed: Boolean(body.phone_confirm),
              metadata: {},
            });
        if (!user) throw body.email ? emailExists() : phoneExists();
        await applyFields(db, user, {
          ...body,
          email: undefined,
          password: undefined,
          email_confirm: undefined,
          ...(body.email ? {} : { phone: undefined, phone_confirm: undefined }),
        });
        return (await userById(db, user.id))!;
      }).catch(uniqueViolation);
      return apiUser(project.authPool, row);
    }),
  );

  router.get(
    "/admin/users/:id",
    admin(async (project, req) => apiUser(project.authPool, await userOf(project, String(req.params.id)))),
  );

  router.put(
    "/admin/users/:id",
    admin(async (project, req) => {
      const user = await userOf(project, String(req.params.id));
      const body = parseBody(updateBody, req.body);
      const row = await withAdminTransaction(project.authPool, async (db) => {
        await applyFields(db, user, body);
        return (await userById(db, user.id))!;
      }).catch(uniqueViolation);
      return apiUser(project.authPool, row);
    }),
  );

  router.delete(
    "/admin/users/:id",
    admin(async (project, req) => {
      const user = await userOf(project, String(req.params.id));
      await project.authPool.query("delete from auth.users where id = $1", [user.id]);
      return {};
    }),
  );

  router.get(
    "/admin/users/:id/factors",
    admin(async (project, req) => {
      const user = await userOf(project, String(req.params.id));
      const { rows } = await project.authPool.query(
        "select * from auth.mfa_factors where user_id = $1 order by created_at",
        [user.id],
      );
      return rows.map(toFactor);
    }),
  );

  router.delete(
    "/admin/users/:id/factors/:factorId",
    admin(async (project, req) => {
      const user = await userOf(project, String(req.params.id));
      const factorId = String(req.params.factorId);
      const { rows } = uuid.safeParse(factorId).success
        ? await project.authPool.query(
            "delete from auth.mfa_factors where id = $1 and user_id = $2 returning *",
            [factorId, user.id],
          )
        : { rows: [] };
      if (!rows[0]) throw new AuthApiError(404, "mfa_factor_not_found", "Factor not found");
      return toFactor(rows[0]);
    }),
  );

  router.post(
    "/invite",
    admin(async (project, req) => {
      const settings = await tk.settings(project);
      const body = parseBody(inviteBody, req.body);
      const redirectTo = redirectTarget(settings, req.query.redirect_to ?? req.body?.redirect_to);
      let created: UserRow | undefined;
      const row = await withAdminTransaction(project.authPool, async (db) => {
        let user = await userByEmail(db, body.email);
        if (user?.email_confirmed_at) throw emailExists();
        if (!user) {
          user = await insertInvited(db, project, settings, body, req.ip);
          created = user;
        } else {
          user = await setUser(db, user.id, { invited_at: new Date() });
        }
        await issueToken(db, settings, user, "invite", {
          apiUrl: tk.apiUrl(req),
          redirectTo,
          send: true,
          consumeSend: tk.consumeMail(project, settings),
        });
        return (await userById(db, user.id))!;
      });
      if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
      return apiUser(project.authPool, row);
    }),
  );

  /** A verification link and code made as a mail would carry them, without sending anything. */
  router.post(
    "/admin/generate_link",
    admin(async (project, req) => {
      const settings = await tk.settings(project);
      const body = parseBody(generateLinkBody, req.body);
      const redirectTo = redirectTarget(settings, body.redirect_to ?? req.query.redirect_to);
      const common = { apiUrl: tk.apiUrl(req), redirectTo, send: false };
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
            if (!user) {
              user = await insertInvited(db, project, settings, body, req.ip);
            }
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
            user = await setUser(db, user.id, {
              email_change: body.new_email,
              email_change_confirm_status: 0,
            });
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
    }),
  );

  return router;
}
