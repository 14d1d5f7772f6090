import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import type { Api } from './http.ts';

export type Bootstrapped = {
  cookie: string;
  userId: string;
  project: { id: string; name: string; publicKey: string; secretKey: string };
  /** Client authenticated with the project's secret key. */
  sk: Api;
  /** Client authenticated with the project's public key. */
  pk: Api;
};

/** Signs up a fresh user and creates a project, exactly as operations.md § Bootstrap describes. */
export async function bootstrap(api: Api, name = 'Test project'): Promise<Bootstrapped> {
  const email = `user-${randomBytes(5).toString('hex')}@example.test`;
  const signup = await api.post('/auth/signup', { email, password: 'correct horse battery' });
  assert.equal(signup.status, 201, signup.text);
  const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
  assert.ok(cookie.startsWith('herald_session='), 'signup sets the session cookie');
  const created = await api.post('/users/@me/projects', { name }, { cookie });
  assert.equal(created.status, 201, created.text);
  return {
    cookie,
    userId: signup.body.id,
    project: created.body,
    sk: api.as({ key: created.body.secretKey }),
    pk: api.as({ key: created.body.publicKey }),
  };
}
