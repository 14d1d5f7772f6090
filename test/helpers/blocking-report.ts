/**
 * Preloaded into every test file's process (`--import`, see package.json). With `--test-force-exit`
 * a test file's process ends with `process.exit()` as soon as its tests are done, and on Linux
 * its results travel to the runner through a non-blocking pipe: whatever was still buffered was
 * lost, and the runner reported fewer tests than ran, still passing (nodejs/node#64833; seen here
 * as render.test.ts's last three tests missing from a loaded run). A blocking stdout hands each
 * result to the pipe before the next line runs, so nothing is left to lose.
 */
const stdout = process.stdout as unknown as { _handle?: { setBlocking?: (blocking: boolean) => void } };
stdout._handle?.setBlocking?.(true);
