import type { AddressInfo } from "node:net";
import { simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";

export interface ReceivedMail {
  to: string[];
  from: { address: string; name: string };
  subject: string;
  html: string;
  /** The SMTP login the sender used. */
  authUser: string | undefined;
  /** The first link of the mail, with the entities of the HTML decoded. */
  link: string | undefined;
  /** The code after "Code:" (the templates the tests set carry one). */
  code: string | undefined;
}

/** A real SMTP server on 127.0.0.1 that requires a login and keeps every mail it receives. */
export async function startMailbox(credentials: { user: string; pass: string }) {
  const mails: ReceivedMail[] = [];
  const server = new SMTPServer({
    authOptional: false,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === credentials.user && auth.password === credentials.pass) {
        callback(null, { user: auth.username });
      } else callback(new Error("Invalid username or password"));
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((parsed) => {
          const html = typeof parsed.html === "string" ? parsed.html : "";
          const href = /href="([^"]+)"/.exec(html)?.[1];
          const from = Array.isArray(parsed.from) ? parsed.from[0] : parsed.from;
          mails.push({
            to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
            from: { address: from?.value[0]?.address ?? "", name: from?.value[0]?.name ?? "" },
            subject: parsed.subject ?? "",
            html,
            authUser: typeof session.user === "string" ? session.user : undefined,
            link: href?.replace(/&amp;/g, "&"),
            code: /Code:\s*([0-9]+)/.exec(html)?.[1],
          });
          callback();
        })
        .catch(callback);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.server.address() as AddressInfo).port;
  let read = 0;

  return {
    port,
    mails,
    /** Waits for the next mail to `to` not read yet. */
    async next(to: string, timeoutMs = 10_000): Promise<ReceivedMail> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const index = mails.findIndex((m, i) => i >= read && m.to.includes(to.toLowerCase()));
        if (index >= 0) {
          read = index + 1;
          return mails[index];
        }
        if (Date.now() > deadline) throw new Error(`no mail to ${to}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    /** Every mail received for `to` so far. */
    countFor: (to: string) => mails.filter((m) => m.to.includes(to.toLowerCase())).length,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The query and fragment parameters of a redirect target. */
export function paramsOf(location: string): Record<string, string> {
  const url = new URL(location);
  return {
    ...Object.fromEntries(url.searchParams),
    ...Object.fromEntries(new URLSearchParams(url.hash.replace(/^#/, ""))),
  };
}

/** What a browser gets for a mail link: the redirect, not followed. */
export async function visit(link: string): Promise<{ status: number; location: string }> {
  const res = await fetch(link, { redirect: "manual" });
  return { status: res.status, location: res.headers.get("location") ?? "" };
}

/** Storage for a client of its own (the PKCE verifier lives here between the calls). */
export function memoryStorage() {
  const items = new Map<string, string>();
  return {
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => void items.set(key, value),
    removeItem: (key: string) => void items.delete(key),
  };
}
