import { useCallback, useEffect, useState } from "react";
import { Link, Outlet, useLocation, useNavigate } from "react-router";
import { ApiError, onSignedOut, session as sessionApi, type Session } from "../api";
import { forgetProjectApis } from "../projectApi";
import { SessionContext } from "../session";
import { ErrorBox, Spinner } from "./Feedback";

/**
 * The session's check starts as Studio loads on one of this layout's pages, beside the page's bundle (the
 * router renders this layout only once that bundle is in); that first mount takes its answer, later ones ask
 * again. Loaded on the sign-in or join page, Studio asks when this layout first mounts (after a sign-in).
 */
let early: Promise<Session> | undefined = /^\/(?:sign-in|join)\/?$/.test(window.location.pathname)
  ? undefined
  : sessionApi.get();
early?.catch(() => {});
function loadSession(): Promise<Session> {
  const answer = early ?? sessionApi.get();
  early = undefined;
  return answer;
}

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
    loadSession().then(setSession, (e: Error) =>
      e instanceof ApiError && e.status === 401 ? toSignIn() : setError(e),
    );
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
