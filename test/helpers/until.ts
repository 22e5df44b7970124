/** Reads until `read` answers something (not undefined), every 100 ms, for at most `ms`. */
export async function until<T>(read: () => Promise<T | undefined> | T | undefined, ms = 15_000): Promise<T> {
  for (const deadline = Date.now() + ms; ;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
