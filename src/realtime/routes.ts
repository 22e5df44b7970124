import express, { Router, type NextFunction, type Request, type Response } from "express";
import type { RequestAuth } from "../auth/dataAuth";
import type { AppContext } from "../context";
import { GateError, openDataRequest } from "../http/gate";
import type { ProjectRuntime } from "../projects/runtime";
import { authorizeTopic } from "./authorize";
import { topicKey } from "./channels";
import { RealtimeServer } from "./socket";

/**
 * The realtime HTTP API: `POST /realtime/v1/api/broadcast` ({messages: [{topic, event, payload, private}]},
 * as channel.send() falls back to when not joined) and `POST /realtime/v1/api/broadcast/:topic/events/:event`
 * (channel.httpSend()). Both answer 202. Public topics take any valid key; a private topic's message is sent
 * only when the caller's role may insert into realtime.messages for it (RLS).
 */

class BadRequest extends Error {}

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
    const rights = new Map<string, boolean>();
    for (const m of messages) {
      if (m.private) {
        if (!rights.has(m.topic)) {
          const r = await authorizeTopic(project, auth, m.topic).catch(() => ({ write: false }));
          rights.set(m.topic, r.write);
        }
        if (!rights.get(m.topic)) continue;
      }
      realtime
        .hubOf(project)
        .broadcast(topicKey(m.topic, m.private), { type: "broadcast", event: m.event, payload: m.payload });
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
    const status = (err as { status?: number }).status;
    if (status && status >= 400 && status < 500) {
      return void res.status(status).json({ message: (err as Error).message });
    }
    next(err);
  });
  return router;
}
