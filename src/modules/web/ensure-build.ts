import { ensureWebBuild } from './build-state.ts';

// `npm start` runs this first (prestart): a fresh clone or changed dashboard sources get built.
await ensureWebBuild();
