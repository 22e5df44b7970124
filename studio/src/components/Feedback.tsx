import type { ReactNode } from "react";

export function Spinner({ label = "Loading" }: { label?: string }) {
  return (
    <div className="spinner" role="status" aria-live="polite">
      <span className="spinner-dot" aria-hidden="true" />
      {label}…
    </div>
  );
}

/** An API's error, in its own words. */
export function ErrorBox({ error, title }: { error: Error | undefined; title?: string }) {
  if (!error) return null;
  return (
    <div className="error-box" role="alert">
      {title && <strong>{title}: </strong>}
      <span style={{ whiteSpace: "pre-wrap" }}>{error.message}</span>
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <header className="page-header">
      <h1>{title}</h1>
      <div className="page-actions">{children}</div>
    </header>
  );
}
