import { useState } from "react";

export interface Action {
  /** An action is running: its buttons are disabled. */
  busy: boolean;
  /** What the last action failed with (cleared when the next one starts). */
  error?: Error;
  /** Runs `action`, busy meanwhile; what it throws becomes `error`. */
  run: (action: () => Promise<void>) => Promise<void>;
}

/** A user's action on a page (a form's submit, a button's change), as the page shows it: busy, then failed or done. */
export function useAction(): Action {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  async function run(action: () => Promise<void>): Promise<void> {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (e) {
      setError(e as Error);
    } finally {
      setBusy(false);
    }
  }
  return { busy, error, run };
}
