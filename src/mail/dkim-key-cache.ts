import crypto from 'node:crypto';

/**
 * mailauth takes a DKIM key as PEM and parses it again for every message (0.7 of 1.7 ms per
 * signature on the reference machine). A thread that only signs calls this once: from then on
 * `crypto.createPrivateKey` answers a PEM it has already parsed with the same KeyObject. Bounded
 * (a rotated key is simply a new entry). Only for threads whose whole job is signing: it changes
 * `crypto.createPrivateKey` for everything that runs in the thread.
 */
export function keepParsedPrivateKeys(maxKeys = 200): void {
  const parseKey = crypto.createPrivateKey;
  if ((parseKey as { keepsParsedKeys?: true }).keepsParsedKeys) return;
  const parsed = new Map<string, crypto.KeyObject>();
  const cached = (input: crypto.PrivateKeyInput | string | Buffer): crypto.KeyObject => {
    const pem = typeof input === 'object' && 'key' in input && Buffer.isBuffer(input.key) && input.format === 'pem' ? input.key.toString('latin1') : null;
    if (pem === null) return parseKey(input);
    let key = parsed.get(pem);
    if (!key) {
      key = parseKey(input);
      if (parsed.size >= maxKeys) parsed.delete(parsed.keys().next().value!);
      parsed.set(pem, key);
    }
    return key;
  };
  crypto.createPrivateKey = Object.assign(cached, { keepsParsedKeys: true as const }) as typeof crypto.createPrivateKey;
}
