import { StrictMode, type ComponentType } from "react";
import { createRoot } from "react-dom/client";
import { createBrowserRouter, Navigate, RouterProvider } from "react-router";
import { SignedIn } from "./components/SignedIn";
import { ProjectShell } from "./components/ProjectShell";
import { Spinner } from "./components/Feedback";
import "./styles.css";

/**
 * Each page is its own bundle, loaded by the router as it matches the path: on the first load in parallel with
 * the session's check (not after it, as a lazy component inside the signed-in layout would be), and on a
 * navigation before the page changes (the current page stays until the next one can show).
 */
function page(load: () => Promise<{ default: ComponentType }>) {
  return { lazy: async () => ({ Component: (await load()).default }) };
}

const router = createBrowserRouter([
  {
    hydrateFallbackElement: <Spinner label="Loading page" />,
    children: [
      { path: "/sign-in", ...page(() => import("./pages/SignIn")) },
      { path: "/join", ...page(() => import("./pages/Join")) },
      {
        element: <SignedIn />,
        children: [
          { path: "/", element: <Navigate to="/projects" replace /> },
          { path: "/projects", ...page(() => import("./pages/Projects")) },
          { path: "/org/:slug/*", ...page(() => import("./pages/Organization")) },
          {
            path: "/project/:ref",
            element: <ProjectShell />,
            children: [
              { index: true, element: <Navigate to="editor" replace /> },
              { path: "editor/*", ...page(() => import("./pages/TableEditor")) },
              { path: "sql/:id", ...page(() => import("./pages/SqlEditor")) },
              { path: "auth/providers", ...page(() => import("./pages/AuthSettings")) },
              { path: "database/roles", ...page(() => import("./pages/Roles")) },
              { path: "settings/jwt", ...page(() => import("./pages/SigningKeys")) },
              { path: "api", ...page(() => import("./pages/ApiDocs")) },
              { path: "api/graphiql", ...page(() => import("./pages/GraphiQL")) },
              { path: "database/extensions", ...page(() => import("./pages/Extensions")) },
              { path: "database/migrations", ...page(() => import("./pages/Migrations")) },
              { path: "auth/users", ...page(() => import("./pages/AuthUsers")) },
              { path: "storage/buckets/*", ...page(() => import("./pages/StorageBuckets")) },
              { path: "functions/*", ...page(() => import("./pages/Functions")) },
              { path: "realtime/inspector", ...page(() => import("./pages/RealtimeInspector")) },
              { path: "logs/explorer", ...page(() => import("./pages/LogsExplorer")) },
              { path: "database/backups/scheduled", ...page(() => import("./pages/Backups")) },
              { path: "settings/general", ...page(() => import("./pages/ProjectSettings")) },
              { path: "settings/api", ...page(() => import("./pages/SettingsApi")) },
              { path: "settings/database", ...page(() => import("./pages/SettingsDatabase")) },
              { path: "settings/infrastructure", ...page(() => import("./pages/Replicas")) },
              { path: "*", ...page(() => import("./pages/NotYet")) },
            ],
          },
        ],
      },
      { path: "*", element: <Navigate to="/projects" replace /> },
    ],
  },
]);

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <RouterProvider router={router} />
  </StrictMode>,
);
