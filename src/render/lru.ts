/** A small least-recently-used cache on Map's insertion order, bounded in entries and, optionally, in a weight (an estimate of bytes). */
export class LruCache<K, V> {
  private readonly map = new Map<K, { value: V; weight: number }>();
  private readonly max: number;
  private readonly weigh: { of: (key: K, value: V) => number; max: number } | null;
  private weight = 0;

  constructor(max: number, weigh?: { of: (key: K, value: V) => number; max: number }) {
    this.max = max;
    this.weigh = weigh ?? null;
  }

  get(key: K): V | undefined {
    const entry = this.map.get(key);
    if (entry !== undefined) {
      this.map.delete(key);
      this.map.set(key, entry);
    }
    return entry?.value;
  }

  delete(key: K): void {
    const entry = this.map.get(key);
    if (entry === undefined) return;
    this.map.delete(key);
    this.weight -= entry.weight;
  }

  /** Stores the value, evicting the least recently used entries past the bounds; a value heavier than the whole bound is not stored. */
  set(key: K, value: V): void {
    this.delete(key);
    const weight = this.weigh?.of(key, value) ?? 0;
    if (this.weigh && weight > this.weigh.max) return;
    this.map.set(key, { value, weight });
    this.weight += weight;
    while (this.map.size > this.max || (this.weigh && this.weight > this.weigh.max)) this.delete(this.map.keys().next().value as K);
  }
}
