import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Api } from './http.ts';
import type { SinkMessage, SmtpSink } from './smtp-sink.ts';

/** Signs up an account; returns its id, address and session cookie. */
export async function signupUser(api: Api, email = `user-${randomBytes(5).toString('hex')}@example.test`) {
  const res = await api.post('/auth/signup', { email, password: 'correct horse battery' });
  assert.equal(res.status, 201, res.text);
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0];
  return { id: res.body.id as string, email, cookie };
}

/** A client acting as a signed-in user on one project (cookie + X-Project-Id). */
export const asMember = (api: Api, cookie: string, projectId: string) => api.as({ cookie, headers: { 'x-project-id': projectId } });

/** Waits for a message to `to` whose subject contains `subject`. */
export async function waitForMail(sink: SmtpSink, to: string, subject: string, timeoutMs = 10_000): Promise<SinkMessage> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = sink.messages.find((m) => m.envelope.to.includes(to) && (m.parsed.subject ?? '').includes(subject));
    if (found) return found;
    if (Date.now() > deadline) assert.fail(`no mail to ${to} with subject containing "${subject}"`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function invitationToken(message: SinkMessage): string {
  const m = /invitations\/accept\?token=([\w.-]+)/.exec(String(message.parsed.html ?? message.parsed.text ?? ''));
  assert.ok(m, 'the invitation carries a link');
  return m[1];
}
