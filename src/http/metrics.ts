import type { RequestHandler } from "express";
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** Prometheus metrics of one server: request counts and latencies per interface, plus process metrics. */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: "strata_http_requests_total",
    help: "HTTP requests by interface and status",
    labelNames: ["interface", "status"],
    registers: [this.registry],
  });
  private readonly latency = new Histogram({
    name: "strata_http_request_duration_seconds",
    help: "HTTP request latency by interface",
    labelNames: ["interface"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** The metrics of one label set, kept: prom-client hashes a label object on every call otherwise. */
  private readonly counters = new Map<string, Counter.Internal>();
  private readonly histograms = new Map<string, Histogram.Internal<string>>();

  observe(iface: string, status: number, seconds: number): void {
    const key = `${iface} ${status}`;
    let counter = this.counters.get(key);
    if (!counter) this.counters.set(key, (counter = this.requests.labels(iface, String(status))));
    counter.inc();
    let histogram = this.histograms.get(iface);
    if (!histogram) this.histograms.set(iface, (histogram = this.latency.labels(iface)));
    histogram.observe(seconds);
  }

  handler(): RequestHandler {
    return async (_req, res) => {
      res.type(this.registry.contentType).send(await this.registry.metrics());
    };
  }
}

/** The interface a path belongs to, as a low-cardinality metrics label. */
export function interfaceOf(path: string): string {
  if (path.startsWith("/graphql/")) return "graphql";
  if (path.startsWith("/rest/")) return "rest";
  if (path.startsWith("/auth/")) return "auth";
  if (path.startsWith("/functions/")) return "functions";
  if (path.startsWith("/storage/")) return "storage";
  if (path.startsWith("/realtime/")) return "realtime";
  if (path.startsWith("/v1/") || path.startsWith("/v2/")) return "management";
  return "other";
}
