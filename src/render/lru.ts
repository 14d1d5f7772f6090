/** A small least-recently-used cache on Map's insertion order, bounded in entries and in the weights given to `set` (an estimate of bytes). */
export class LruCache<K, V> {
  private readonly map = new Map<K, { value: V; weight: number }>();
  private readonly max: number;
  private readonly maxWeight: number;
  private weight = 0;

  constructor(max: number, maxWeight = Infinity) {
    this.max = max;
    this.maxWeight = maxWeight;
  }

  get(key: K): V | undefined {
    const entry = this.map.get(key);
    if (entry !== undefined) {
      this.map.delete(key);
      this.map.set(key, entry);
    }
    return entry?.value;
  }

  /** The keys held, least recently used first. */
  keys(): IterableIterator<K> {
    return this.map.keys();
  }

  delete(key: K): void {
    const entry = this.map.get(key);
    if (entry === undefined) return;
    this.map.delete(key);
    this.weight -= entry.weight;
  }

  /** Stores the value, evicting the least recently used entries past the bounds; a value heavier than the whole bound is not stored. */
  set(key: K, value: V, weight = 0): void {
    this.delete(key);
    if (weight > this.maxWeight) return;
    this.map.set(key, { value, weight });
    this.weight += weight;
    while (this.map.size > this.max || this.weight > this.maxWeight) this.delete(this.map.keys().next().value as K);
  }
}
