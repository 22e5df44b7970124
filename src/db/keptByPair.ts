/**
 * Values kept by a pair of strings (a statement text and what else it depends on), looked up by the strings
 * themselves: the same strings come with nearly every request, and V8 keeps a string's hash, where a key
 * joining them would be a new string to hash every time. Bounded: past `max` values it starts over.
 */
export class KeptByPair<V> {
  private readonly byFirst = new Map<string, Map<string, V>>();
  private count = 0;

  constructor(private readonly max: number) {}

  /** The value kept for the pair, or `make()`'s, kept. */
  get(first: string, second: string, make: () => V): V {
    let bySecond = this.byFirst.get(first);
    if (bySecond === undefined) this.byFirst.set(first, (bySecond = new Map()));
    let value = bySecond.get(second);
    if (value === undefined) {
      value = make();
      if (this.count >= this.max) {
        this.byFirst.clear();
        this.byFirst.set(first, (bySecond = new Map()));
        this.count = 0;
      }
      bySecond.set(second, value);
      this.count++;
    }
    return value;
  }
}
