import { isDatabaseUnreachable, PoolTimeout } from "../db/errors";

/**
 * The database is out of reach or has no connection free: not something to answer with a GraphQL error or to
 * try again within the request, but for the router to answer 503 (as REST does).
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return error instanceof PoolTimeout || isDatabaseUnreachable(error);
}
