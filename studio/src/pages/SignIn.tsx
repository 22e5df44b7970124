import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { session } from "../api";
import { ErrorBox } from "../components/Feedback";

/** Only paths of Studio itself: never another site after signing in. */
function safeNext(next: string | null): string {
  return next && next.startsWith("/") && !next.startsWith("//") ? next : "/projects";
}

export default function SignIn() {
  const [token, setToken] = useState("");
  const [error, setError] = useState<Error>();
  const [busy, setBusy] = useState(false);
  const navigate = useNavigate();
  const [params] = useSearchParams();

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await session.signIn(token.trim());
      navigate(safeNext(params.get("next")), { replace: true });
    } catch (err) {
      setError(err as Error);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="sign-in">
      <form className="card sign-in-card" onSubmit={(e) => void submit(e)}>
        <h1>
          <span className="brand-mark" aria-hidden="true">
            ◆
          </span>{" "}
          Strata Studio
        </h1>
        <p className="muted">Sign in with a personal access token of this installation.</p>
        <label className="field">
          <span>Access token</span>
          <input
            name="access_token"
            type="password"
            autoComplete="current-password"
            placeholder="sbp_…"
            value={token}
            onChange={(e) => setToken(e.target.value)}
            autoFocus
            required
          />
        </label>
        <ErrorBox error={error} />
        <button className="button primary" type="submit" disabled={busy || !token.trim()}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        <p className="muted small">
          <code>npm start</code> prints the installation's first token; <code>strata</code> commands create
          more.
        </p>
      </form>
    </div>
  );
}
