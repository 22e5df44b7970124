import { randomUUID } from "node:crypto";
import { Router } from "express";
import { z } from "zod";
import { parseIdentityProvider } from "../../auth/samlProvider";
import type { SsoProvider } from "../../auth/store/saml";
import { fetchPublicText, OutboundError } from "../../net/outbound";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { routeTable } from "../route";
import { readSettings, writeSettings } from "../../projects/settings";

/**
 * SAML single sign-on providers: their metadata (given, or fetched from metadata_url) and entity id, domains
 * and attribute mapping. The auth service signs users in through them (src/auth/handlers/sso.ts, samlAcs.ts).
 */

const Domain = z.string().regex(/^(?=.{1,253}$)([a-z0-9-]+\.)+[a-z]{2,}$/i, "must be a domain name");
const Create = z
  .object({
    type: z.literal("saml"),
    metadata_xml: z.string().optional(),
    metadata_url: z.string().url().optional(),
    domains: z.array(Domain).optional(),
    attribute_mapping: z.record(z.string(), z.unknown()).optional(),
    name_id_format: z.string().optional(),
  })
  .refine((b) => b.metadata_xml || b.metadata_url, "metadata_xml or metadata_url is required");
const Update = z.object({
  metadata_xml: z.string().optional(),
  metadata_url: z.string().url().optional(),
  domains: z.array(Domain).optional(),
  attribute_mapping: z.record(z.string(), z.unknown()).optional(),
  name_id_format: z.string().optional(),
});

/**
 * The provider's metadata and entity id: `metadata_xml` as given, or the document at `metadata_url` fetched
 * as from outside (https, no internal address). It must describe an identity provider with an
 * HTTP-Redirect sign-on service, which the auth service's sign-in sends users to.
 */
async function metadataOf(xml: string | undefined, url: string | undefined) {
  let text = xml;
  if (!text && url) {
    try {
      text = await fetchPublicText(url);
    } catch (e) {
      const reason = e instanceof OutboundError ? e.message : "it could not be fetched";
      throw new HttpError(400, `Invalid body: metadata_url: ${reason}`);
    }
  }
  const field = xml ? "metadata_xml" : "metadata_url";
  const idp = parseIdentityProvider(text ?? "");
  const entityId = idp?.entityMeta.getEntityID();
  if (!idp || typeof entityId !== "string" || !entityId) {
    throw new HttpError(400, `Invalid body: ${field}: no EntityDescriptor entityID found`);
  }
  if (typeof idp.entityMeta.getSingleSignOnService("redirect") !== "string") {
    throw new HttpError(
      400,
      `Invalid body: ${field}: the identity provider has no HTTP-Redirect SingleSignOnService`,
    );
  }
  return { xml: text!, entityId };
}

const domainsOf = (names: string[], now: string) =>
  names.map((domain) => ({ id: randomUUID(), domain, created_at: now, updated_at: now }));

export function ssoRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/config/auth/sso/providers";
  const read = { permission: "auth_config_read", scope: "auth:read" };
  const write = { permission: "auth_config_write", scope: "auth:write" };
  const load = async (ref: string) =>
    (await readSettings(ctx, ref, "sso_providers", { items: [] as SsoProvider[] })).items;
  const save = (ref: string, items: SsoProvider[]) =>
    writeSettings(ctx, ref, "sso_providers", { items: [] as SsoProvider[] }, { items });
  const find = (items: SsoProvider[], id: string) => {
    const p = items.find((x) => x.id === id);
    if (!p) throw new HttpError(404, `SSO provider ${id} not found`);
    return p;
  };

  routes.post(
    base,
    "Creates a SAML provider",
    { access: write, body: Create, status: 201 },
    async ({ project, body }) => {
      const now = new Date().toISOString();
      const id = randomUUID();
      const metadata = await metadataOf(body.metadata_xml, body.metadata_url);
      const provider: SsoProvider = {
        id,
        saml: {
          id: randomUUID(),
          entity_id: metadata.entityId,
          ...(body.metadata_url ? { metadata_url: body.metadata_url } : {}),
          metadata_xml: metadata.xml,
          ...(body.attribute_mapping ? { attribute_mapping: body.attribute_mapping } : {}),
          ...(body.name_id_format ? { name_id_format: body.name_id_format } : {}),
        },
        domains: domainsOf(body.domains ?? [], now),
        created_at: now,
        updated_at: now,
      };
      const items = await load(project.ref);
      const taken = items
        .flatMap((p) => p.domains.map((d) => d.domain))
        .find((d) => body.domains?.includes(d));
      if (taken) throw new HttpError(400, `Domain ${taken} already belongs to another SSO provider`);
      await save(project.ref, [...items, provider]);
      return provider;
    },
  );
  routes.get(base, "Lists SSO providers", { access: read, status: 200 }, async ({ project }) => ({
    items: await load(project.ref),
  }));
  routes.get(
    `${base}/:id`,
    "Gets an SSO provider",
    { access: read, status: 200 },
    async ({ project, params }) => find(await load(project.ref), params.id),
  );
  routes.put(
    `${base}/:id`,
    "Updates an SSO provider",
    { access: write, body: Update, status: 200 },
    async ({ project, params, body }) => {
      const items = await load(project.ref);
      const p = find(items, params.id);
      const now = new Date().toISOString();
      if (body.metadata_xml || body.metadata_url) {
        const metadata = await metadataOf(body.metadata_xml, body.metadata_url);
        // As the platform: a provider keeps its entity id; new metadata must be the same provider's.
        if (metadata.entityId !== p.saml.entity_id) {
          throw new HttpError(400, "Invalid body: the metadata's entityID differs from the provider's");
        }
        p.saml.metadata_xml = metadata.xml;
        if (body.metadata_url) p.saml.metadata_url = body.metadata_url;
      }
      if (body.attribute_mapping) p.saml.attribute_mapping = body.attribute_mapping;
      if (body.name_id_format) p.saml.name_id_format = body.name_id_format;
      if (body.domains) p.domains = domainsOf(body.domains, now);
      p.updated_at = now;
      await save(project.ref, items);
      return p;
    },
  );
  routes.delete(
    `${base}/:id`,
    "Deletes an SSO provider",
    { access: write, status: 200 },
    async ({ project, params }) => {
      const items = await load(project.ref);
      const p = find(items, params.id);
      await save(
        project.ref,
        items.filter((x) => x.id !== params.id),
      );
      return p;
    },
  );
  return routes.router;
}
