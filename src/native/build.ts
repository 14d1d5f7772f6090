import { buildMallocTrim } from './malloc-trim.ts';

// `npm start` runs this first (prestart): builds the malloc_trim addon once. Not having it is not an error.
const outcome = buildMallocTrim();
if (!outcome.built) console.error(`note: the malloc_trim helper was not built, so Herald keeps ~75 MB more after sending: ${outcome.reason}`);
