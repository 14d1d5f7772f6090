import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

/**
 * One open-loop run: `rate` POSTs a second, evenly spaced, each body with `[<id>]` replaced by a
 * unique id (request i sends `body[i % body.length]` when given several). The first
 * `warmupSeconds` (default 1) of requests are sent but not counted: the thread's first requests
 * open the connections and run cold code on both sides.
 */
export const DEFAULT_WARMUP_SECONDS = 1;
export type PacedLoad = {
  url: string;
  headers: Record<string, string>;
  body: string | string[];
  rate: number;
  seconds: number;
  connections: number;
  warmupSeconds?: number;
};
/** A counted request over 50 ms: when it was due (ms since the epoch, comparable across threads) and its latency. */
export type SlowRequest = { due: number; ms: number };
export type PacedResult = {
  sent: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
  /** When the first counted request was due (ms since the epoch). */
  countedFrom: number;
  slow: SlowRequest[];
};

/**
 * Latency at a set request rate, measured the way a user of the API meets it. Request i is due at
 * start + i / rate and its latency counts from then, so a request that waits for a free connection
 * (the server fell behind) is charged that wait. autocannon's `overallRate` is not used for this:
 * each of its connections sends its share of a second back to back and then waits for the next
 * second (full-rate bursts, half the time), and it records every response of t ms together with
 * synthetic ones at t−1, t−2, … 1 ms (its expected interval is ceil(1 / per-connection rate) = 1),
 * which weights the tail by its own length. Runs on a thread of its own, so the Herald under test
 * in the bench process does not share its event loop.
 */
export function pacedLoad(load: PacedLoad): Promise<PacedResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { pacedLoad: load } });
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the paced load thread exited (${code})`)));
  });
}

async function run(load: PacedLoad): Promise<PacedResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: load.connections });
  const warmup = Math.round(load.rate * (load.warmupSeconds ?? DEFAULT_WARMUP_SECONDS));
  const total = warmup + Math.round(load.rate * load.seconds);
  const latencies: number[] = [];
  let failed = 0;
  const slow: SlowRequest[] = [];
  const bodies = typeof load.body === 'string' ? [load.body] : load.body;
  const post = (id: string, body: string, due: number, counted: boolean) =>
    new Promise<void>((done) => {
      const req = http.request(load.url, { method: 'POST', agent, headers: load.headers }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200) failed += 1;
          else if (counted) {
            const ms = performance.now() - due;
            latencies.push(ms);
            if (ms > 50) slow.push({ due: performance.timeOrigin + due, ms });
          }
          done();
        });
      });
      req.on('error', () => {
        failed += 1;
        done();
      });
      req.end(body.replaceAll('[<id>]', id));
    });
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / load.rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(post(`p${process.pid}-${start.toFixed(0)}-${i}`, bodies[i % bodies.length], due, i >= warmup));
  }
  await Promise.all(inFlight);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN);
  return {
    sent: total - warmup,
    failed,
    p50: at(0.5),
    p99: at(0.99),
    max: Math.round(latencies.at(-1) ?? NaN),
    countedFrom: performance.timeOrigin + start + (warmup * 1000) / load.rate,
    slow,
  };
}

const asked = isMainThread ? undefined : (workerData as { pacedLoad?: PacedLoad } | null)?.pacedLoad;
if (asked) parentPort!.postMessage(await run(asked));
