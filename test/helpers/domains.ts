import assert from 'node:assert/strict';
import type { TestDns } from './dns-server.ts';
import type { Api } from './http.ts';

export type DomainRecordEntry = {
  type: 'TXT' | 'CNAME' | 'MX';
  name: string;
  value: string;
  priority?: number;
  purpose: string;
  required: boolean;
  found?: boolean;
};

/** Publishes every record Herald asks for (TXT values at the same name are merged, as a DNS zone would). */
export function publishRecords(dns: TestDns, records: DomainRecordEntry[]): void {
  const byKey = new Map<string, { name: string; type: DomainRecordEntry['type']; values: (string | { exchange: string; priority: number })[] }>();
  for (const r of records) {
    const key = `${r.name}|${r.type}`;
    const entry = byKey.get(key) ?? { name: r.name, type: r.type, values: [] };
    entry.values.push(r.type === 'MX' ? { exchange: r.value, priority: r.priority ?? 10 } : r.value);
    byKey.set(key, entry);
  }
  for (const e of byKey.values()) dns.set(e.name, e.type, e.values);
}

/** Adds `domain` to the project, publishes its required records in the test DNS, forces verification, asserts `verified`. Returns the domain record. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function verifyDomain(sk: Api, dns: TestDns, domain: string): Promise<any> {
  const added = await sk.post('/domains', { domain });
  assert.equal(added.status, 201, added.text);
  publishRecords(dns, added.body.records);
  const verified = await sk.get(`/domains/${added.body.id}/verify`);
  assert.equal(verified.status, 200, verified.text);
  assert.equal(verified.body.status, 'verified', verified.text);
  return verified.body;
}
