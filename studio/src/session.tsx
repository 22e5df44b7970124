import { createContext, useContext } from "react";
import type { Session } from "./api";

export const SessionContext = createContext<{ session: Session; signOut: () => Promise<void> } | undefined>(
  undefined,
);

/** The signed-in session (every page below the shell has one). */
export function useSession() {
  const value = useContext(SessionContext);
  if (!value) throw new Error("useSession outside a signed-in page");
  return value;
}
