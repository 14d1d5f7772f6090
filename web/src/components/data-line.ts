/** A tracked event's data in a line: its first keys A–Z, each value cut short (an event may hold 256 KB of it). */
export function dataLine(data: Record<string, unknown>): string {
  const keys = Object.keys(data).sort();
  const shown = keys.slice(0, 5).map((k) => {
    const v = data[k];
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    return `${k}: ${text.length > 60 ? `${text.slice(0, 59)}…` : text}`;
  });
  return shown.join(' · ') + (keys.length > shown.length ? ' …' : '');
}
