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

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: redact, censor: "[redacted]" } });
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
