import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * glibc keeps memory that was freed inside its malloc arenas resident: after a delivery burst an
 * idle Herald sat ~70 MB above what it holds, left by the compose threads, OpenSSL and
 * message buffers (bench/README.md § idle). `malloc_trim(0)` hands those pages back, and a fixed
 * trim threshold has threads give back their arenas' free tops, which it leaves. Node has no
 * binding for it and npm no maintained package, so `malloc-trim.c` is a tiny Node-API addon that
 * `npm start` builds (prestart) with the machine's C compiler. Where it cannot be built (no
 * compiler, not Linux with glibc) Herald runs the same, with that memory left resident.
 */

const SOURCE = fileURLToPath(new URL('./malloc-trim.c', import.meta.url));
const HEADERS = fileURLToPath(new URL('../../node_modules/node-api-headers/include', import.meta.url));
export const MALLOC_TRIM_ADDON = fileURLToPath(new URL('../../node_modules/.cache/herald-native/malloc-trim.node', import.meta.url));

/** How often a process trims: the call takes ~0.5 ms when there is little to give back, ~7 ms after a burst. */
export const MALLOC_TRIM_INTERVAL_MS = 10_000;

export type BuildOutcome = { built: true } | { built: false; reason: string };

export function hasGlibc(): boolean {
  if (process.platform !== 'linux') return false;
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  return typeof report.header?.glibcVersionRuntime === 'string';
}

/** Compiles the addon to `output` unless it is newer than its source. Never throws: a failure is reported, not fatal. */
export function buildMallocTrim(output = MALLOC_TRIM_ADDON, compiler = process.env.CC || 'cc'): BuildOutcome {
  if (!hasGlibc()) return { built: false, reason: 'glibc only (this is not Linux with glibc)' };
  if (existsSync(output) && statSync(output).mtimeMs >= statSync(SOURCE).mtimeMs) return { built: true };
  if (!existsSync(HEADERS)) return { built: false, reason: 'node-api-headers is not installed (run npm install)' };
  try {
    mkdirSync(path.dirname(output), { recursive: true });
  } catch (err) {
    return { built: false, reason: `cannot create ${path.dirname(output)}: ${(err as Error).message}` };
  }
  // Written beside and renamed into place: a process starting meanwhile sees the old file or the whole new one.
  const partial = `${output}.${process.pid}.tmp`;
  const result = spawnSync(compiler, ['-O2', '-shared', '-fPIC', '-I', HEADERS, '-o', partial, SOURCE], { encoding: 'utf8', timeout: 60_000 });
  if ((result.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') return { built: false, reason: `no C compiler (${compiler} not found)` };
  if (result.error || result.status !== 0) {
    rmSync(partial, { force: true });
    return { built: false, reason: `${compiler} failed: ${result.error?.message ?? (result.stderr.trim().split('\n')[0] || `exit ${result.status}`)}` };
  }
  renameSync(partial, output);
  return { built: true };
}

/** `setTrimThreshold` is absent from an addon built by an older Herald (only `trim`): it still trims. */
export type MallocAddon = { trim: () => boolean; setTrimThreshold?: (bytes: number) => boolean };

/** The addon's functions, or null when it was not built or does not load. */
export function loadMallocTrim(addon = MALLOC_TRIM_ADDON): MallocAddon | null {
  if (!existsSync(addon)) return null;
  try {
    const loaded = createRequire(import.meta.url)(addon) as Record<string, unknown>;
    if (typeof loaded.trim !== 'function') return null;
    const setTrimThreshold = typeof loaded.setTrimThreshold === 'function' ? (loaded.setTrimThreshold as (bytes: number) => boolean) : undefined;
    return { trim: loaded.trim as () => boolean, setTrimThreshold };
  } catch {
    return null;
  }
}

/**
 * A thread's arena gives its free top back once it is over this (malloc-trim.c). 1 MiB and
 * glibc's 128 KiB both left an idle Herald ~10 MB lower after a campaign than the threshold glibc
 * had raised; 1 MiB asks the system less often (bench/README.md § idle).
 */
export const MALLOC_TRIM_THRESHOLD_BYTES = 1024 * 1024;

/** Whether the operator chose glibc's thresholds (environment or tunables): theirs stand. */
export function mallocThresholdsConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return (
    env.MALLOC_TRIM_THRESHOLD_ !== undefined ||
    env.MALLOC_MMAP_THRESHOLD_ !== undefined ||
    /glibc\.malloc\.(trim|mmap)_threshold/.test(env.GLIBC_TUNABLES ?? '')
  );
}

/**
 * When the addon is built: sets the trim threshold (unless the operator chose glibc's thresholds)
 * and trims every MALLOC_TRIM_INTERVAL_MS. Returns whether it is built. The timer never keeps
 * the process alive.
 */
export function trimMallocPeriodically(): boolean {
  const addon = loadMallocTrim();
  if (!addon) return false;
  if (!mallocThresholdsConfigured()) addon.setTrimThreshold?.(MALLOC_TRIM_THRESHOLD_BYTES);
  setInterval(addon.trim, MALLOC_TRIM_INTERVAL_MS).unref();
  return true;
}
