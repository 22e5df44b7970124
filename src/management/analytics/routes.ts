import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { functionRuntimeOf } from "../../functions/runtime";
import { found, HttpError } from "../http";
import { routeTable } from "../route";
import { queryLogs } from "../../logs/query";
import { kekOf } from "../../platform/kek";
import { LOG_RETENTION_DAYS, projectBilling } from "../billing/plans";
import { createDrain, deleteDrain, drainsOf, updateDrain, type DrainInput } from "../../logs/drainStore";
import { DRAIN_BACKENDS, type DrainRow } from "../../logs/drains";
import { invocationStats, requestCounts, requestsOfLastDay, type Window } from "./store";

/**
 * Analytics: log queries over the project's log sources (src/logs records them; the query runs in
 * src/logs/query.ts), usage counters from `platform.api_usage` (counted by the HTTP layer), edge function
 * invocation stats from `platform.function_logs` (written by src/functions) and log drains (forwarded by
 * src/logs/drains.ts).
 */

const INTERVALS: Record<string, Window> = {
  "15min": { span: "15 minutes", bucket: "minute" },
  "30min": { span: "30 minutes", bucket: "minute" },
  "1hr": { span: "1 hour", bucket: "minute" },
  "3hr": { span: "3 hours", bucket: "hour" },
  "1day": { span: "1 day", bucket: "hour" },
  "3day": { span: "3 days", bucket: "hour" },
  "7day": { span: "7 days", bucket: "day" },
};

const DAY = 24 * 3600 * 1000;

const logQueryResponse = z.object({
  result: z.array(z.record(z.string(), z.unknown())),
  error: z.string().nullable(),
});
const drainResponse = z.object({
  type: z.literal("log_drain"),
  id: z.string(),
  attributes: z.object({
    name: z.string(),
    description: z.string(),
    backend_type: z.string(),
    config: z.object({ url: z.string(), headers: z.array(z.string()) }),
    last_error: z.string().nullable(),
  }),
});

const LogQuery = z.object({
  sql: z.string().optional(),
  iso_timestamp_start: z.string().datetime({ offset: true }).optional(),
  iso_timestamp_end: z.string().datetime({ offset: true }).optional(),
});

const LogDrain = z.object({
  name: z.string().min(1).max(100),
  description: z.string().max(500).optional(),
  backend_type: z.enum([
    "postgres",
    "bigquery",
    "clickhouse",
    "webhook",
    "datadog",
    "elastic",
    "loki",
    "sentry",
    "s3",
    "axiom",
    "otlp",
  ]),
  config: z.record(z.string(), z.unknown()),
});

/** Only HTTP drains can be forwarded from here; the URL must be http(s). */
function checkedDrain(attributes: z.infer<typeof LogDrain>): DrainInput {
  if (!(DRAIN_BACKENDS as readonly string[]).includes(attributes.backend_type))
    throw new HttpError(
      400,
      `backend_type ${attributes.backend_type} is not supported by Strata: use ${DRAIN_BACKENDS.join(", ")}`,
    );
  const config = WebhookConfig.safeParse(attributes.config);
  if (!config.success)
    throw new HttpError(
      400,
      `config: ${config.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ")}`,
    );
  return { ...attributes, description: attributes.description ?? "", config: config.data };
}

const WebhookConfig = z.object({
  url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
  headers: z.record(z.string(), z.string()).optional(),
  http: z.enum(["http1", "http2"]).optional(),
  gzip: z.boolean().optional(),
});

/** Drains are answered without their configuration's secrets: the URL's host and the header names only. */
function drainJson(d: DrainRow & { configPlain: { url: string; headers?: Record<string, string> } }) {
  const url = new URL(d.configPlain.url);
  return {
    type: "log_drain",
    id: d.id,
    attributes: {
      name: d.name,
      description: d.description,
      backend_type: d.backend_type,
      config: {
        url: `${url.protocol}//${url.host}${url.pathname}`,
        headers: Object.keys(d.configPlain.headers ?? {}),
      },
      last_error: d.last_error,
    },
  };
}

/** Rows by bucket, in the spec's result shape (timestamps in ISO form). */
function timeSeries(rows: Record<string, unknown>[]) {
  return {
    result: rows.map((r) => ({ ...r, timestamp: new Date(r.timestamp as string).toISOString() })),
    error: null,
  };
}

