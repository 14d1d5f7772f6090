import assert from 'node:assert/strict';

/**
 * Polls `<url>/health` every 20 ms while `work` runs and returns the slowest answer in ms: how long
 * the server's event loop was held meanwhile. `DEBUG_HEALTH=1` prints every answer.
 */
export async function slowestHealthDuring<T>(url: string, work: Promise<T>): Promise<{ result: T; slowest: number }> {
  let done = false;
  let slowest = 0;
  const probe = (async () => {
    while (!done) {
      const t = performance.now();
      const res = await fetch(`${url}/health`);
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      slowest = Math.max(slowest, performance.now() - t);
      if (process.env.DEBUG_HEALTH) console.log('health', Math.round(t), Math.round(performance.now() - t));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    return { result: await work, slowest };
  } finally {
    done = true;
    await probe;
  }
}
