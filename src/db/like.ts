/** A LIKE/ILIKE pattern matching values that contain `text` literally (its `%`, `_` and `\` escaped; `\` is PostgreSQL's default LIKE escape). */
export const containsPattern = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
