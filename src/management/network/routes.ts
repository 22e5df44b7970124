import { isIP } from "node:net";
import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { route } from "../route";
import { readSettings, writeSettings } from "../settings";

/** Network restrictions (allowed CIDRs for direct database access) and network bans, stored per project. */

const cidr = (family: 4 | 6) =>
  z.string().refine((c) => {
    const [address, bits] = c.split("/");
    const max = family === 4 ? 32 : 128;
    return isIP(address) === family && (bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= max));
  }, `must be an IPv${family} CIDR`);

const DEFAULTS = { dbAllowedCidrs: ["0.0.0.0/0"], dbAllowedCidrsV6: ["::/0"] };
type Restrictions = typeof DEFAULTS;

function answer(config: Restrictions, itemForm = false) {
  const items = (list: string[], type: "v4" | "v6") => list.map((address) => ({ address, type }));
  return {
    entitlement: "allowed",
    config: itemForm
      ? { dbAllowedCidrs: [...items(config.dbAllowedCidrs, "v4"), ...items(config.dbAllowedCidrsV6, "v6")] }
      : { dbAllowedCidrs: config.dbAllowedCidrs, dbAllowedCidrsV6: config.dbAllowedCidrsV6 },
    status: "applied",
    updated_at: new Date().toISOString(),
    applied_at: new Date().toISOString(),
  };
}

const Lists = z.object({
  dbAllowedCidrs: z.array(z.string()).optional(),
  dbAllowedCidrsV6: z.array(z.string()).optional(),
});

function validate(lists: z.infer<typeof Lists>) {
  const parsed = z
    .object({ dbAllowedCidrs: z.array(cidr(4)).optional(), dbAllowedCidrsV6: z.array(cidr(6)).optional() })
    .safeParse(lists);
  if (!parsed.success)
    throw new HttpError(
      400,
      `Invalid body: add.${parsed.error.issues[0].path.join(".")}: ${parsed.error.issues[0].message}`,
    );
  return parsed.data;
}

export function networkRoutes(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  const base = "/v1/projects/:ref/network-restrictions";
  const read = { permission: "database_network_restrictions_read", scope: "projects:read" };
  const write = { permission: "database_network_restrictions_write", scope: "projects:write" };

  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path: base,
      summary: "Gets the network restrictions",
      access: read,
      status: 200,
    },
    async ({ project }) => answer(await readSettings(ctx, project.ref, "network_restrictions", DEFAULTS)),
  );
  route(
    ctx,
    router,
    {
      method: "post",
      project: "any",
      path: `${base}/apply`,
      summary: "Replaces the allowed CIDRs",
      access: write,
      body: z.object({
        dbAllowedCidrs: z.array(cidr(4)).optional(),
        dbAllowedCidrsV6: z.array(cidr(6)).optional(),
      }),
      status: 201,
    },
    async ({ project, body }) => {
      return answer(await writeSettings(ctx, project.ref, "network_restrictions", DEFAULTS, body));
    },
  );
  route(
    ctx,
    router,
    {
      method: "patch",
      project: "any",
      path: base,
      summary: "Adds or removes allowed CIDRs",
      access: write,
      body: z.object({ add: Lists.optional(), remove: Lists.optional() }),
      status: 200,
    },
    async ({ project, body }) => {
      const add = validate(body.add ?? {});
      const remove = body.remove ?? {};
      const current = await readSettings(ctx, project.ref, "network_restrictions", DEFAULTS);
      const merge = (list: string[], plus: string[] = [], minus: string[] = []) =>
        [...new Set([...list, ...plus])].filter((c) => !minus.includes(c));
      const next = {
        dbAllowedCidrs: merge(current.dbAllowedCidrs, add.dbAllowedCidrs, remove.dbAllowedCidrs),
        dbAllowedCidrsV6: merge(current.dbAllowedCidrsV6, add.dbAllowedCidrsV6, remove.dbAllowedCidrsV6),
      };
      return answer(await writeSettings(ctx, project.ref, "network_restrictions", DEFAULTS, next), true);
    },
  );

  const bansRead = { permission: "database_network_bans_read", scope: "projects:read" };
  const BANS = { banned: [] as string[] };
  route(
    ctx,
    router,
    {
      method: "post",
      project: "any",
      path: "/v1/projects/:ref/network-bans/retrieve",
      summary: "Lists banned IPv4 addresses",
      access: bansRead,
      status: 201,
    },
    async ({ project }) => ({
      banned_ipv4_addresses: (await readSettings(ctx, project.ref, "network_bans", BANS)).banned,
    }),
  );
  route(
    ctx,
    router,
    {
      method: "post",
      project: "any",
      path: "/v1/projects/:ref/network-bans/retrieve/enriched",
      summary: "Lists banned addresses with details",
      access: bansRead,
      status: 201,
    },
    async ({ project }) => ({
      banned_ipv4_addresses: (await readSettings(ctx, project.ref, "network_bans", BANS)).banned.map((a) => ({
        banned_address: a,
        identifier: "database",
        type: "fail2ban",
      })),
    }),
  );
  route(
    ctx,
    router,
    {
      method: "delete",
      project: "any",
      path: "/v1/projects/:ref/network-bans",
      summary: "Lifts bans of IPv4 addresses",
      access: { permission: "database_network_bans_write", scope: "projects:write" },
      body: z.object({
        ipv4_addresses: z.array(cidr(4)),
        requester_ip: z.boolean().optional(),
        identifier: z.string().optional(),
      }),
      status: 200,
    },
    async ({ project, body }) => {
      const current = await readSettings(ctx, project.ref, "network_bans", BANS);
      await writeSettings(ctx, project.ref, "network_bans", BANS, {
        banned: current.banned.filter((a) => !body.ipv4_addresses.includes(a)),
      });
      return {};
    },
  );
  return router;
}
