/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  transform: {
    "^.+\\.ts$": ["ts-jest", { diagnostics: false }],
  },
  globalSetup: "<rootDir>/test/setup/globalSetup.ts",
  setupFiles: ["<rootDir>/test/setup/pgErrors.ts"],
  globalTeardown: "<rootDir>/test/setup/globalTeardown.ts",
  testTimeout: 60000,
  maxWorkers: 2,
};
