import { isIP } from "node:net";
import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import {
  BANS_DEFAULTS,
  RESTRICTIONS_DEFAULTS,
  SSL_DEFAULTS,
  banAddress,
  liftBans,
  type Restrictions,
} from "../../projects/access";
import { checkCidr } from "../../net/cidr";
import type { ProjectRuntime } from "../../projects/runtime";
import { HttpError } from "../http";
import { configDocumentRoutes } from "../configDocument";
import { routeTable } from "../route";
import { readSettings, writeSettings } from "../../projects/settings";
import { settingsDocument } from "../configDocument";

/**
 * Network restrictions, network bans and SSL enforcement of direct database connections. On the cluster
 * Strata runs itself (the embedded one) they are written into its pg_hba.conf and reloaded before the answer
 * (`status: "applied"`); on a cluster given by DATABASE_URL they are kept (`status: "stored"`), as Strata does
 * not own that cluster's pg_hba.conf. They apply to database connections only, as their names say
 * (`dbAllowedCidrs`): the project's HTTP APIs are not restricted by them.
 */

const cidr = (family: 4 | 6) =>
  z.string().superRefine((value, check) => {
    const problem = checkCidr(value, family);
    if (problem) check.addIssue({ code: "custom", message: `${value} ${problem}` });
  });

const CidrLists = z
  .object({
    dbAllowedCidrs: z.array(cidr(4)).max(100).optional(),
    dbAllowedCidrsV6: z.array(cidr(6)).max(100).optional(),
  })
  .strict();

const RestrictionsShape = z.object({
  dbAllowedCidrs: z.array(z.string()),
  dbAllowedCidrsV6: z.array(z.string()),
});
const Item = z.object({ address: z.string(), type: z.enum(["v4", "v6"]) });
const restrictionsAnswer = (config: z.ZodType) =>
  z.object({
    entitlement: z.literal("allowed"),
    config,
    old_config: config.optional(),
    status: z.enum(["applied", "stored"]),
    updated_at: z.string(),
    applied_at: z.string().optional(),
  });

interface StoredRestrictions extends Restrictions {
  old?: Restrictions;
  updated_at?: string;
  applied_at?: string;
}

/** The spec's access rules of the family's operations. */
export const ACCESS = {
  restrictionsRead: { permission: "database_network_restrictions_read", scope: "projects:read" },
  restrictionsWrite: { permission: "database_network_restrictions_write", scope: "projects:write" },
  bansRead: { permission: "database_network_bans_read", scope: "projects:read" },
  bansWrite: { permission: "database_network_bans_write", scope: "projects:write" },
  sslRead: { permission: "database_ssl_config_read", scope: "database:read" },
  sslWrite: { permission: "database_ssl_config_write", scope: "database:write" },
};

const managed = (ctx: AppContext, project: ProjectRuntime) =>
  ctx.accessOf?.(project.record.clusterId) !== undefined;

/** Enforces the project's stored rules on its cluster when Strata runs that cluster. */
async function enforce(ctx: AppContext, project: ProjectRuntime): Promise<boolean> {
  const access = ctx.accessOf?.(project.record.clusterId);
  if (!access) return false;
  try {
    await access.apply();
  } catch (e) {
    ctx.log.error({ ref: project.ref, err: (e as Error).message }, "applying access rules failed");
    throw new HttpError(
      500,
      "The cluster's access rules could not be applied; the previous rules stay in force",
    );
  }
  return true;
}

function restrictionsOf(stored: StoredRestrictions, itemForm: boolean, applied: boolean) {
  const items = (list: string[], type: "v4" | "v6") => list.map((address) => ({ address, type }));
  const shape = (c: Restrictions) =>
    itemForm
      ? { dbAllowedCidrs: items(c.dbAllowedCidrs, "v4"), dbAllowedCidrsV6: items(c.dbAllowedCidrsV6, "v6") }
      : { dbAllowedCidrs: c.dbAllowedCidrs, dbAllowedCidrsV6: c.dbAllowedCidrsV6 };
  return {
    entitlement: "allowed",
    config: shape(stored),
    ...(stored.old ? { old_config: shape(stored.old) } : {}),
    status: applied ? "applied" : "stored",
    updated_at: stored.updated_at ?? new Date(0).toISOString(),
    ...(applied && stored.applied_at ? { applied_at: stored.applied_at } : {}),
  };
}

