import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

/** This Strata's version (package.json), as its services report it (`/auth/v1/health`, `/storage/v1/version`). */
export const STRATA_VERSION: string = (() => {
  // src/version.ts runs from src/ (tsx, jest) or dist/src/ (npm start).
  const file = [
    path.resolve(__dirname, "../package.json"),
    path.resolve(__dirname, "../../package.json"),
  ].find(existsSync);
  return file ? String(JSON.parse(readFileSync(file, "utf8")).version) : "0.0.0";
})();