/** The spec's time-range rules, then the query over the project's log sources. */
async function runLogQuery(ctx: AppContext, ref: string, query: z.infer<typeof LogQuery>) {
  const end = query.iso_timestamp_end ? Date.parse(query.iso_timestamp_end) : Date.now();
  const start = query.iso_timestamp_start ? Date.parse(query.iso_timestamp_start) : end - 60_000;
  if (end < start) throw new HttpError(400, "iso_timestamp_end must not be before iso_timestamp_start");
  if (end - start > DAY) throw new HttpError(400, "The time range of a log query must not exceed 24 hours");
  // The plan's log retention bounds how far back a query reaches (402: the spec's billing restriction).
  const { plan, organizationSlug } = await projectBilling(ctx.platformPool, ref);
  if (start < Date.now() - LOG_RETENTION_DAYS[plan] * DAY)
    throw new HttpError(
      402,
      `Payment required: the ${plan} plan of ${organizationSlug} keeps logs ${LOG_RETENTION_DAYS[plan]} day(s); start the query later or change the plan`,
    );
  await ctx.logs?.flush();
  const sql =
    query.sql?.trim() ||
    "select id, timestamp, event_message, metadata from edge_logs order by timestamp desc limit 100";
  const result = await queryLogs(
    { controlUrl: ctx.controlUrl, kek: kekOf(ctx.platformPool) },
    { ref, sql, start: new Date(start), end: new Date(end) },
  );
  if ("error" in result) throw new HttpError(400, result.error);
  return { result: result.rows, error: null };
}

export function analyticsRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/analytics/endpoints";
  // `logs.all` is the deprecated name of the same query (with its own rate limit).
  for (const [name, summary, limits] of [
    ["logs", "Queries the project's logs (24 hours at most)", []],
    [
      "logs.all",
      "Queries the project's logs (deprecated: the same as logs)",
      [{ name: "logs.all", points: 30, seconds: 60 }],
    ],
  ] as const) {
    routes.get(
      `${base}/${name}`,
      summary,
      {
        rateLimits: [...limits],
        access: { permission: "analytics_logs_read", scope: "analytics:read" },
        query: LogQuery,
        status: 200,
        response: logQueryResponse,
      },
      async ({ project, query }) => runLogQuery(ctx, project.ref, query),
    );
  }
  routes.get(
    `${base}/usage.api-counts`,
    "Requests per service over an interval",
    {
      rateLimits: [{ name: "usage.api-counts", points: 30, seconds: 60 }],
      access: { permission: "analytics_usage_read" },
      query: z.object({
        interval: z.enum(["15min", "30min", "1hr", "3hr", "1day", "3day", "7day"]).default("1day"),
      }),
      status: 200,
    },
    async ({ project, query }) => {
      await ctx.usage?.flush();
      const rows = await requestCounts(ctx.platformPool, project.ref, INTERVALS[query.interval]);
      return timeSeries(rows);
    },
  );
  routes.get(
    `${base}/functions.combined-stats`,
    "Invocations of one edge function per time bucket: status classes and execution time",
    {
      access: { permission: "analytics_usage_read" },
      query: z.object({
        interval: z.enum(["15min", "1hr", "3hr", "1day"]),
        function_id: z.string().uuid(),
      }),
      status: 200,
    },
    async ({ project, query }) => {
      await functionRuntimeOf(ctx).logs.flush();
      const rows = await invocationStats(
        ctx.platformPool,
        project.ref,
        query.function_id,
        INTERVALS[query.interval],
      );
      return timeSeries(rows);
    },
  );
  routes.get(
    `${base}/usage.api-requests-count`,
    "Requests of the last 24 hours",
    {
      rateLimits: [{ name: "usage.api-requests-count", points: 30, seconds: 60 }],
      access: { permission: "analytics_usage_read" },
      status: 200,
    },
    async ({ project }) => {
      await ctx.usage?.flush();
      return { result: await requestsOfLastDay(ctx.platformPool, project.ref), error: null };
    },
  );

  const drains = "/v2/projects/:ref/analytics/log-drains";
  const read = { permission: "analytics_config_read", scope: "analytics_config:read" };
  const write = { permission: "analytics_config_write", scope: "analytics_config:write" };
  routes.get(
    drains,
    "Lists log drains",
    { access: read, status: 200, response: z.object({ data: z.array(drainResponse) }) },
    async ({ project }) => ({ data: (await drainsOf(ctx.platformPool, project.ref)).map(drainJson) }),
  );
  routes.post(
    drains,
    "Creates a log drain: the project's new log events are forwarded to it in batches",
    {
      feature: { name: "log_drains" },
      access: write,
      body: z.object({ data: z.object({ attributes: LogDrain }) }),
      status: 201,
      response: z.object({ data: drainResponse }),
    },
    async ({ project, body }) => {
      return {
        data: drainJson(await createDrain(ctx.platformPool, project.ref, checkedDrain(body.data.attributes))),
      };
    },
  );
  routes.put(
    `${drains}/:id`,
    "Updates a log drain",
    {
      access: write,
      body: z.object({ data: z.object({ attributes: LogDrain }) }),
      status: 200,
      response: z.object({ data: drainResponse }),
    },
    async ({ project, params, body }) => {
      const drain = await updateDrain(
        ctx.platformPool,
        project.ref,
        params.id,
        checkedDrain(body.data.attributes),
      );
      return { data: drainJson(found(drain, "Log drain", params.id)) };
    },
  );
  routes.delete(
    `${drains}/:id`,
    "Deletes a log drain",
    { access: write, status: 204 },
    async ({ project, params }) => {
      if (!(await deleteDrain(ctx.platformPool, project.ref, params.id)))
        throw new HttpError(404, `Log drain ${params.id} not found`);
      return {};
    },
  );
  return routes.router;
}
