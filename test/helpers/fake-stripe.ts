import { type IncomingMessage, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { type TestServer, startTestServer } from './server.ts';

export type StripeCall = { method: string; path: string; query: URLSearchParams; form: URLSearchParams };

/** A checkout session the fake made; a test sets `status` to what Stripe would (complete, expired). */
export type FakeCheckoutSession = {
  id: string;
  customer: string;
  status: 'open' | 'complete' | 'expired';
  mode: string;
  metadata: Record<string, string>;
  url: string;
};

export type FakeStripe = { url: string; calls: StripeCall[]; sessions: FakeCheckoutSession[]; stop: () => Promise<void> };

const read = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => resolve(body));
  });

/** A loopback stand-in for the Stripe API: records every call and answers the few Herald makes. */
export async function startFakeStripe(): Promise<FakeStripe> {
  const calls: StripeCall[] = [];
  let customers = 0;
  const sessions: FakeCheckoutSession[] = [];
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const form = new URLSearchParams(await read(req));
    calls.push({ method: req.method ?? '', path: url.pathname, query: url.searchParams, form });
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json', 'request-id': 'req_fake' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'POST' && url.pathname === '/v1/customers')
      return json(200, { id: `cus_fake${++customers}`, object: 'customer', email: form.get('email') });
    if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions') {
      const id = sessions.length === 0 ? 'cs_fake' : `cs_fake${sessions.length + 1}`;
      const metadata = Object.fromEntries([...form].filter(([k]) => k.startsWith('metadata[')).map(([k, v]) => [k.slice(9, -1), v]));
      const session: FakeCheckoutSession = {
        id,
        customer: form.get('customer') ?? '',
        status: 'open',
        mode: form.get('mode') ?? '',
        metadata,
        url: `https://checkout.stripe.test/c/${id}`,
      };
      sessions.push(session);
      return json(200, { object: 'checkout.session', ...session });
    }
    if (req.method === 'GET' && url.pathname === '/v1/checkout/sessions') {
      const data = sessions
        .filter((s) => s.customer === url.searchParams.get('customer') && (!url.searchParams.get('status') || s.status === url.searchParams.get('status')))
        .map((s) => ({ object: 'checkout.session', ...s, url: s.status === 'open' ? s.url : null }));
      return json(200, { object: 'list', has_more: false, url: '/v1/checkout/sessions', data });
    }
    if (req.method === 'POST' && url.pathname === '/v1/billing_portal/sessions')
      return json(200, { id: 'bps_fake', object: 'billing_portal.session', url: 'https://billing.stripe.test/p/bps_fake' });
    if (req.method === 'GET' && url.pathname === '/v1/invoices') {
      return json(200, {
        object: 'list',
        has_more: false,
        url: '/v1/invoices',
        data: [
          {
            id: 'in_1',
            object: 'invoice',
            number: 'HER-0001',
            status: 'paid',
            amount_due: 2900,
            amount_paid: 2900,
            currency: 'eur',
            created: 1_790_000_000,
            hosted_invoice_url: 'https://invoice.stripe.test/in_1',
            invoice_pdf: 'https://invoice.stripe.test/in_1.pdf',
          },
        ],
      });
    }
    json(404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method}: ${url.pathname})` } });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, calls, sessions, stop: () => new Promise((r) => server.close(() => r())) };
}

export type StripeEnv = {
  fake: FakeStripe;
  /** A server with Stripe billing on, against the fake. */
  server: TestServer;
  /** A server without Stripe. */
  plain: TestServer;
  /**
   * A payments webhook event of `type`, and its Stripe-Signature header for the environment's secret;
   * `created` (Unix seconds) is the event's creation time, now by default.
   */
  signed: (type: string, object: Record<string, unknown>, id?: string, created?: number) => { id: string; payload: string; header: string };
  stop: () => Promise<void>;
};

let eventSeq = 0;

/** The fake Stripe API, a Herald server billing through it with `webhookSecret`, and one without Stripe. */
export async function startStripeEnv(webhookSecret: string): Promise<StripeEnv> {
  const fake = await startFakeStripe();
  const server = await startTestServer({
    STRIPE_SECRET_KEY: 'sk_test_fake',
    STRIPE_WEBHOOK_SECRET: webhookSecret,
    STRIPE_API_BASE: fake.url,
    STRIPE_PRICE_ID: 'price_pro',
  });
  const plain = await startTestServer();
  const stripe = new Stripe('sk_test_fake');
  const signed = (type: string, object: Record<string, unknown>, id = `evt_${++eventSeq}_${Date.now()}`, created = Math.floor(Date.now() / 1000)) => {
    const payload = JSON.stringify({ id, object: 'event', type, api_version: '2025-01-01', created, data: { object } });
    return { id, payload, header: stripe.webhooks.generateTestHeaderString({ payload, secret: webhookSecret }) };
  };
  const stop = async () => {
    await server.stop();
    await plain.stop();
    await fake.stop();
  };
  return { fake, server, plain, signed, stop };
}
