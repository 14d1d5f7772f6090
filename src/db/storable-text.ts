/** Whether PostgreSQL can store `s` as text: no NUL character and well-formed UTF-16 (no lone surrogates). */
export const isStorableText = (s: string): boolean => !s.includes('\0') && s.isWellFormed();
