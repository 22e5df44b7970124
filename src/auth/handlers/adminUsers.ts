import type pg from "pg";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import type { AuthCall } from "../call";
import { AuthApiError, emailExists, factorNotFound, passkeyNotFound, userNotFound } from "../errors";
import { email, metadata, parse, rowById } from "../input";
import { hashPassword } from "../passwords";
import { validatePhone } from "../sms";
import { deleteFactorOfUser, factorsOf, toFactor } from "../store/factors";
import { deletePasskey, passkeyOfUser, passkeysOf, toPasskey } from "../store/passkeys";
import { syncProviders, upsertEmailIdentity, upsertPhoneIdentity } from "../store/identities";
import { endSessions } from "../store/sessions";
import {
  apiUser,
  countUsers,
  deleteUser,
  insertPhoneUser,
  insertUser,
  mergeUserMetadata,
  setUser,
  userById,
  usersPage,
  type UserRow,
} from "../store/users";

/** /admin/users (auth-js `auth.admin`): the project's users listed, made, read, changed and deleted. */

const DEFAULT_PER_PAGE = 50;
const MAX_PER_PAGE = 1000;

const userBody = z.object({
  email: email.optional(),
  password: z.string().min(1).optional(),
  email_confirm: z.boolean().optional(),
  phone: z.string().optional(),
  phone_confirm: z.boolean().optional(),
  user_metadata: metadata.optional(),
  app_metadata: metadata.optional(),
  ban_duration: z.string().optional(),
  role: z.string().optional(),
});
type UserFields = z.infer<typeof userBody>;

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

const phoneTaken = () =>
  new AuthApiError(422, "phone_exists", "Phone number already registered by another user");
/** A unique violation is the email or number of another user. */
const uniqueViolation = (e: { code?: string; constraint?: string }): never => {
  if (e.code === "23505") throw e.constraint === "users_phone_key" ? phoneTaken() : emailExists();
  throw e;
};

/** The user named in the path (`:id`). */
async function userOf({ project, req }: AuthCall): Promise<UserRow> {
  return rowById(req.params.id, (id) => userById(project.authPool, id), userNotFound);
}

/** GET /admin/users: a page of users, with the total and the links to the next and last page. */
export async function list({ project, req, res, apiUrl }: AuthCall) {
  const page = Math.max(1, Number.parseInt(String(req.query.page ?? ""), 10) || 1);
  const perPage = Math.min(
    MAX_PER_PAGE,
    Math.max(1, Number.parseInt(String(req.query.per_page ?? ""), 10) || DEFAULT_PER_PAGE),
  );
  const total = await countUsers(project.authPool);
  const users = [];
  for (const row of await usersPage(project.authPool, perPage, (page - 1) * perPage))
    users.push(await apiUser(project.authPool, row));
  const lastPage = Math.max(1, Math.ceil(total / perPage));
  const base = `${apiUrl}/admin/users`;
  const links = [];
  if (page < lastPage) links.push(`<${base}?page=${page + 1}&per_page=${perPage}>; rel="next"`);
  links.push(`<${base}?page=${lastPage}&per_page=${perPage}>; rel="last"`);
  res.set("x-total-count", String(total));
  res.set("Link", links.join(", "));
  return { aud: "authenticated", users };
}

/** Applies the admin's fields to a user within the caller's transaction. */
async function applyFields(db: pg.PoolClient, user: UserRow, body: UserFields): Promise<void> {
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
  // A banned user's sessions end.
  if (columns.banned_until) await endSessions(db, user.id, null, "global");
  if (body.user_metadata) await mergeUserMetadata(db, user.id, "raw_user_meta_data", body.user_metadata);
  if (body.app_metadata) await mergeUserMetadata(db, user.id, "raw_app_meta_data", body.app_metadata);
}

/** POST /admin/users: a user with an email address or a phone number, and the other fields given. */
export async function create({ project, req }: AuthCall) {
  const body = parse(userBody, req.body);
  if (!body.email && !body.phone) {
    throw new AuthApiError(400, "validation_failed", "Cannot create a user without either an email or phone");
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
    if (!user) throw body.email ? emailExists() : phoneTaken();
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
}

/** GET /admin/users/:id */
export async function get(call: AuthCall) {
  return apiUser(call.project.authPool, await userOf(call));
}

/** PUT /admin/users/:id: the fields given applied (a ban ends the user's sessions). */
export async function update(call: AuthCall) {
  const user = await userOf(call);
  const body = parse(userBody, call.req.body);
  const row = await withAdminTransaction(call.project.authPool, async (db) => {
    await applyFields(db, user, body);
    return (await userById(db, user.id))!;
  }).catch(uniqueViolation);
  return apiUser(call.project.authPool, row);
}

/** DELETE /admin/users/:id */
export async function remove(call: AuthCall) {
  const user = await userOf(call);
  await deleteUser(call.project.authPool, user.id);
  return {};
}

/** GET /admin/users/:id/factors */
export async function listFactors(call: AuthCall) {
  const user = await userOf(call);
  return (await factorsOf(call.project.authPool, user.id)).map(toFactor);
}

/** DELETE /admin/users/:id/factors/:factorId */
export async function removeFactor(call: AuthCall) {
  const user = await userOf(call);
  const removed = await rowById(
    call.req.params.factorId,
    (id) => deleteFactorOfUser(call.project.authPool, user.id, id),
    factorNotFound,
  );
  return toFactor(removed);
}

/** GET /admin/users/:id/passkeys */
export async function listPasskeys(call: AuthCall) {
  const user = await userOf(call);
  return (await passkeysOf(call.project.authPool, user.id)).map(toPasskey);
}

/** DELETE /admin/users/:id/passkeys/:passkeyId (204) */
export async function removePasskey(call: AuthCall) {
  const user = await userOf(call);
  const passkey = await rowById(
    call.req.params.passkeyId,
    (id) => passkeyOfUser(call.project.authPool, user.id, id),
    passkeyNotFound,
  );
  await deletePasskey(call.project.authPool, passkey.id);
  call.res.status(204).end();
}
