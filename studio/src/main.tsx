import { lazy, StrictMode, Suspense, type ComponentType } from "react";
import { createRoot } from "react-dom/client";
import { createBrowserRouter, Navigate, RouterProvider } from "react-router";
import { SignedIn } from "./components/SignedIn";
import { ProjectShell } from "./components/ProjectShell";
import { Spinner } from "./components/Feedback";
import "./styles.css";

/** Each page is its own bundle, loaded when first visited. */
function page(load: () => Promise<{ default: ComponentType }>) {
  const Page = lazy(load);
  return (
    <Suspense fallback={<Spinner label="Loading page" />}>
      <Page />
    </Suspense>
  );
}

const router = createBrowserRouter([
  { path: "/sign-in", element: page(() => import("./pages/SignIn")) },
  { path: "/join", element: page(() => import("./pages/Join")) },
  {
    element: <SignedIn />,
    children: [
      { path: "/", element: <Navigate to="/projects" replace /> },
      { path: "/projects", element: page(() => import("./pages/Projects")) },
      { path: "/org/:slug/*", element: page(() => import("./pages/Organization")) },
      {
        path: "/project/:ref",
        element: <ProjectShell />,
        children: [
          { index: true, element: <Navigate to="editor" replace /> },
          { path: "editor/*", element: page(() => import("./pages/TableEditor")) },
          { path: "sql/:id", element: page(() => import("./pages/SqlEditor")) },
          { path: "auth/providers", element: page(() => import("./pages/AuthSettings")) },
          { path: "database/roles", element: page(() => import("./pages/Roles")) },
          { path: "settings/jwt", element: page(() => import("./pages/SigningKeys")) },
          { path: "api", element: page(() => import("./pages/ApiDocs")) },
          { path: "api/graphiql", element: page(() => import("./pages/GraphiQL")) },
          { path: "database/extensions", element: page(() => import("./pages/Extensions")) },
          { path: "database/migrations", element: page(() => import("./pages/Migrations")) },
          { path: "auth/users", element: page(() => import("./pages/AuthUsers")) },
          { path: "storage/buckets/*", element: page(() => import("./pages/StorageBuckets")) },
          { path: "functions/*", element: page(() => import("./pages/Functions")) },
          { path: "realtime/inspector", element: page(() => import("./pages/RealtimeInspector")) },
          { path: "logs/explorer", element: page(() => import("./pages/LogsExplorer")) },
          { path: "database/backups/scheduled", element: page(() => import("./pages/Backups")) },
          { path: "settings/general", element: page(() => import("./pages/ProjectSettings")) },
          { path: "settings/api", element: page(() => import("./pages/SettingsApi")) },
          { path: "settings/database", element: page(() => import("./pages/SettingsDatabase")) },
          { path: "settings/infrastructure", element: page(() => import("./pages/Replicas")) },
          { path: "*", element: page(() => import("./pages/NotYet")) },
        ],
      },
    ],
  },
  { path: "*", element: <Navigate to="/projects" replace /> },
]);

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <RouterProvider router={router} />
  </StrictMode>,
);
