import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { account, session } from "../api";
import { ErrorBox } from "../components/Feedback";

/** Only paths of Studio itself: never another site after signing in. */
function safeNext(next: string | null): string {
  return next && next.startsWith("/") && !next.startsWith("//") ? next : "/projects";
}

type Method = "password" | "token";

export default function SignIn() {
  const [params] = useSearchParams();
  const [method, setMethod] = useState<Method>(params.get("email") ? "password" : "token");
  const [email, setEmail] = useState(params.get("email") ?? "");
  const [password, setPassword] = useState("");
  const [token, setToken] = useState("");
  const [error, setError] = useState<Error>();
  const [busy, setBusy] = useState(false);
  const navigate = useNavigate();
  const joined = params.get("joined");

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      // Email and password: the API's sign-in answers a session token, which Studio's session then keeps.
      const accessToken =
        method === "token" ? token.trim() : (await account.signIn(email, password)).access_token;
      await session.signIn(accessToken);
      navigate(safeNext(params.get("next")), { replace: true });
    } catch (err) {
      setError(err as Error);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="sign-in">
      <form className="card sign-in-card" onSubmit={(e) => void submit(e)} aria-label="Sign in">
        <h1>
          <span className="brand-mark" aria-hidden="true">
            ◆
          </span>{" "}
          Strata Studio
        </h1>
        {joined && <div className="notice">You joined {joined}: sign in to continue.</div>}
        <div className="tabs" role="tablist">
          <button
            type="button"
            role="tab"
            aria-selected={method === "token"}
            className={`tab${method === "token" ? " active" : ""}`}
            onClick={() => setMethod("token")}
          >
            Access token
          </button>
          <button
            type="button"
            role="tab"
            aria-selected={method === "password"}
            className={`tab${method === "password" ? " active" : ""}`}
            onClick={() => setMethod("password")}
          >
            Email and password
          </button>
        </div>
        {method === "token" ? (
          <>
            <p className="muted">A personal access token of this installation.</p>
            <label className="field">
              <span>Access token</span>
              <input
                name="access_token"
                type="password"
                autoComplete="off"
                placeholder="sbp_…"
                value={token}
                onChange={(e) => setToken(e.target.value)}
                autoFocus
                required
              />
            </label>
          </>
        ) : (
          <>
            <label className="field">
              <span>Email</span>
              <input
                name="email"
                type="email"
                autoComplete="username"
                value={email}
                onChange={(e) => setEmail(e.target.value)}
                autoFocus
                required
              />
            </label>
            <label className="field">
              <span>Password</span>
              <input
                name="password"
                type="password"
                autoComplete="current-password"
                value={password}
                onChange={(e) => setPassword(e.target.value)}
                required
              />
            </label>
          </>
        )}
        <ErrorBox error={error} />
        <button className="button primary" type="submit" disabled={busy}>
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
