import path from "node:path";
import { defineConfig } from "vite";

// Studio's build: `npm run build:studio` writes dist/studio, which the server serves (src/studio/server/pages.ts):
// hashed files under /studio/assets, and index.html for every page path.
export default defineConfig({
  root: import.meta.dirname,
  base: "/studio/",
  publicDir: false,
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: path.resolve(import.meta.dirname, "../dist/studio"),
    emptyOutDir: true,
    assetsDir: "assets",
    // Monaco, GraphiQL's editor, is one chunk of about 3 MB, loaded by the GraphiQL page only.
    chunkSizeWarningLimit: 3072,
    rolldownOptions: {
      // Libraries marked "use client" for React Server Components: nothing to keep in a browser-only bundle;
      // and the bundler's own timing notes, which are no fault of the build.
      onLog(level, log, handler) {
        if (log.code !== "MODULE_LEVEL_DIRECTIVE" && log.code !== "PLUGIN_TIMINGS") handler(level, log);
      },
    },
  },
});
