import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// `npm run dev:web` proxies API calls to a running Herald (HERALD_URL, default http://localhost:3000).
const target = process.env.HERALD_URL ?? 'http://localhost:3000';
const apiPrefixes = [
  '/auth',
  '/users',
  '/projects',
  '/contacts',
  '/domains',
  '/templates',
  '/campaigns',
  '/segments',
  '/activity',
  '/events',
  '/emails',
  '/config',
  '/suppressions',
  '/uploads',
  '/analytics',
  '/workflows',
];

export default defineConfig({
  base: '/app/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    manifest: true,
    chunkSizeWarningLimit: 1000,
  },
  server: {
    proxy: Object.fromEntries(apiPrefixes.map((p) => [p, { target, changeOrigin: false }])),
  },
});
