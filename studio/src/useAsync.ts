import { useCallback, useEffect, useRef, useState } from "react";

export interface Async<T> {
  data?: T;
  error?: Error;
  loading: boolean;
  reload: () => void;
}

/**
 * Runs `load` when `deps` change (and on reload()); the latest run's answer wins. New deps clear the previous
 * answer (it was about something else); a reload keeps it on screen until the new one arrives.
 */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]): Async<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const [generation, setGeneration] = useState(0);
  const lastGeneration = useRef(generation);
  const run = useCallback(load, deps);
  useEffect(() => {
    let current = true;
    const reloading = lastGeneration.current !== generation;
    lastGeneration.current = generation;
    setState((s) => (reloading ? { ...s, loading: true } : { loading: true }));
    run().then(
      (data) => current && setState({ data, loading: false }),
      (error: Error) => current && setState({ error, loading: false }),
    );
    return () => {
      current = false;
    };
  }, [run, generation]);
  return { ...state, reload: () => setGeneration((g) => g + 1) };
}