async function readRestrictions(ctx: AppContext, ref: string): Promise<StoredRestrictions> {
  return readSettings<StoredRestrictions>(ctx, ref, "network_restrictions", RESTRICTIONS_DEFAULTS);
}

/** The allowed CIDRs as GET .../network-restrictions answers them. */
export async function networkRestrictions(ctx: AppContext, project: ProjectRuntime) {
  return restrictionsOf(await readRestrictions(ctx, project.ref), false, managed(ctx, project));
}

const sslStore = (ctx: AppContext) => settingsDocument(ctx, "ssl_enforcement", SSL_DEFAULTS);

const sslState = (database: boolean, appliedSuccessfully: boolean) => ({
  currentConfig: { database },
  appliedSuccessfully,
});

/** SSL enforcement as GET .../ssl-enforcement answers it. */
export async function sslEnforcement(ctx: AppContext, project: ProjectRuntime) {
  return sslState((await sslStore(ctx).read(project.ref)).database, managed(ctx, project));
}

async function replaceRestrictions(ctx: AppContext, project: ProjectRuntime, next: Restrictions) {
  const current = await readRestrictions(ctx, project.ref);
  const now = new Date().toISOString();
  await writeSettings<StoredRestrictions>(ctx, project.ref, "network_restrictions", RESTRICTIONS_DEFAULTS, {
    dbAllowedCidrs: next.dbAllowedCidrs,
    dbAllowedCidrsV6: next.dbAllowedCidrsV6,
    old: { dbAllowedCidrs: current.dbAllowedCidrs, dbAllowedCidrsV6: current.dbAllowedCidrsV6 },
    updated_at: now,
  });
  const applied = await enforce(ctx, project);
  return writeSettings<StoredRestrictions>(
    ctx,
    project.ref,
    "network_restrictions",
    RESTRICTIONS_DEFAULTS,
    applied ? { applied_at: new Date().toISOString() } : {},
  ).then((stored) => ({ stored, applied }));
}

