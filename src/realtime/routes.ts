import express, { Router, type NextFunction, type Request, type Response } from "express";
import type { RequestAuth } from "../auth/dataAuth";
import type { AppContext } from "../context";
import { GateError, openDataRequest } from "../http/gate";
import type { ProjectRuntime } from "../projects/runtime";
import { topicKey } from "./channels";
import { RealtimeServer } from "./socket";

/**
 * The realtime HTTP API: `POST /realtime/v1/api/broadcast` ({messages: [{topic, event, payload, private}]},
 * as channel.send() falls back to when not joined) and `POST /realtime/v1/api/broadcast/:topic/events/:event`
 * (channel.httpSend()). Both answer 202. Public topics take any valid key; a private topic's message is sent
 * only when the caller's role may insert into realtime.messages for it (RLS).
 */

class BadRequest extends Error {}

/** A refusal with the platform's status and body. */
class Refused extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super(String(body.message ?? "refused"));
  }
}

interface Outgoing {
  topic: string;
  event: string;
  payload: unknown;
  private: boolean;
}

function messageOf(raw: unknown): Outgoing {
  if (!raw || typeof raw !== "object" || Array.isArray(raw))
    throw new BadRequest("each message must be an object");
  const m = raw as Record<string, unknown>;
  if (typeof m.topic !== "string" || m.topic === "") throw new BadRequest("topic is required");
  if (typeof m.event !== "string" || m.event === "") throw new BadRequest("event is required");
  if (m.private !== undefined && typeof m.private !== "boolean")
    throw new BadRequest("private must be a boolean");
  return { topic: m.topic, event: m.event, payload: m.payload ?? {}, private: m.private === true };
}

export function realtimeRouter(ctx: AppContext): Router {
  const realtime = (ctx.realtime ??= new RealtimeServer(ctx));
  const router = Router({ strict: false, caseSensitive: true });
  const json = express.json({ limit: "1mb" });

  async function send(project: ProjectRuntime, auth: RequestAuth, messages: Outgoing[]): Promise<void> {
    // The project's realtime limits, as the platform's broadcast API applies them (max_bytes_per_second,
    // which the platform stores without applying, counts the payloads' JSON like a socket's messages).
    const hub = realtime.hubOf(project);
    const limits = await hub.config();
    if (limits.suspend) throw new Refused(403, { message: "Tenant is suspended" });
    const sizes = messages.map((m) => Buffer.byteLength(JSON.stringify(m.payload)));
    if (sizes.some((n) => n > limits.max_payload_size_in_kb * 1024)) {
      const messageErrors = sizes.map((n) =>
        n > limits.max_payload_size_in_kb * 1024 ? { payload: ["Payload size exceeds tenant limit"] } : {},
      );
      throw new Refused(422, { errors: { messages: messageErrors } });
    }
    const events = hub.used("event");
    const bytes = sizes.reduce((a, b) => a + b, 0);
    if (events >= limits.max_events_per_second || hub.used("bytes") >= limits.max_bytes_per_second)
      throw new Refused(429, { message: "You have exceeded your rate limit" });
    if (
      events + messages.length > limits.max_events_per_second ||
      !hub.allow("bytes", limits.max_bytes_per_second, bytes)
    ) {
      throw new Refused(429, { message: "Too many messages to broadcast, please reduce the batch size" });
    }
    hub.allow("event", limits.max_events_per_second, messages.length);
    const rights = new Map<string, boolean>();
    for (const m of messages) {
      if (m.private) {
        if (!rights.has(m.topic)) {
          const r = await hub.authorize(auth, m.topic).catch(() => ({ write: false }));
          rights.set(m.topic, r.write);
        }
        if (!rights.get(m.topic)) continue;
      }
      hub.broadcast(topicKey(m.topic, m.private), { type: "broadcast", event: m.event, payload: m.payload });
    }
  }

  router.post("/api/broadcast", json, async (req, res) => {
    const { project, auth } = await openDataRequest(ctx, req);
    const messages = (req.body as { messages?: unknown } | undefined)?.messages;
    if (!Array.isArray(messages)) throw new BadRequest("messages must be an array");
    await send(project, auth, messages.map(messageOf));
    res.status(202).end();
  });

  router.post("/api/broadcast/:topic/events/:event", json, async (req, res) => {
    const { project, auth } = await openDataRequest(ctx, req);
    const isPrivate = req.query.private === "true";
    const payload: unknown = req.body ?? {};
    await send(project, auth, [
      messageOf({ topic: req.params.topic, event: req.params.event, payload, private: isPrivate }),
    ]);
    res.status(202).end();
  });

  router.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (err instanceof GateError) return void res.status(err.status).json({ message: err.message });
    if (err instanceof BadRequest) return void res.status(400).json({ message: err.message });
    if (err instanceof Refused) return void res.status(err.status).json(err.body);
    const status = (err as { status?: number }).status;
    if (status && status >= 400 && status < 500) {
      return void res.status(status).json({ message: (err as Error).message });
    }
    next(err);
  });
  return router;
}
