import pino from "pino";

/** Paths pino blanks in every log line: keys, tokens and passwords never reach the logs. */
const redact = [
  "req.headers.authorization",
  "req.headers.apikey",
  "req.headers.cookie",
  'req.headers["x-api-key"]',
  "*.password",
  "*.db_pass",
  "*.token",
  "*.secret",
  "*.jwtSecret",
  "*.apiKey",
];

export type Logger = pino.Logger;

/** How long a log line may wait in the buffer before it is written. */
const FLUSH_MS = 250;

/**
 * A logger writing JSON lines to stdout. Lines are buffered and written 4 KiB at a time, or within FLUSH_MS of
 * the first one waiting, not with one write(2) each: the data routes log a line per request, and a write per
 * line was a measurable part of a request's CPU. pino writes what is left synchronously when the process exits.
 */
export function createLogger(level: string): Logger {
  const out = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  let waiting = false;
  const flusher = setInterval(() => {
    if (!waiting) return;
    waiting = false;
    out.flush();
  }, FLUSH_MS);
  flusher.unref();
  out.once("close", () => clearInterval(flusher));
  return pino(
    {
      level,
      redact: { paths: redact, censor: "[redacted]" },
      hooks: {
        streamWrite(line) {
          waiting = true;
          return line;
        },
      },
    },
    out,
  );
}

/** Replaces the password of a connection URL for display. */
export function maskDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "*****";
    return u.toString();
  } catch {
    return "<unparseable url>";
  }
}
