import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { randomSecret } from "../../platform/ids";
import { HttpError } from "../http";
import { routeTable } from "../route";
import { challengeName, resolverFor, verifyHostnameRecords } from "./dns";
import { reservedNameProblem } from "./reservedNames";
import { customHostnameResponse, vanitySubdomainResponse } from "./shapes";
import {
  activateCustomHostname,
  claimVanityHostname,
  hostnameOf,
  isHostnameTaken,
  NOT_STARTED,
  recordVerification,
  releaseHostname,
  requestCustomHostname,
  SERVED,
  type HostnameRow,
} from "./store";

const hostnameSchema = z
  .string()
  .trim()
  .toLowerCase()
  .max(253, "must be at most 253 characters")
  .regex(
    /^(?=.*[a-z])([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/,
    "must be a host name such as api.example.com",
  );

const subdomainSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{2,62}$/, "must be 3-63 lowercase letters, digits or dashes")
  .superRefine((name, check) => {
    const problem = reservedNameProblem(name);
    if (problem) check.addIssue({ code: "custom", message: `${name} ${problem}` });
  });

/** The platform's custom hostname answer for a project's row (or for none). */
function customHostnameBody(ctx: AppContext, ref: string, row: HostnameRow | undefined) {
  const origin = `${ref}.${ctx.config.domain}`;
  return {
    status: row?.status ?? NOT_STARTED,
    custom_hostname: row?.hostname ?? "",
    data: {
      success: true,
      errors: [],
      messages: [],
      result: {
        id: ref,
        hostname: row?.hostname ?? "",
        // Strata serves HTTP; TLS for a custom hostname is the operator's proxy's, not managed here.
        ssl: { status: "not_managed", validation_records: [], validation_errors: [] },
        ownership_verification: {
          type: "txt",
          name: row ? challengeName(row.hostname) : "",
          value: row?.verification_token ?? "",
        },
        custom_origin_server: origin,
        verification_errors: row?.verification_errors ?? [],
        status: row?.status === SERVED ? "active" : row ? "pending" : "",
      },
    },
  };
}

/**
 * Custom hostname (initialize: the project's request and the DNS records to make → reverify: the records
 * verify, and the name becomes the project's → activate: Strata serves the project's APIs at it) and vanity
 * subdomain (`<name>.<STRATA_DOMAIN>`, served at once, never a reserved name). A name belongs to one project,
 * and no answer tells a project whether another asked for or holds a custom hostname.
 */
export function domainRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const resolver = resolverFor(ctx.config.dnsServers);
  const custom = (ref: string) => hostnameOf(ctx.platformPool, ref, "custom");
  const answer = async (ref: string) => customHostnameBody(ctx, ref, await custom(ref));
  const initialized = async (ref: string) => {
    const row = await custom(ref);
    if (!row) throw new HttpError(400, "This project has no custom hostname: initialize one first");
    return row;
  };
  const served = () => ctx.registry.hostnames.reload();
  const read = { permission: "custom_domain_read", scope: "domains:read" } as const;
  const write = { permission: "custom_domain_write", scope: "domains:write" } as const;

  routes.get(
    "/v1/projects/:ref/custom-hostname",
    "Gets the custom hostname",
    { access: read, status: 200, response: customHostnameResponse },
    async ({ project }) => answer(project.ref),
  );
  routes.post(
    "/v1/projects/:ref/custom-hostname/initialize",
    "Starts serving a custom hostname: answers the DNS records to create",
    {
      feature: { name: "custom_domain" },
      access: write,
      body: z.object({ custom_hostname: hostnameSchema }),
      rateLimits: [{ name: "POST custom-hostname/initialize", points: 10, seconds: 60 }],
      status: 201,
      response: customHostnameResponse,
    },
    async ({ project, body }) => {
      const hostname = body.custom_hostname;
      if (hostname === ctx.config.domain || hostname.endsWith(`.${ctx.config.domain}`))
        throw new HttpError(
          400,
          `custom_hostname must not be under ${ctx.config.domain}, which Strata serves itself`,
        );
      // Only a request: the name is the project's once reverify finds its records (a squatter's request
      // holds nothing, and the answer is the same whether another project asked for or holds the name).
      await requestCustomHostname(ctx.platformPool, project.ref, hostname, randomSecret(24));
      await served();
      return answer(project.ref);
    },
  );
  routes.post(
    "/v1/projects/:ref/custom-hostname/reverify",
    "Checks the custom hostname's DNS records again",
    {
      access: write,
      rateLimits: [{ name: "POST custom-hostname/reverify", points: 10, seconds: 60 }],
      status: 201,
      response: customHostnameResponse,
    },
    async ({ project }) => {
      const row = await initialized(project.ref);
      const errors = await verifyHostnameRecords(
        resolver,
        row.hostname,
        `${project.ref}.${ctx.config.domain}`,
        row.verification_token,
      );
      await recordVerification(ctx.platformPool, row, errors);
      await served();
      return answer(project.ref);
    },
  );
  routes.post(
    "/v1/projects/:ref/custom-hostname/activate",
    "Serves the project's APIs at its verified custom hostname",
    { feature: { name: "custom_domain" }, access: write, status: 201, response: customHostnameResponse },
    async ({ project }) => {
      await initialized(project.ref);
      if (!(await activateCustomHostname(ctx.platformPool, project.ref)))
        throw new HttpError(
          400,
          "The custom hostname's DNS records are not verified yet: create them and call reverify",
        );
      await served();
      return answer(project.ref);
    },
  );
  routes.delete(
    "/v1/projects/:ref/custom-hostname",
    "Stops serving the custom hostname and forgets it",
    { access: write, rateLimits: [{ name: "DELETE custom-hostname", points: 10, seconds: 60 }], status: 200 },
    async ({ project }) => {
      await releaseHostname(ctx.platformPool, project.ref, "custom");
      await served();
      return {};
    },
  );

  const vanityRead = { permission: "vanity_subdomain_read", scope: "domains:read" } as const;
  const vanityWrite = { permission: "vanity_subdomain_write", scope: "domains:write" } as const;
  const vanityHost = (name: string) => `${name}.${ctx.config.domain}`;
  /** What checking a vanity subdomain and activating it both take: the feature, the write rule, the name. */
  const vanityRequest = {
    feature: { name: "vanity_subdomain", status: 400 },
    access: vanityWrite,
    body: z.object({ vanity_subdomain: subdomainSchema }),
  } as const;
  routes.get(
    "/v1/projects/:ref/vanity-subdomain",
    "Gets the vanity subdomain",
    {
      feature: { name: "vanity_subdomain", status: 400 },
      rateLimits: [{ name: "GET vanity-subdomain", points: 10, seconds: 60 }],
      access: vanityRead,
      status: 200,
      response: vanitySubdomainResponse,
    },
    async ({ project }) => {
      const row = await hostnameOf(ctx.platformPool, project.ref, "vanity");
      return row ? { status: "active", custom_domain: row.hostname } : { status: "not-used" };
    },
  );
  routes.post(
    "/v1/projects/:ref/vanity-subdomain/check-availability",
    "Checks whether a vanity subdomain is free",
    { ...vanityRequest, status: 201, response: z.object({ available: z.boolean() }) },
    async ({ project, body }) => {
      return {
        available: !(await isHostnameTaken(ctx.platformPool, vanityHost(body.vanity_subdomain), project.ref)),
      };
    },
  );
  routes.post(
    "/v1/projects/:ref/vanity-subdomain/activate",
    "Serves the project's APIs at <vanity_subdomain>.<STRATA_DOMAIN>",
    { ...vanityRequest, status: 201, response: z.object({ custom_domain: z.string() }) },
    async ({ project, body }) => {
      const hostname = vanityHost(body.vanity_subdomain);
      if (!(await claimVanityHostname(ctx.platformPool, project.ref, hostname)))
        throw new HttpError(400, `The vanity subdomain ${body.vanity_subdomain} is not available`);
      await served();
      return { custom_domain: hostname };
    },
  );
  routes.delete(
    "/v1/projects/:ref/vanity-subdomain",
    "Stops serving the vanity subdomain",
    { access: vanityWrite, status: 200 },
    async ({ project }) => {
      await releaseHostname(ctx.platformPool, project.ref, "vanity");
      await served();
      return {};
    },
  );
  return routes.router;
}
