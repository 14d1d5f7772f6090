import assert from 'node:assert/strict';
import { type TestDns, startTestDns } from './dns-server.ts';
import type { Api } from './http.ts';
import { type SmtpSink, startSmtpSink } from './smtp-sink.ts';
import { type TestServer, startTestServer } from './server.ts';

export type MailEnv = { dns: TestDns; sink: SmtpSink; server: TestServer; stop: () => Promise<void> };

/** A test server that delivers to a real SMTP sink and resolves through a real DNS server (1000 sends/s). */
export async function startMailEnv(env: Record<string, string> = {}): Promise<MailEnv> {
  const dns = await startTestDns();
  const sink = await startSmtpSink();
  const server = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, SEND_RATE_PER_SECOND: '1000', ...env });
  return {
    dns,
    sink,
    server,
    stop: async () => {
      await server.stop();
      await sink.stop();
      await dns.stop();
    },
  };
}

/** Polls GET /emails/:id until its status is one of `statuses`; returns the email. */
export async function waitForStatus(sk: Api, id: string, statuses: string[], timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await sk.get(`/emails/${id}`);
    assert.equal(res.status, 200, res.text);
    if (statuses.includes(res.body.status)) return res.body;
    if (Date.now() > deadline) assert.fail(`email ${id} stayed ${res.body.status} (${res.body.error}), wanted ${statuses}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
