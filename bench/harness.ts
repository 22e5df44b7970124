/** A bounded load loop on 127.0.0.1 (used by the functions bench): req/s and p50/p99 of one kind of request. */

export const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
export const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const MAX_REQUESTS = 200_000;

export interface Stats {
  rps: number;
  p50: number;
  p99: number;
}

export async function load(send: () => Promise<Response>): Promise<Stats> {
  const latencies: number[] = [];
  const end = Date.now() + DURATION_MS;
  const worker = async () => {
    while (Date.now() < end && latencies.length < MAX_REQUESTS) {
      const t = performance.now();
      const res = await send();
      const text = await res.text();
      if (res.status >= 400 || text.includes('"errors"'))
        throw new Error(`bench request failed: ${res.status} ${text.slice(0, 200)}`);
      latencies.push(performance.now() - t);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))];
  return { rps: latencies.length / seconds, p50: pct(0.5), p99: pct(0.99) };
}
