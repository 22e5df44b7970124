export default async function globalTeardown(): Promise<void> {
  await (globalThis as any).__strataEmbedded?.stop();
}
