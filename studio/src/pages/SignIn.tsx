import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { account, session } from "../api";
import { ErrorBox } from "../components/Feedback";
import { PasswordFields } from "../components/PasswordFields";

/** Only paths of Studio itself: never another site after signing in. */
function safeNext(next: string | null): string {
  return next && next.startsWith("/") && !next.startsWith("//") ? next : "/projects";
}

/** Both ways in on one page: email and password (a user of the installation), or an access token. */
export default function SignIn() {
  const [params] = useSearchParams();
  const [email, setEmail] = useState(params.get("email") ?? "");
  const [password, setPassword] = useState("");
  const [token, setToken] = useState("");
  const [error, setError] = useState<{ error: Error; form: "password" | "token" }>();
  const [busy, setBusy] = useState(false);
  const navigate = useNavigate();
  const joined = params.get("joined");

  async function signIn(e: FormEvent, form: "password" | "token") {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      // Email and password: the API's sign-in answers a session token, which Studio's session then keeps.
      const accessToken =
        form === "token" ? token.trim() : (await account.signIn(email, password)).access_token;
      await session.signIn(accessToken);
      navigate(safeNext(params.get("next")), { replace: true });
    } catch (err) {
      setError({ error: err as Error, form });
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="sign-in">
      <div className="card sign-in-card">
        <h1>
          <span className="brand-mark" aria-hidden="true">
            ◆
          </span>{" "}
          Strata Studio
        </h1>
        {joined && <div className="notice">You joined {joined}: sign in to continue.</div>}
        <form
          className="sign-in-form"
          onSubmit={(e) => void signIn(e, "password")}
          aria-label="Sign in with email"
        >
          <PasswordFields
            purpose="sign-in"
            account={{ field: "email", value: email, onChange: setEmail }}
            password={password}
            onPassword={setPassword}
          />
          {error?.form === "password" && <ErrorBox error={error.error} />}
          <button className="button primary full" type="submit" disabled={busy}>
            Sign in
          </button>
        </form>
        <div className="divider">or with a personal access token</div>
        <form
          className="sign-in-form"
          onSubmit={(e) => void signIn(e, "token")}
          aria-label="Sign in with a token"
        >
          <label className="field">
            <span>Access token</span>
            <input
              name="access_token"
              type="password"
              autoComplete="off"
              placeholder="sbp_…"
              value={token}
              onChange={(e) => setToken(e.target.value)}
              required
            />
          </label>
          {error?.form === "token" && <ErrorBox error={error.error} />}
          <button className="button full" type="submit" disabled={busy}>
            Sign in with token
          </button>
        </form>
        <p className="muted small">
          <code>npm start</code> prints the installation's first token; <code>strata</code> commands create
          more.
        </p>
      </div>
    </div>
  );
}
