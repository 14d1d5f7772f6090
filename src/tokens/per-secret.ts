/**
 * `derive` memoised per secret: a key derived from JWT_SECRET is made once, not for every token or
 * message (docs/development.md § State: pure memoisation of a deterministic function). A process
 * has one secret; tests use a few.
 */
export function perSecret<T>(derive: (secret: string) => T): (secret: string) => T {
  const derived = new Map<string, T>();
  return (secret) => {
    let value = derived.get(secret);
    if (value === undefined) {
      value = derive(secret);
      derived.set(secret, value);
    }
    return value;
  };
}
