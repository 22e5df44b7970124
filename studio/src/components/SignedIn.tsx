import { useCallback, useEffect, useState } from "react";
import { Link, Outlet, useLocation, useNavigate } from "react-router";
import { ApiError, onSignedOut, session as sessionApi, type Session } from "../api";
import { forgetProjectApis } from "../projectApi";
import { SessionContext } from "../session";
import { ErrorBox, Spinner } from "./Feedback";

/** Every page but sign-in: loads the session, or sends the visitor to sign in and back here afterwards. */
export function SignedIn() {
  const [session, setSession] = useState<Session>();
  const [error, setError] = useState<Error>();
  const navigate = useNavigate();
  const location = useLocation();
  const here = location.pathname + location.search;

  const toSignIn = useCallback(
    () => navigate(`/sign-in?next=${encodeURIComponent(here)}`, { replace: true }),
    [navigate, here],
  );
  useEffect(() => {
    if (session) return;
    sessionApi
      .get()
      .then(setSession, (e: Error) => (e instanceof ApiError && e.status === 401 ? toSignIn() : setError(e)));
  }, [session, toSignIn]);
  useEffect(() => onSignedOut(() => void toSignIn()), [toSignIn]);

  const signOut = useCallback(async () => {
    await sessionApi.signOut();
    forgetProjectApis();
    setSession(undefined);
    navigate("/sign-in", { replace: true });
  }, [navigate]);

  if (error) return <ErrorBox error={error} title="Studio could not load your session" />;
  if (!session) return <Spinner label="Signing in" />;
  return (
    <SessionContext.Provider value={{ session, signOut }}>
      <div className="app">
        <header className="topbar">
          <Link to="/projects" className="brand">
            <span className="brand-mark" aria-hidden="true">
              ◆
            </span>{" "}
            Strata Studio
          </Link>
          <nav className="topbar-nav">
            <Link to="/projects">Projects</Link>
          </nav>
          <div className="topbar-user">
            <span title={session.profile.primary_email}>{session.profile.username}</span>
            <button className="button ghost" onClick={() => void signOut()}>
              Sign out
            </button>
          </div>
        </header>
        <Outlet />
      </div>
    </SessionContext.Provider>
  );
}
