import type { RequestHandler } from "express";
import { Counter, Registry, collectDefaultMetrics } from "prom-client";

const LATENCY_BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** One interface's latencies: observations per bucket (the last one past every bound), their sum and count. */
interface LatencySeries {
  buckets: number[];
  sum: number;
  count: number;
}

/**
 * Request latencies per interface as a Prometheus histogram: counted in plain numbers on the request path
 * and turned into prom-client's values only when scraped (prom-client's own histogram converts, validates
 * and hashes its labels on every observation).
 */
class LatencyHistogram {
  readonly name = "strata_http_request_duration_seconds";
  readonly help = "HTTP request latency by interface";
  readonly type = "histogram";
  readonly aggregator = "sum";
  private readonly series = new Map<string, LatencySeries>();

  observe(iface: string, seconds: number): void {
    let series = this.series.get(iface);
    if (series === undefined) {
      series = { buckets: new Array<number>(LATENCY_BOUNDS.length + 1).fill(0), sum: 0, count: 0 };
      this.series.set(iface, series);
    }
    let i = 0;
    while (i < LATENCY_BOUNDS.length && seconds > LATENCY_BOUNDS[i]!) i++;
    series.buckets[i]!++;
    series.sum += seconds;
    series.count++;
  }

  /** prom-client's metric interface: the values as its own histograms give them (cumulative buckets). */
  get() {
    const values: { metricName: string; labels: Record<string, string | number>; value: number }[] = [];
    for (const [iface, { buckets, sum, count }] of this.series) {
      let cumulative = 0;
      buckets.forEach((n, i) => {
        cumulative += n;
        const le = i < LATENCY_BOUNDS.length ? LATENCY_BOUNDS[i]! : "+Inf";
        values.push({
          metricName: `${this.name}_bucket`,
          labels: { le, interface: iface },
          value: cumulative,
        });
      });
      values.push({ metricName: `${this.name}_sum`, labels: { interface: iface }, value: sum });
      values.push({ metricName: `${this.name}_count`, labels: { interface: iface }, value: count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}

/** Prometheus metrics of one server: request counts and latencies per interface, plus process metrics. */
export class Metrics {
  readonly registry = new Registry();
  /** Requests by interface and status, counted here and handed to the counter when scraped. */
  private readonly counts = new Map<string, { iface: string; status: string; n: number }>();
  private readonly latency = new LatencyHistogram();

  constructor() {
    const counts = this.counts;
    new Counter({
      name: "strata_http_requests_total",
      help: "HTTP requests by interface and status",
      labelNames: ["interface", "status"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { iface, status, n } of counts.values()) this.inc({ interface: iface, status }, n);
      },
    });
    this.registry.registerMetric(this.latency as never);
    collectDefaultMetrics({ register: this.registry });
  }

  observe(iface: string, status: number, seconds: number): void {
    const key = `${iface} ${status}`;
    const count = this.counts.get(key);
    if (count === undefined) this.counts.set(key, { iface, status: String(status), n: 1 });
    else count.n++;
    this.latency.observe(iface, seconds);
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
