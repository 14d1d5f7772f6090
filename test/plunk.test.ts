import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as plunkModule from '@plunk/node';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { startMailEnv, waitForStatus } from './helpers/mail.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import type { TestServer } from './helpers/server.ts';

// The official Plunk client, pointed at Herald: the drop-in promise of /v1/send and /v1/track.
// It is CommonJS with `exports.default`; seen from ESM the class is one `default` deeper.
type PlunkClient = {
  emails: {
    send: (body: {
      to: string | string[];
      subject: string;
      body: string;
      from?: string;
      name?: string;
      type?: 'html' | 'markdown';
      subscribed?: boolean;
    }) => Promise<unknown>;
  };
  events: { track: (event: { event: string; email: string; data?: Record<string, unknown>; subscribed?: boolean }) => Promise<unknown> };
};
type PlunkConstructor = new (key: string, options?: { baseUrl?: string }) => PlunkClient;
const unwrap = (m: unknown): PlunkConstructor => (typeof m === 'function' ? (m as PlunkConstructor) : unwrap((m as { default: unknown }).default));
const Plunk = unwrap(plunkModule);

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;

before(async () => {
  ({ dns, sink, server } = await startMailEnv());
  b = await bootstrap(server.api);
  await verifyDomain(b.sk, dns, 'plunk.example.test');
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

test('@plunk/node sends through /v1/send and tracks through /v1/track with Herald as its base URL', async () => {
  const sender = new Plunk(b.project.secretKey, { baseUrl: `${server.url}/v1/` });
  const sent = (await sender.emails.send({
    to: 'ada@plunk-client.test',
    subject: 'Hello from Plunk',
    body: '<p>Sent with @plunk/node</p>',
    from: 'hello@plunk.example.test',
    name: 'Plunk client',
    type: 'html',
  })) as { success: boolean; data: { emails: { contact: { email: string }; email: string }[] } };
  assert.equal(sent.success, true);
  assert.equal(sent.data.emails[0].contact.email, 'ada@plunk-client.test');
  await waitForStatus(b.sk, sent.data.emails[0].email, ['SENT', 'DELIVERED']);
  const message = sink.messages.find((m) => m.envelope.to.includes('ada@plunk-client.test'));
  assert.ok(message, 'delivered to the SMTP sink');

  const tracker = new Plunk(b.project.publicKey, { baseUrl: `${server.url}/v1/` });
  const tracked = (await tracker.events.track({ event: 'plunk-signup', email: 'ada@plunk-client.test', data: { plan: 'pro' } })) as {
    success: boolean;
    data: { contact: string; event: string };
  };
  assert.equal(tracked.success, true);
  assert.match(tracked.data.event, /^evt_/);
  const contact = await b.sk.get(`/contacts/${tracked.data.contact}`);
  assert.equal(contact.body.data.plan, 'pro');
});
