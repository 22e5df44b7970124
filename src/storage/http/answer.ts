import type { ErrorRequestHandler, Request, RequestHandler, Response } from "express";
import type { AppContext } from "../../context";
import { internalError, refusalOf, routeNotFound } from "../errors";

/** A path or method no route of the table serves, answered as the platform's server does. */
export const noRoute: RequestHandler = (req: Request, res: Response) => {
  const answer = routeNotFound(`${req.method}:${req.baseUrl}${req.path}`);
  res.status(answer.httpStatus).json(answer.body);
};

/**
 * Every error of a route in storage's shape (`{statusCode, code, error, message}`); a server fault is logged
 * and answered 500 without its details.
 */
export function answerError(ctx: AppContext): ErrorRequestHandler {
  return (caught: unknown, req, res, _next) => {
    const refusal = refusalOf(caught);
    if (!refusal) {
      ctx.log.error({ err: caught, path: req.path }, "storage request failed");
    } else if (refusal.status === 507) {
      // The client is told; the operator must free space.
      ctx.log.warn({ path: req.path }, "storage: no space left for an upload");
    }
    const answer = refusal ?? internalError();
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // An upload refused before its bytes were read: the client is told, and the connection is not reused.
    if (!req.complete) res.setHeader("connection", "close");
    res.status(answer.httpStatus).json(answer.body);
  };
}