export function networkRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/network-restrictions";

  routes.get(
    base,
    "Gets the CIDRs allowed to connect to the database directly",
    { access: ACCESS.restrictionsRead, response: restrictionsAnswer(RestrictionsShape), status: 200 },
    async ({ project }) => networkRestrictions(ctx, project),
  );
  routes.post(
    `${base}/apply`,
    "Replaces the allowed CIDRs (enforced in pg_hba.conf on the embedded cluster)",
    {
      access: ACCESS.restrictionsWrite,
      body: CidrLists,
      response: restrictionsAnswer(RestrictionsShape),
      status: 201,
    },
    async ({ project, body }) => {
      const current = await readRestrictions(ctx, project.ref);
      const { stored, applied } = await replaceRestrictions(ctx, project, {
        dbAllowedCidrs: body.dbAllowedCidrs ?? current.dbAllowedCidrs,
        dbAllowedCidrsV6: body.dbAllowedCidrsV6 ?? current.dbAllowedCidrsV6,
      });
      return restrictionsOf(stored, false, applied);
    },
  );
  const Lists = z
    .object({
      dbAllowedCidrs: z.array(z.string()).optional(),
      dbAllowedCidrsV6: z.array(z.string()).optional(),
    })
    .strict();
  routes.patch(
    base,
    "Adds or removes allowed CIDRs",
    {
      access: ACCESS.restrictionsWrite,
      body: z.object({ add: CidrLists.optional(), remove: Lists.optional() }).strict(),
      response: restrictionsAnswer(
        z.object({ dbAllowedCidrs: z.array(Item), dbAllowedCidrsV6: z.array(Item) }),
      ),
      status: 200,
    },
    async ({ project, body }) => {
      const current = await readRestrictions(ctx, project.ref);
      const merge = (list: string[], plus: string[] = [], minus: string[] = []) =>
        [...new Set([...list, ...plus])].filter((c) => !minus.includes(c));
      const { stored, applied } = await replaceRestrictions(ctx, project, {
        dbAllowedCidrs: merge(current.dbAllowedCidrs, body.add?.dbAllowedCidrs, body.remove?.dbAllowedCidrs),
        dbAllowedCidrsV6: merge(
          current.dbAllowedCidrsV6,
          body.add?.dbAllowedCidrsV6,
          body.remove?.dbAllowedCidrsV6,
        ),
      });
      return restrictionsOf(stored, true, applied);
    },
  );

  /** The banned addresses, canonical; an entry that is not one address bans nothing and is not listed. */
  const banned = async (project: ProjectRuntime) => {
    const stored = (await readSettings(ctx, project.ref, "network_bans", BANS_DEFAULTS)).banned;
    return [...new Set(stored.map(banAddress).filter((a) => a !== undefined))];
  };
  routes.post(
    "/v1/projects/:ref/network-bans/retrieve",
    "Lists IPv4 addresses banned after repeated failed database logins (a ban ends by itself after 30 minutes)",
    {
      access: ACCESS.bansRead,
      response: z.object({ banned_ipv4_addresses: z.array(z.string()) }),
      status: 201,
    },
    async ({ project }) => ({
      banned_ipv4_addresses: (await banned(project)).filter((a) => isIP(a) === 4),
    }),
  );
  routes.post(
    "/v1/projects/:ref/network-bans/retrieve/enriched",
    "Lists banned addresses (IPv4 and IPv6) with what banned them",
    {
      access: ACCESS.bansRead,
      response: z.object({
        banned_ipv4_addresses: z.array(
          z.object({ banned_address: z.string(), identifier: z.string(), type: z.string() }),
        ),
      }),
      status: 201,
    },
    async ({ project }) => ({
      banned_ipv4_addresses: (await banned(project)).map((a) => ({
        banned_address: a,
        identifier: "database",
        type: "fail2ban",
      })),
    }),
  );
  routes.delete(
    "/v1/projects/:ref/network-bans",
    "Lifts bans (`requester_ip: true` also lifts the caller's own address)",
    {
      access: ACCESS.bansWrite,
      body: z.object({
        ipv4_addresses: z.array(
          z.string().refine((a) => banAddress(a) !== undefined, "must be a single IP address"),
        ),
        requester_ip: z.boolean().optional(),
        identifier: z.string().optional(),
      }),
      response: z.object({}),
      status: 200,
    },
    async ({ project, body, req }) => {
      const lifted = [...body.ipv4_addresses];
      const caller = banAddress(req.ip);
      if (body.requester_ip && caller) lifted.push(caller);
      await liftBans(ctx.platformPool, project.ref, lifted);
      await enforce(ctx, project);
      return {};
    },
  );

  const sslAnswer = z.object({
    currentConfig: z.object({ database: z.boolean() }),
    appliedSuccessfully: z.boolean(),
  });
  configDocumentRoutes(routes, {
    path: "/v1/projects/:ref/ssl-enforcement",
    store: sslStore(ctx),
    read: {
      summary: "Gets SSL enforcement of direct database connections",
      access: ACCESS.sslRead,
      response: sslAnswer,
      answer: (stored, { project }) => sslState(stored.database, managed(ctx, project)),
    },
    update: {
      method: "put",
      summary: "Sets SSL enforcement: non-loopback connections without TLS are refused (hostssl)",
      access: ACCESS.sslWrite,
      body: z.object({ requestedConfig: z.object({ database: z.boolean() }).strict() }),
      response: sslAnswer,
      status: 200,
      changes: (body) => body.requestedConfig,
      answer: async (stored, { project }) => sslState(stored.database, await enforce(ctx, project)),
    },
  });
  return routes.router;
}
