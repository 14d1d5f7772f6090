import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const WEB_ROOT = fileURLToPath(new URL('../../../web/', import.meta.url));
export const WEB_DIST = path.join(WEB_ROOT, 'dist');

/** The sources a build depends on: web/src, web/index.html, the Vite config and the package manifest. */
function newestSourceMtime(): number {
  let newest = 0;
  const visit = (p: string) => {
    const st = statSync(p);
    if (st.isDirectory()) {
      for (const entry of readdirSync(p)) visit(path.join(p, entry));
    } else if (st.mtimeMs > newest) {
      newest = st.mtimeMs;
    }
  };
  for (const name of ['src', 'index.html', 'vite.config.ts', 'package.json', 'build.ts']) {
    const p = path.join(WEB_ROOT, name);
    if (existsSync(p)) visit(p);
  }
  return newest;
}

/** True when web/dist exists and is newer than every source file. */
export function webBuildIsFresh(): boolean {
  const index = path.join(WEB_DIST, 'index.html');
  if (!existsSync(index)) return false;
  return statSync(index).mtimeMs >= newestSourceMtime();
}

/** Builds the dashboard (Vite, in a child process) unless web/dist is up to date. */
export async function ensureWebBuild(opts: { onlyIfMissing?: boolean } = {}): Promise<void> {
  const fresh = opts.onlyIfMissing ? existsSync(path.join(WEB_DIST, 'index.html')) : webBuildIsFresh();
  if (fresh) return;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(WEB_ROOT, 'build.ts')], { cwd: WEB_ROOT, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`dashboard build failed (exit ${code})`))));
  });
}
