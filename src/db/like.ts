/** `text` with LIKE's `%`, `_` and `\` escaped (`\` is PostgreSQL's default LIKE escape). */
const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/** A LIKE/ILIKE pattern matching values that contain `text` literally. */
export const containsPattern = (text: string): string => `%${escapeLike(text)}%`;

/** A LIKE pattern matching values that contain, start with or end with `text` literally. */
export const textPattern = (mode: 'contains' | 'startsWith' | 'endsWith', text: string): string =>
  mode === 'contains' ? containsPattern(text) : mode === 'startsWith' ? `${escapeLike(text)}%` : `%${escapeLike(text)}`;
