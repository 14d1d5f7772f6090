import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { simpleParser } from 'mailparser';
import type { Browser, Locator, Page } from 'playwright-core';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { BROWSER_SETUP_TIMEOUT_MS, journey, openPage } from './helpers/browser.ts';
import { waitForStatus } from './helpers/mail.ts';
import { openDashboard } from './helpers/dashboard.ts';
import { acceptInvitationAs, invitationTokenFor, joinWithInvitation } from './helpers/invitations.ts';
import { waitFor } from './helpers/workflows.ts';
import type { TestServer } from './helpers/server.ts';

/**
 * The analytics, workflows and members pages in a real headless Chromium, on data made through
 * the API (capture mode: mail is delivered to the capture store from the sandbox sender).
 */

let server: TestServer;
let stop = async () => {};
let browser: Browser;
let page: Page;
let owner: Bootstrapped;

before(
  async () => {
    ({ server, owner, page, browser, stop } = await openDashboard('Pages'));
  },
  { timeout: BROWSER_SETUP_TIMEOUT_MS },
);

after(() => stop());

const base = () => `${server.url}/app/p/${owner.project.id}`;

/** One email sent from the sandbox sender and delivered (capture mode): its id and its contact's. */
async function sendDelivered(to: string, subject: string, body = `<p>${subject}</p>`): Promise<{ emailId: string; contactId: string }> {
  const sent = await owner.sk.post('/v1/send', { to, from: 'hi@sandbox.herald.test', subject, body });
  assert.equal(sent.status, 200, sent.text);
  const emailId: string = sent.body.data.emails[0].email;
  await waitForStatus(owner.sk, emailId, ['DELIVERED']);
  return { emailId, contactId: sent.body.data.emails[0].contact.id };
}

/** A new account joined to the owner's project as a MEMBER, and `visit` on a page of that account's session. */
async function asMember(accountsProject: string, visit: (memberPage: Page) => Promise<void>): Promise<void> {
  const member = await bootstrap(server.api, accountsProject);
  const memberEmail: string = (await server.api.get('/users/@me', { cookie: member.cookie })).body.email;
  const invited = await server.api.post(`/projects/${owner.project.id}/members`, { email: memberEmail, role: 'MEMBER' }, { cookie: owner.cookie });
  await joinWithInvitation(server, invited, member.cookie);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    const [name, value] = member.cookie.split('=');
    await context.addCookies([{ name, value, url: server.url }]);
    await visit(await openPage(context));
  } finally {
    await context.close();
  }
}

/** Each body row of `table` as the text of its first `cells` cells, whitespace collapsed, joined by " | ". */
const rowTexts = async (table: Locator, cells: number): Promise<string[]> =>
  Promise.all(
    (await table.locator('tbody tr').all()).map(async (row) =>
      (await row.getByRole('cell').allInnerTexts())
        .slice(0, cells)
        .map((cell) => cell.replace(/\s+/g, ' ').trim())
        .join(' | '),
    ),
  );

/** What a test reads of an <img> in the page (the tests' TypeScript has no DOM types). */
type LoadedImage = { complete: boolean; naturalWidth: number; addEventListener: (type: 'load', listener: (e: unknown) => void) => void };

test('analytics: totals, top campaigns and top events over the chosen range', { timeout: 180_000 }, async () => {
  await journey(page, 'analytics', async () => {
    await sendDelivered('reader@example.org', 'Hello');
    for (let i = 0; i < 3; i++) {
      const tracked = await owner.pk.post('/v1/track', { email: `buyer${i % 2}@example.org`, event: 'purchased' });
      assert.equal(tracked.status, 200, tracked.text);
    }

    await page.goto(`${base()}/analytics?days=7`);
    await page.getByRole('heading', { name: 'Analytics' }).waitFor();
    await page.getByTestId('total-sent').filter({ hasText: /^1$/ }).waitFor();
    await page.getByTestId('total-delivered').filter({ hasText: /^1$/ }).waitFor();
    const row = page.getByTestId('top-events').getByRole('row', { name: /purchased/ });
    await row.waitFor(); // the top events are a query of their own, which may answer after the totals
    assert.deepEqual(await row.getByRole('cell').allInnerTexts(), ['purchased', '3', '2']);
    await page.getByText('No campaigns sent in this range').waitFor();

    // One metric: the totals shrink to it, and the choice is in the URL.
    await page.getByRole('combobox', { name: 'Metric' }).click();
    await page.getByRole('option', { name: 'Delivered' }).click();
    await page.waitForURL(/metric=delivered/);
    await page.getByTestId('total-sent').waitFor({ state: 'detached' });
    await page.getByTestId('total-delivered').filter({ hasText: /^1$/ }).waitFor();
    assert.equal(
      await page
        .getByTestId('analytics-totals')
        .getByTestId(/^total-/)
        .count(),
      1,
    );

    // The home page's last 7 days: totals with a small chart each.
    await page.goto(base());
    await page.getByTestId('week-sent').filter({ hasText: /^1$/ }).waitFor();
    await page.getByTestId('week-delivered').filter({ hasText: /^1$/ }).waitFor();
    await page.locator('.recharts-surface').nth(4).waitFor();
    assert.equal(await page.locator('.recharts-surface').count(), 5);
  });
});

test("analytics: days in the project's time zone, chosen in Settings; 7 days are 7 buckets; Delivered does not hide Sent", { timeout: 180_000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'America/Los_Angeles', locale: 'en-US' });
  const [name, value] = owner.cookie.split('=');
  await context.addCookies([{ name, value, url: server.url }]);
  const west = await openPage(context);
  try {
    await journey(west, 'analytics-time-zone', async () => {
      await sendDelivered('zoned@example.org', 'Zoned');
      await west.goto(`${base()}/settings`);
      const zone = west
        .getByRole('textbox', { name: 'Time zone' })
        .or(west.getByRole('combobox', { name: 'Time zone' }))
        .first();
      await zone.click();
      await zone.fill('Tokyo');
      await west.getByRole('option', { name: 'Asia/Tokyo', exact: true }).click();
      await west.getByRole('button', { name: 'Save', exact: true }).click();
      await west.getByText('Settings saved').waitFor();
      const mine = await server.api.get('/users/@me/projects', { cookie: owner.cookie });
      assert.equal(mine.body.find((p: { id: string }) => p.id === owner.project.id).timezone, 'Asia/Tokyo');

      const answered = west.waitForResponse((r) => r.url().includes('/analytics/timeseries'));
      await west.goto(`${base()}/analytics?days=7`);
      const points: { t: string; sent: number; delivered: number }[] = (await (await answered).json()).points;
      assert.equal(points.length, 7, JSON.stringify(points.map((p) => p.t)));
      // Each bucket starts at Tokyo's midnight (15:00 UTC the day before) and is labelled with Tokyo's date.
      assert.ok(
        points.every((p) => p.t.endsWith('T15:00:00Z')),
        JSON.stringify(points.map((p) => p.t)),
      );
      const tokyoDate = (t: string) => {
        const d = new Date(Date.parse(t) + 9 * 3_600_000);
        return `${d.getUTCMonth() + 1}/${d.getUTCDate()}/${d.getUTCFullYear()}`;
      };
      // The x-axis ticks: the chart's texts that are dates.
      const ticks = west.locator('.recharts-surface text').filter({ hasText: /^\d+\/\d+\/\d{4}$/ });
      await ticks.first().waitFor();
      assert.deepEqual(
        await ticks.allTextContents(),
        points.map((p) => tokyoDate(p.t)),
      );
      assert.equal(points.at(-1)!.sent, points.at(-1)!.delivered);
      // Sent and Delivered are equal: Delivered is dashed, so Sent shows through it.
      const dashes = await west
        .locator('path.recharts-area-curve')
        .evaluateAll((paths) =>
          (paths as unknown as { getAttribute: (a: string) => string | null }[]).map((p) => [p.getAttribute('name'), p.getAttribute('stroke-dasharray')]),
        );
      assert.deepEqual(dashes.find(([n]) => n === 'delivered')?.[1], '6 4', JSON.stringify(dashes));
      assert.equal(dashes.find(([n]) => n === 'sent')?.[1], null, JSON.stringify(dashes));
    });
  } finally {
    await context.close();
    await server.api.patch(`/users/@me/projects/${owner.project.id}`, { timezone: 'UTC' }, { cookie: owner.cookie });
  }
});

test('workflows: list, enable from the list, steps with counts, an execution cancelled from the page', { timeout: 180_000 }, async () => {
  await journey(page, 'workflows', async () => {
    const created = await owner.sk.post('/workflows', { name: 'Welcome series', eventName: 'signed_up' });
    assert.equal(created.status, 201, created.text);
    const w = created.body;
    const trigger = w.steps.find((s: { type: string }) => s.type === 'TRIGGER');
    const delay = await owner.sk.post(`/workflows/${w.id}/steps`, { type: 'DELAY', name: 'Wait a day', config: { amount: 1, unit: 'days' } });
    assert.equal(delay.status, 201, delay.text);
    assert.equal((await owner.sk.post(`/workflows/${w.id}/transitions`, { fromStepId: trigger.id, toStepId: delay.body.id })).status, 201);

    await page.goto(`${base()}/workflows`);
    await page.getByRole('link', { name: 'Welcome series' }).waitFor();
    await page.getByRole('switch', { name: 'Enable Welcome series' }).click();
    await page.getByText('Welcome series enabled').waitFor();
    assert.equal((await owner.sk.get(`/workflows/${w.id}`)).body.enabled, true);

    assert.equal((await owner.pk.post('/v1/track', { email: 'newbie@example.org', event: 'signed_up' })).status, 200);
    let executionId = '';
    for (let i = 0; i < 100 && !executionId; i++) {
      const list = await owner.sk.get(`/workflows/${w.id}/executions?status=WAITING`);
      executionId = list.body.data[0]?.id ?? '';
      if (!executionId) await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(executionId, 'the tracked event started an execution that waits in the delay');

    await page.getByRole('link', { name: 'Welcome series' }).click();
    const steps = page.getByTestId('workflow-steps');
    const delayRow = steps.getByRole('row', { name: /^DELAY/ });
    await delayRow.waitFor();
    assert.deepEqual((await steps.getByRole('columnheader').allInnerTexts()).slice(2), ['Entered', 'Completed', 'Waiting', 'Failed', 'Skipped']);
    assert.deepEqual((await delayRow.getByRole('cell').allInnerTexts()).slice(2), ['1', '0', '1', '0', '0']);
    assert.match(await delayRow.innerText(), /\b1 day\b/);
    assert.match(await steps.getByRole('row', { name: /^TRIGGER/ }).innerText(), /Wait a day/);

    const execution = page.getByTestId('workflow-executions').getByRole('row', { name: /newbie@example\.org/ });
    await execution.getByText('WAITING').waitFor();
    await execution.getByRole('button', { name: 'Cancel' }).click();
    const confirm = page.getByRole('dialog', { name: 'Cancel this execution?' });
    await confirm.getByText('newbie@example.org leaves Welcome series now: its remaining steps are skipped, and the execution cannot be resumed.').waitFor();
    assert.equal((await owner.sk.get(`/workflows/${w.id}/executions/${executionId}`)).body.status, 'WAITING', 'nothing before the confirmation');
    await confirm.getByRole('button', { name: 'Cancel execution' }).click();
    await page.getByText('Execution cancelled').waitFor();
    await execution.getByText('CANCELLED').waitFor();
    assert.equal((await owner.sk.get(`/workflows/${w.id}/executions/${executionId}`)).body.status, 'CANCELLED');

    // Each step says what it does: the template a SEND_EMAIL sends, by name and linked; what a CONDITION checks.
    // On a phone, the step types are whole; a link leads back to the list.
    const template = await owner.sk.post('/templates', {
      name: 'Day one',
      subject: 'Day one',
      body: '<p>Hi</p>',
      from: 'hi@sandbox.herald.test',
      type: 'MARKETING',
    });
    assert.equal(template.status, 201, template.text);
    const send = await owner.sk.post(`/workflows/${w.id}/steps`, { type: 'SEND_EMAIL', name: 'Say hello', config: { templateId: template.body.id } });
    assert.equal(send.status, 201, send.text);
    const check = await owner.sk.post(`/workflows/${w.id}/steps`, {
      type: 'CONDITION',
      name: 'Activated?',
      config: { field: 'data.activated', operator: 'equals', value: true },
    });
    assert.equal(check.status, 201, check.text);
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.reload();
      await steps
        .getByRole('row', { name: /^CONDITION/ })
        .getByText('data.activated equals true', { exact: true })
        .waitFor();
      const templateLink = steps.getByRole('row', { name: /^SEND_EMAIL/ }).getByRole('link', { name: 'Day one' });
      assert.equal(await templateLink.getAttribute('href'), `/app/p/${owner.project.id}/templates/${template.body.id}`);
      type Measured = { scrollWidth: number; clientWidth: number; textContent: string | null };
      const cut = await steps
        .locator('.mantine-Badge-label')
        .evaluateAll((els) => (els as unknown as Measured[]).filter((e) => e.scrollWidth > e.clientWidth).map((e) => e.textContent));
      assert.deepEqual(cut, []);
      await page.getByRole('link', { name: '← Workflows' }).click();
      await page.getByRole('link', { name: 'Welcome series' }).waitFor();
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });
});

test("workflows: enabling one without steps says why once, and that steps are added in the workflow's editor", { timeout: 180_000 }, async () => {
  await journey(page, 'workflow-enable-empty', async () => {
    const created = await owner.sk.post('/workflows', { name: 'Empty one', eventName: 'nothing_yet' });
    assert.equal(created.status, 201, created.text);
    await page.goto(`${base()}/workflows/${created.body.id}`);
    await page.getByRole('link', { name: 'Edit' }).waitFor();
    assert.match((await page.getByRole('link', { name: 'Edit' }).getAttribute('href')) ?? '', new RegExp(`/workflows/${created.body.id}/edit$`));
    await page.getByRole('switch', { name: 'Enabled' }).click({ force: true });
    const toast = page.locator('.mantine-Notification-root').filter({ hasText: 'The workflow cannot be enabled' });
    await toast.waitFor();
    assert.equal(
      (await toast.innerText()).replace(/\s+/g, ' ').replace(/ ?×$/, '').trim(),
      'The workflow cannot be enabled: the trigger leads to no step: add a step and a transition from the TRIGGER step ' +
        "Add its steps in the workflow's editor: Edit, on the workflow's page.",
    );
    assert.equal((await owner.sk.get(`/workflows/${created.body.id}`)).body.enabled, false);
  });
});

test('members: an existing account is invited, accepts and is promoted, a new address is invited and revoked', { timeout: 180_000 }, async () => {
  await journey(page, 'members', async () => {
    const colleague = await bootstrap(server.api, 'Elsewhere');
    const me = await server.api.get('/users/@me', { cookie: colleague.cookie });
    const colleagueEmail: string = me.body.email;

    await page.goto(`${base()}/settings`);
    const members = page.getByTestId('members');
    await members.getByRole('row', { name: /OWNER/ }).waitFor();

    // An address with an account is invited like any other, and joins by the emailed link.
    await page.getByLabel('Invite by email').fill(colleagueEmail);
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.getByText(`Invitation sent to ${colleagueEmail}`).waitFor();
    await members
      .getByRole('row')
      .filter({ hasText: colleagueEmail })
      .getByText(/invited, until/)
      .waitFor();
    const pending = await server.api.get(`/projects/${owner.project.id}/members`, { cookie: owner.cookie });
    const invitation = pending.body.invitations.find((i: { email: string }) => i.email === colleagueEmail);
    assert.equal(invitation?.role, 'MEMBER');
    const accepted = await acceptInvitationAs(server, invitation, colleague.cookie);
    assert.deepEqual(accepted.body, { projectId: owner.project.id, role: 'MEMBER' });

    await page.reload();
    await page.getByRole('combobox', { name: `Role of ${colleagueEmail}` }).click();
    await page.getByRole('option', { name: 'ADMIN' }).click();
    await page.getByText('Role changed').waitFor();
    const listed = await server.api.get(`/projects/${owner.project.id}/members`, { cookie: owner.cookie });
    assert.equal(listed.body.members.find((m: { email: string }) => m.email === colleagueEmail)?.role, 'ADMIN');

    await page.getByLabel('Invite by email').fill('newcomer@example.org');
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.getByText('Invitation sent to newcomer@example.org').waitFor();
    const invited = members.getByRole('row', { name: /newcomer@example\.org/ });
    await invited.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog', { name: 'Revoke this invitation?' }).getByRole('button', { name: 'Revoke invitation' }).click();
    await page.getByText('Invitation revoked').waitFor();
    await invited.waitFor({ state: 'detached' });
    const after = await server.api.get(`/projects/${owner.project.id}/members`, { cookie: owner.cookie });
    assert.deepEqual(after.body.invitations, []);

    // The postal address printed in marketing footers.
    await page.getByLabel('Postal address').fill('Acme Inc., 1 Main St, Springfield');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('Settings saved').waitFor();
    const projects = await server.api.get('/users/@me/projects', { cookie: owner.cookie });
    assert.equal(projects.body.find((p: { id: string }) => p.id === owner.project.id)?.postalAddress, 'Acme Inc., 1 Main St, Springfield');

    // A bad address is refused on its field, and nothing is invited.
    await page.getByLabel('Invite by email').fill('not-an-address');
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.getByText(/email/i, { exact: false }).and(page.locator('.mantine-TextInput-error, .mantine-InputWrapper-error')).waitFor();
    assert.equal((await server.api.get(`/projects/${owner.project.id}/members`, { cookie: owner.cookie })).body.invitations.length, 0);
  });
});

test(
  'members: Revoke, Remove and Leave ask first and say what happens; a MEMBER who leaves lands on the projects page without the project',
  { timeout: 180_000 },
  async () => {
    await journey(page, 'members-confirm', async () => {
      const invited = await server.api.post(`/projects/${owner.project.id}/members`, { email: 'maybe@example.org', role: 'MEMBER' }, { cookie: owner.cookie });
      assert.equal(invited.status, 201, invited.text);
      const other = await bootstrap(server.api, 'Other side');
      const otherEmail: string = (await server.api.get('/users/@me', { cookie: other.cookie })).body.email;
      await joinWithInvitation(
        server,
        await server.api.post(`/projects/${owner.project.id}/members`, { email: otherEmail, role: 'MEMBER' }, { cookie: owner.cookie }),
        other.cookie,
      );
      const listed = async () => (await server.api.get(`/projects/${owner.project.id}/members`, { cookie: owner.cookie })).body;

      await page.goto(`${base()}/settings`);
      const members = page.getByTestId('members');
      await members
        .getByRole('row', { name: /maybe@example\.org/ })
        .getByRole('button', { name: 'Revoke' })
        .click();
      const revoke = page.getByRole('dialog', { name: 'Revoke this invitation?' });
      await revoke.getByText('The link sent to maybe@example.org stops working. You can invite the address again later.').waitFor();
      await revoke.getByRole('button', { name: 'Cancel' }).click();
      await revoke.waitFor({ state: 'detached' });
      assert.equal((await listed()).invitations.length, 1, 'nothing before the confirmation');

      await members
        .getByRole('row', { name: new RegExp(otherEmail.replace(/[.+]/g, '\\$&')) })
        .getByRole('button', { name: 'Remove' })
        .click();
      const remove = page.getByRole('dialog', { name: 'Remove this member?' });
      await remove.getByText(`${otherEmail} loses access to Pages at once. To come back, they need a new invitation.`).waitFor();
      assert.ok(
        (await listed()).members.some((m: { email: string }) => m.email === otherEmail),
        'nothing before the confirmation',
      );
      await remove.getByRole('button', { name: 'Remove member' }).click();
      await page.getByText('Member removed').waitFor();
      assert.ok(!(await listed()).members.some((m: { email: string }) => m.email === otherEmail));

      const before = (await listed()).members.length;
      await asMember('Left behind', async (memberPage) => {
        await memberPage.goto(`${base()}/settings`);
        await memberPage.getByRole('button', { name: 'Leave' }).click();
        const leave = memberPage.getByRole('dialog', { name: 'Leave this project?' });
        await leave.getByText('You lose access to Pages at once. To come back, an admin has to invite you again.').waitFor();
        await leave.getByRole('button', { name: 'Leave project' }).click();
        await memberPage.waitForURL(/\/app\/projects$/);
        await memberPage.getByText('Left behind').first().waitFor();
        assert.equal(await memberPage.getByText('Pages', { exact: true }).count(), 0, 'the project left is in no list or switcher');
      });
      assert.equal((await listed()).members.length, before);
    });
  },
);

test('an invitation to an address without an account: the emailed link, signed out, leads through signup into the project', { timeout: 180_000 }, async () => {
  const email = `invitee-${Date.now()}@example.org`;
  const invited = await server.api.post(`/projects/${owner.project.id}/members`, { email, role: 'MEMBER' }, { cookie: owner.cookie });
  assert.equal(invited.status, 201, invited.text);
  const link = `${server.url}/invitations/accept?token=${invitationTokenFor(server.ctx, invited.body.invitation)}`;
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    const invitee = await openPage(context);
    await invitee.goto(link);
    await invitee.getByText('You were invited to a project on Herald. Log in, or create an account, with the invited address to join it.').waitFor();
    await invitee.getByRole('link', { name: 'Log in' }).click();
    await invitee.getByRole('heading', { name: 'Log in to Herald' }).waitFor();
    // No account yet: the login page's link to signup keeps where to go next.
    await invitee.getByRole('link', { name: 'Create an account' }).click();
    await invitee.getByLabel('Email').fill(email);
    await invitee.getByRole('textbox', { name: 'Password' }).fill('correct horse battery');
    await invitee.getByRole('button', { name: 'Sign up' }).click();
    await invitee.waitForURL(new RegExp(`/app/p/${owner.project.id}$`));
    await invitee.getByText('You joined the project as MEMBER').waitFor();
    const listed = await server.api.get(`/projects/${owner.project.id}/members`, { cookie: owner.cookie });
    assert.equal(listed.body.members.find((m: { email: string }) => m.email === email)?.role, 'MEMBER');

    // The link again, now used: the page says why, with a way on.
    await invitee.goto(`${server.url}/app/invitation?token=${new URL(link).searchParams.get('token')}`);
    await invitee
      .getByTestId('invitation-error')
      .filter({ hasText: /already used/ })
      .waitFor();
  } finally {
    await context.close();
  }
});

test(
  'while mail is captured, the checklist and the From field name the sandbox sender, and a sent email completes its first step',
  { timeout: 180_000 },
  async () => {
    await journey(page, 'sandbox-sender', async () => {
      const created = await server.api.post('/users/@me/projects', { name: 'Sandbox' }, { cookie: owner.cookie });
      assert.equal(created.status, 201, created.text);
      const home = `${server.url}/app/p/${created.body.id}`;
      await page.goto(home);
      const onboarding = page.getByTestId('onboarding');
      await onboarding.getByText('0 of 4 done').waitFor();
      await onboarding.getByRole('link', { name: 'Verify a sending domain, or send from any address @sandbox.herald.test while mail is captured' }).waitFor();

      await page.goto(`${home}/templates/new`);
      await page.getByText('Mail is captured: any address @sandbox.herald.test sends without a verified domain').waitFor();
      assert.equal(await page.getByRole('textbox', { name: 'From address' }).getAttribute('placeholder'), 'hello@sandbox.herald.test');

      const sk = server.api.as({ key: created.body.secretKey });
      const sent = await sk.post('/v1/send', { to: 'first@example.org', from: 'hello@sandbox.herald.test', subject: 'First', body: '<p>First</p>' });
      assert.equal(sent.status, 200, sent.text);
      await waitForStatus(sk, sent.body.data.emails[0].email, ['DELIVERED']);
      await page.goto(home);
      // The email, and the contact it made: the sender step and the send step are done.
      await onboarding.getByText('3 of 4 done').waitFor();
      assert.equal(
        await onboarding
          .getByRole('link')
          .allInnerTexts()
          .then((links) => links.join()),
        'Write a template',
      );
    });
  },
);

test('an email page: status, what happened when, and the captured source', { timeout: 180_000 }, async () => {
  await journey(page, 'email-page', async () => {
    const { emailId: id } = await sendDelivered('detail@example.org', 'Detail page');
    const tracked = await owner.pk.post('/v1/track', { email: 'detail@example.org', event: 'purchase', data: { sku: 'A-1', amount: 42 } });
    assert.equal(tracked.status, 200, tracked.text);

    await page.goto(`${base()}/activity`);
    // A tracked event's row shows its data, as the contact's page does.
    await page.getByRole('row').filter({ hasText: 'purchase' }).getByText('amount: 42 · sku: A-1').waitFor();
    await page.getByRole('link', { name: 'Detail page' }).first().click();
    await page.waitForURL(new RegExp(`/emails/${id}$`));
    await page.getByTestId('email-status').filter({ hasText: 'DELIVERED' }).waitFor();
    const history = await page.getByTestId('email-history').getByRole('row').allInnerTexts();
    assert.deepEqual(
      history.map((r) => r.split('\t')[0]),
      ['Queued', 'Sent', 'Delivered'],
    );
    const raw = await page.getByTestId('email-raw').innerText();
    assert.match(raw, /^DKIM-Signature: /);
    assert.match(raw, /Subject: Detail page/);

    // An email to a suppressed address was never sent: the page says so, not that sources are kept for captured mail only.
    await server.sql(`INSERT INTO suppressions (project_id, email, reason) VALUES ($1, 'held@never-sent.test', 'manual')`, [owner.project.id]);
    const held = await owner.sk.post('/v1/send', { to: 'held@never-sent.test', from: 'hi@sandbox.herald.test', subject: 'Held back', body: '<p>x</p>' });
    assert.equal(held.status, 200, held.text);
    const heldId: string = held.body.data.emails[0].email;
    await waitForStatus(owner.sk, heldId, ['SUPPRESSED']);
    await page.goto(`${base()}/emails/${heldId}`);
    await page.getByText('This email was never sent (suppressed), so there is no message source.').waitFor();
    assert.equal(await page.getByText(/Not stored/).count(), 0);
    assert.equal((await owner.sk.delete('/suppressions/held@never-sent.test')).status, 204, 'the suppressions test counts its own');
  });
});

test(
  "a campaign report lists its recipients' emails with their status, following them while it sends; a status narrows the list, and an address opens its email",
  { timeout: 180_000 },
  async () => {
    await journey(page, 'campaign-recipients', async () => {
      const readers = ['ann@recipients.test', 'bob@recipients.test', 'cy@recipients.test'];
      for (const email of readers) assert.equal((await owner.sk.post('/contacts', { email, subscribed: true })).status, 201);
      const created = await owner.sk.post('/campaigns', {
        name: 'Recipients',
        subject: 'Our news',
        body: '<p>News</p>',
        from: 'hi@sandbox.herald.test',
        audienceType: 'FILTERED',
        audienceCondition: { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'endsWith', value: '@recipients.test' }] }] },
      });
      assert.equal(created.status, 201, created.text);
      const id: string = created.body.data.id;
      assert.equal((await owner.sk.post(`/campaigns/${id}/send`, {})).status, 200);
      await waitFor('the campaign to be sent', async () => (await owner.sk.get(`/campaigns/${id}`)).body.status === 'SENT');
      // Shown as still SENDING (held there), the list follows its emails as the stats do.
      await server.sql(`UPDATE campaigns SET status = 'SENDING' WHERE id = $1`, [id]);
      await page.goto(`${base()}/campaigns/${id}/report`);
      const table = page.getByTestId('email-list');
      await table
        .getByRole('row', { name: /bob@recipients\.test/ })
        .getByText('DELIVERED')
        .waitFor();
      // Bob's bounced since, as the relay's report would mark it: the open list shows it without a reload.
      const [bounced] = await server.sql<{ id: string }>(
        `UPDATE emails SET status = 'BOUNCED', error = '550 5.1.1 No such user', bounced_at = now() WHERE campaign_id = $1 AND to_email = $2 RETURNING id`,
        [id, 'bob@recipients.test'],
      );
      await table
        .getByRole('row', { name: /bob@recipients\.test/ })
        .getByText('BOUNCED')
        .waitFor({ timeout: 10_000 });
      await server.sql(`UPDATE campaigns SET status = 'SENT' WHERE id = $1`, [id]);

      await page.goto(`${base()}/campaigns/${id}/report`);
      await table.waitFor();
      await page.getByTestId('email-list-total').filter({ hasText: /^3$/ }).waitFor();
      // The charts above load on their own and push the list down: a status menu opened before they did was left off screen.
      await page.getByRole('heading', { name: 'Opens and clicks over time' }).waitFor();
      await page.getByText('No clicks yet').waitFor();
      /** Each row's recipient, status (with its error) and opens, as the page shows them. */
      const rows = () => rowTexts(table, 3);
      assert.deepEqual((await rows()).sort(), [
        'ann@recipients.test | DELIVERED | 0',
        'bob@recipients.test | BOUNCED 550 5.1.1 No such user | 0',
        'cy@recipients.test | DELIVERED | 0',
      ]);

      await page.getByRole('combobox', { name: 'Email status' }).click();
      await page.getByRole('option', { name: 'BOUNCED' }).click();
      await page.waitForURL(/recipients=BOUNCED/);
      await page.getByTestId('email-list-total').filter({ hasText: /^1$/ }).waitFor();
      assert.deepEqual(await rows(), ['bob@recipients.test | BOUNCED 550 5.1.1 No such user | 0']);
      await page.getByRole('combobox', { name: 'Email status' }).click();
      await page.getByRole('option', { name: 'FAILED' }).click();
      await page.getByText('No failed emails').waitFor();

      await page.getByRole('combobox', { name: 'Email status' }).click();
      await page.getByRole('option', { name: 'BOUNCED' }).click();
      await table.getByRole('link', { name: 'bob@recipients.test' }).click();
      await page.waitForURL(new RegExp(`/emails/${bounced.id}$`));
      await page.getByTestId('email-status').filter({ hasText: 'BOUNCED' }).waitFor();
      // Back goes to the report as it was left.
      await page.getByRole('link', { name: '← Back' }).click();
      await page.waitForURL(new RegExp(`/campaigns/${id}/report\\?recipients=BOUNCED$`));
      await page.getByTestId('email-list-total').filter({ hasText: /^1$/ }).waitFor();

      // The Emails page lists every email of the project, with its subject; BOUNCED narrows it to Bob's.
      await page.getByRole('link', { name: 'Emails', exact: true }).click();
      await page.waitForURL(/\/emails$/);
      await table.waitFor();
      await page.getByRole('combobox', { name: 'Email status' }).click();
      await page.getByRole('option', { name: 'BOUNCED' }).click();
      await page.waitForURL(/\/emails\?status=BOUNCED$/);
      await page.getByTestId('email-list-total').filter({ hasText: /^1$/ }).waitFor();
      assert.deepEqual(await rows(), ['bob@recipients.test | Our news | BOUNCED 550 5.1.1 No such user']);
    });
  },
);

test(
  'suppressions: the addresses with their reason and email, narrowed by a search and a reason; an ADMIN removes one, a MEMBER cannot',
  { timeout: 180_000 },
  async () => {
    await journey(page, 'suppressions', async () => {
      const { emailId, contactId } = await sendDelivered('gone@suppressed.test', 'Bounced later');
      // As the relay's bounce and a complaint would leave them (test/suppressions.test.ts makes them for real).
      await server.sql(
        `INSERT INTO suppressions (project_id, email, reason, email_id, created_at) VALUES
         ($1, 'gone@suppressed.test', 'bounce', $2, now() - interval '2 minutes'),
         ($1, 'angry@suppressed.test', 'complaint', NULL, now() - interval '1 minute'),
         ($1, 'by-hand@suppressed.test', 'manual', NULL, now())`,
        [owner.project.id, emailId],
      );

      await page.goto(base());
      await page.getByRole('link', { name: 'Suppressions', exact: true }).click();
      await page.waitForURL(/\/suppressions$/);
      const table = page.getByTestId('suppressions');
      await page.getByTestId('suppressions-total').filter({ hasText: /^3$/ }).waitFor();
      /** Each row's address and reason (with its email's link), as the page shows them. */
      const rows = () => rowTexts(table, 2);
      assert.deepEqual(await rows(), ['by-hand@suppressed.test | MANUAL', 'angry@suppressed.test | COMPLAINT', 'gone@suppressed.test | BOUNCE the email']);

      await page.getByRole('textbox', { name: 'Search addresses' }).fill('ANGRY');
      await page.waitForURL(/search=ANGRY/);
      await page.getByTestId('suppressions-total').filter({ hasText: /^1$/ }).waitFor();
      assert.deepEqual(await rows(), ['angry@suppressed.test | COMPLAINT']);
      // The sidebar's link opens the whole list again: the box's old text does not write the search back.
      await page.getByRole('link', { name: 'Suppressions', exact: true }).click();
      await page.getByTestId('suppressions-total').filter({ hasText: /^3$/ }).waitFor();
      await page.waitForTimeout(600); // past the box's 300 ms
      assert.match(page.url(), /\/suppressions$/);
      assert.equal(await page.getByRole('textbox', { name: 'Search addresses' }).inputValue(), '');
      await page.getByRole('textbox', { name: 'Search addresses' }).fill(' angry ');
      await page.waitForURL(/search=angry$/);
      await page.getByTestId('suppressions-total').filter({ hasText: /^1$/ }).waitFor();
      await page.getByRole('textbox', { name: 'Search addresses' }).fill('');
      await page.waitForURL(/\/suppressions$/);
      await page.getByTestId('suppressions-total').filter({ hasText: /^3$/ }).waitFor();
      await page.getByRole('combobox', { name: 'Reason' }).click();
      await page.getByRole('option', { name: 'bounce' }).click();
      await page.waitForURL(/\/suppressions\?reason=bounce$/);
      await page.getByTestId('suppressions-total').filter({ hasText: /^1$/ }).waitFor();
      await table.getByRole('link', { name: 'the email' }).click();
      await page.waitForURL(new RegExp(`/emails/${emailId}$`));
      await page.getByTestId('email-status').filter({ hasText: 'DELIVERED' }).waitFor();

      // A MEMBER reads the list but has no Remove.
      await asMember('Reads suppressions', async (memberPage) => {
        await memberPage.goto(`${base()}/suppressions`);
        await memberPage.getByTestId('suppressions-total').filter({ hasText: /^3$/ }).waitFor();
        assert.equal(await memberPage.getByRole('button', { name: /^Remove/ }).count(), 0);
      });

      // The contact's page says its address is suppressed, and why; its link opens the list at that address.
      await page.goto(`${base()}/contacts/${contactId}`);
      const notice = page.getByTestId('contact-suppressed');
      await notice.getByText(/^It bounced on .+ \(the email\), so every email to it is recorded as SUPPRESSED/).waitFor();
      await notice.getByRole('link', { name: 'suppressions' }).click();
      await page.waitForURL(/\/suppressions\?search=gone%40suppressed\.test$/);
      await page.getByTestId('suppressions-total').filter({ hasText: /^1$/ }).waitFor();

      // The owner removes the bounced address after confirming: the API lists two, and sends to it again.
      await page.goto(`${base()}/suppressions`);
      await page.getByTestId('suppressions-total').filter({ hasText: /^3$/ }).waitFor();
      await table.getByRole('button', { name: 'Remove gone@suppressed.test', exact: true }).click();
      const dialog = page.getByRole('dialog', { name: 'Remove gone@suppressed.test?' });
      await dialog.getByRole('button', { name: 'Remove from suppressions' }).click();
      await page.getByText('gone@suppressed.test can receive mail again').waitFor();
      await page.getByTestId('suppressions-total').filter({ hasText: /^2$/ }).waitFor();
      assert.deepEqual(await rows(), ['by-hand@suppressed.test | MANUAL', 'angry@suppressed.test | COMPLAINT']);
      const listed = await owner.sk.get('/suppressions');
      assert.deepEqual(
        listed.body.data.map((e: { email: string }) => e.email),
        ['by-hand@suppressed.test', 'angry@suppressed.test'],
      );
      const again = await owner.sk.post('/v1/send', { to: 'gone@suppressed.test', from: 'hi@sandbox.herald.test', subject: 'Back', body: '<p>Back</p>' });
      assert.equal(again.status, 200, again.text);
      await waitForStatus(owner.sk, again.body.data.emails[0].email, ['DELIVERED']);
      const looked = page.waitForResponse((res) => /\/suppressions\/gone(@|%40)suppressed\.test$/.test(res.url()));
      await page.goto(`${base()}/contacts/${contactId}`);
      assert.equal((await looked).status(), 404);
      await page.getByRole('heading', { name: 'gone@suppressed.test' }).waitFor();
      assert.equal(await page.getByTestId('contact-suppressed').count(), 0);
    });
  },
);

test(
  "a scheduled campaign's report reads the campaign again at its start, not every 2 s (each read recounts its audience); Cancel sending asks first",
  { timeout: 180_000 },
  async () => {
    await journey(page, 'scheduled report', async () => {
      assert.equal((await owner.sk.post('/contacts', { email: 'later@example.org' })).status, 201);
      const created = await owner.sk.post('/campaigns', { name: 'Later', subject: 'Later', body: '<p>Later</p>', from: 'hi@sandbox.herald.test' });
      assert.equal(created.status, 201, created.text);
      const id: string = created.body.data.id;
      const scheduled = await owner.sk.post(`/campaigns/${id}/send`, { scheduledFor: new Date(Date.now() + 3_600_000).toISOString() });
      assert.equal(scheduled.status, 200, scheduled.text);
      const reads: string[] = [];
      const onRequest = (r: { url: () => string; method: () => string }) => {
        if (r.method() === 'GET' && new URL(r.url()).pathname.endsWith(`/campaigns/${id}`)) reads.push(r.url());
      };
      page.on('request', onRequest);
      try {
        await page.goto(`${base()}/campaigns/${id}/report`);
        await page.getByText(/scheduled for/).waitFor();
        await new Promise((r) => setTimeout(r, 7_000));
        assert.equal(reads.length, 1, `the campaign was read ${reads.length} times in 7 s`);
      } finally {
        page.off('request', onRequest);
      }

      // Cancelling asks first, saying the campaign goes back to draft.
      await page.getByRole('button', { name: 'Cancel sending' }).click();
      const confirm = page.getByRole('dialog', { name: 'Cancel the scheduled send?' });
      await confirm.getByText(/^“Later” will not go out on .+: the campaign goes back to draft, to edit and send or schedule again\.$/).waitFor();
      assert.equal((await owner.sk.get(`/campaigns/${id}`)).body.status, 'SCHEDULED', 'nothing before the confirmation');
      await confirm.getByRole('button', { name: 'Back to draft' }).click();
      await page.getByText('Schedule cancelled: the campaign is a draft again').waitFor();
      assert.equal((await owner.sk.get(`/campaigns/${id}`)).body.status, 'DRAFT');

      // A sending one (held there: no sender job) says its queued emails are skipped for good.
      const sending = await owner.sk.post('/campaigns', { name: 'Sending', subject: 'Now', body: '<p>Now</p>', from: 'hi@sandbox.herald.test' });
      assert.equal(sending.status, 201, sending.text);
      await server.sql(`UPDATE campaigns SET status = 'SENDING' WHERE id = $1`, [sending.body.data.id]);
      await page.goto(`${base()}/campaigns/${sending.body.data.id}/report`);
      await page.getByRole('button', { name: 'Cancel sending' }).click();
      const stop = page.getByRole('dialog', { name: 'Stop sending this campaign?' });
      await stop.getByText('The emails still queued for its recipients are skipped and cannot be resumed; those already sent stay sent.').waitFor();
      await stop.getByRole('button', { name: 'Stop sending' }).click();
      await page.getByText('Sending stopped: the queued emails were skipped').waitFor();
      assert.equal((await owner.sk.get(`/campaigns/${sending.body.data.id}`)).body.status, 'CANCELLED');

      // The campaigns list follows a campaign that is sending: once it ends, its row says SENT without a reload.
      const finishing = await owner.sk.post('/campaigns', { name: 'Finishing', subject: 'Soon', body: '<p>Soon</p>', from: 'hi@sandbox.herald.test' });
      assert.equal(finishing.status, 201, finishing.text);
      await server.sql(`UPDATE campaigns SET status = 'SENDING' WHERE id = $1`, [finishing.body.data.id]);
      await page.goto(`${base()}/campaigns`);
      const row = page.getByRole('row', { name: /Finishing/ });
      await row.getByTestId('campaign-status').filter({ hasText: 'SENDING' }).waitFor();
      await server.sql(`UPDATE campaigns SET status = 'SENT', sent_at = now() WHERE id = $1`, [finishing.body.data.id]);
      await row.getByTestId('campaign-status').filter({ hasText: 'SENT' }).waitFor({ timeout: 10_000 });
    });
  },
);

test('New contact with an existing address changes nothing and links the contact; a new address is created', { timeout: 180_000 }, async () => {
  await journey(page, 'new-contact-exists', async () => {
    const made = await owner.sk.post('/contacts', { email: 'left@exists.test', subscribed: false, data: { city: 'Oslo' } });
    assert.equal(made.status, 201, made.text);
    const id: string = made.body.id;

    await page.goto(`${base()}/contacts`);
    await page.getByRole('button', { name: 'New contact' }).click();
    const dialog = page.getByRole('dialog', { name: 'New contact' });
    await dialog.getByRole('textbox', { name: 'Email' }).fill('Left@Exists.test');
    await dialog.getByRole('textbox', { name: 'First name' }).fill('Overwritten');
    await dialog.getByRole('button', { name: 'Create contact' }).click();
    await dialog.getByTestId('contact-exists').filter({ hasText: 'left@exists.test is already a contact; nothing was changed.' }).waitFor();
    const kept = await owner.sk.get(`/contacts/${id}`);
    assert.equal(kept.body.subscribed, false, 'not re-subscribed');
    assert.deepEqual(kept.body.data, { city: 'Oslo' });
    await dialog.getByRole('link', { name: 'Open their page' }).click();
    await page.waitForURL(new RegExp(`/contacts/${id}$`));
    await page.getByRole('heading', { name: 'left@exists.test' }).waitFor();

    await page.goto(`${base()}/contacts`);
    await page.getByRole('button', { name: 'New contact' }).click();
    await dialog.getByRole('textbox', { name: 'Email' }).fill('fresh@exists.test');
    await dialog.getByRole('button', { name: 'Create contact' }).click();
    await page.getByRole('heading', { name: 'fresh@exists.test' }).waitFor();
    assert.equal((await owner.sk.post('/contacts/lookup', { emails: ['fresh@exists.test'] })).body.found.length, 1);
  });
});

test("a contact's Set field refuses an empty value of any type, and writes nothing", { timeout: 180_000 }, async () => {
  await journey(page, 'set-field-empty', async () => {
    const made = await owner.sk.post('/contacts', { email: 'fields@empty.test', data: { city: 'Oslo' } });
    assert.equal(made.status, 201, made.text);
    await page.goto(`${base()}/contacts/${made.body.id}`);
    const field = page.getByRole('textbox', { name: 'Field' });
    const type = page.getByRole('textbox', { name: 'Type' }).or(page.getByRole('combobox', { name: 'Type' }));
    const setField = page.getByRole('button', { name: 'Set field' });
    await field.fill('plan');
    await setField.click();
    await page.getByText('Enter a value', { exact: true }).waitFor();
    for (const [choice, message] of [
      ['number', 'Enter a number'],
      ['boolean', 'Choose true or false'],
    ]) {
      await type.first().click();
      await page.getByRole('option', { name: choice, exact: true }).click();
      await setField.click();
      await page.getByText(message, { exact: true }).waitFor();
    }
    assert.deepEqual((await owner.sk.get(`/contacts/${made.body.id}`)).body.data, { city: 'Oslo' });
  });
});

test("a contact's Set field refuses a number JSON cannot hold, a reserved key and a dotted key, and writes nothing", { timeout: 180_000 }, async () => {
  await journey(page, 'set-field-refused', async () => {
    const made = await owner.sk.post('/contacts', { email: 'fields@refused.test', data: { score: 5 } });
    assert.equal(made.status, 201, made.text);
    const patches: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'PATCH' && r.url().includes(made.body.id)) patches.push(r.postData() ?? '');
    });
    await page.goto(`${base()}/contacts/${made.body.id}`);
    const field = page.getByRole('textbox', { name: 'Field' });
    const value = page.getByRole('textbox', { name: 'Value' });
    const setField = page.getByRole('button', { name: 'Set field' });
    await page
      .getByRole('textbox', { name: 'Type' })
      .or(page.getByRole('combobox', { name: 'Type' }))
      .first()
      .click();
    await page.getByRole('option', { name: 'number', exact: true }).click();
    await field.fill('score');
    for (const [typed, message] of [
      ['1e400', 'Too large to store as a number'],
      ['0x10', 'Enter a number'],
      ['Infinity', 'Enter a number'],
    ]) {
      await value.fill(typed);
      await setField.click();
      await page.getByText(message, { exact: true }).waitFor();
    }
    await value.fill('7');
    await field.fill('email');
    await setField.click();
    await page.getByText('email is reserved: the service sets it, so it cannot be stored as a field', { exact: true }).waitFor();
    await field.fill('profile.tier');
    await setField.click();
    await page.getByText('A field name cannot contain a dot. Nested values (an object) are set through the API', { exact: true }).waitFor();
    assert.deepEqual(patches, []);
    assert.deepEqual((await owner.sk.get(`/contacts/${made.body.id}`)).body.data, { score: 5 });

    await field.fill('score');
    await value.fill('-1.5e3');
    await setField.click();
    await page.getByRole('cell', { name: '-1500', exact: true }).waitFor();
    assert.deepEqual((await owner.sk.get(`/contacts/${made.body.id}`)).body.data, { score: -1500 });
  });
});

test("a contact's page: its events and emails, 25 at a time, each email opening its page", { timeout: 180_000 }, async () => {
  await journey(page, 'contact-timeline', async () => {
    const { emailId, contactId } = await sendDelivered('timeline@example.org', 'Your receipt', '<p>Thanks</p><a href="{{unsubscribeUrl}}">Unsubscribe</a>');
    const bought = await owner.pk.post('/v1/track', { email: 'timeline@example.org', event: 'purchased', data: { amount: 30, item: 'Pro plan' } });
    assert.equal(bought.status, 200, bought.text);
    for (let i = 0; i < 30; i++) assert.equal((await owner.pk.post('/v1/track', { email: 'timeline@example.org', event: 'visited' })).status, 200);
    // The reader, who subscribed since (a contact /v1/send makes is not), leaves through the
    // receipt's unsubscribe link: the event names that email.
    assert.equal((await owner.sk.patch(`/contacts/${contactId}`, { subscribed: true })).status, 200);
    const source = await simpleParser((await owner.sk.get(`/emails/${emailId}/raw`)).text);
    const unsubscribeUrl = String(source.html).match(/href="([^"]*\/unsubscribe\/[^"]+)"/)?.[1];
    assert.ok(unsubscribeUrl, 'the receipt has its unsubscribe link');
    assert.equal((await fetch(`${server.url}${new URL(unsubscribeUrl).pathname}`, { method: 'POST' })).status, 200);
    const all = await owner.sk.get(`/activity?contactId=${contactId}&limit=100`);
    assert.equal(all.status, 200, all.text);
    const happenings = all.body.data.length;
    assert.ok(happenings > 30, `${happenings} things happened`);

    await page.goto(`${base()}/contacts/${contactId}`);
    const timeline = page.getByTestId('contact-timeline');
    await timeline.waitFor();
    const items = timeline.locator('.mantine-Timeline-item');
    assert.equal(await items.count(), 25);
    await page.getByRole('button', { name: 'Load more' }).click();
    await waitFor('every happening listed', async () => (await items.count()) === happenings, 20_000, 100);
    await page.getByRole('button', { name: 'Load more' }).waitFor({ state: 'detached' });
    // A tracked event shows its data.
    await timeline.locator('.mantine-Timeline-item', { hasText: 'purchased' }).getByText('amount: 30 · item: Pro plan').waitFor();
    await timeline.getByRole('link', { name: 'Your receipt' }).first().click();
    await page.waitForURL(new RegExp(`/emails/${emailId}$`));
    await page.getByTestId('email-status').filter({ hasText: 'DELIVERED' }).waitFor();
    await page.goto(`${base()}/contacts/${contactId}`);
    // The unsubscribe, newest, links the email it came from instead of printing its ID.
    const unsubscribed = timeline.locator('.mantine-Timeline-item', { hasText: 'contact.unsubscribed' });
    await unsubscribed.getByText('source: unsubscribe_link · the email it came from').waitFor();
    assert.equal(await unsubscribed.getByText(emailId).count(), 0, "the email's ID is not printed");
    await unsubscribed.getByRole('link', { name: 'the email it came from' }).click();
    await page.waitForURL(new RegExp(`/emails/${emailId}$`));
    await page.getByTestId('email-status').filter({ hasText: 'DELIVERED' }).waitFor();
  });
});

test("a tracked segment's page computes its membership now, and says why it waits while the disk is filling", { timeout: 180_000 }, async () => {
  await journey(page, 'segment-compute', async () => {
    for (const [email, plan] of [
      ['pro1@compute.test', 'pro'],
      ['pro2@compute.test', 'pro'],
      ['free@compute.test', 'free'],
    ]) {
      assert.equal((await owner.sk.post('/contacts', { email, data: { plan } })).status, 201);
    }
    const condition = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };
    const made = await owner.sk.post('/segments', { name: 'Pro computed', condition, trackMembership: true });
    assert.equal(made.status, 201, made.text);

    await page.goto(`${base()}/segments/${made.body.id}`);
    const computeNow = page.getByRole('button', { name: 'Compute now' });
    await computeNow.waitFor();
    const real = server.ctx.diskRoom;
    server.ctx.diskRoom = { watched: true, level: () => 'filling' };
    try {
      await computeNow.click();
      await page.getByText(/^The server's database disk is filling up: membership computes, .* wait until it has room again/).waitFor();
    } finally {
      server.ctx.diskRoom = real;
    }
    assert.equal((await owner.sk.get('/events?name=segment.pro-computed.entry')).body.total, 0);

    await computeNow.click();
    await page.getByText('2 entered, 0 left: 2 members').waitFor();
    await page.getByTestId('tracked-count').filter({ hasText: '2 members as last computed' }).waitFor();
    assert.equal((await owner.sk.get('/events?name=segment.pro-computed.entry')).body.total, 2);
  });
});

test('settings: monthly sending caps with usage bars; a MEMBER sees them but cannot change caps, keys or members', { timeout: 180_000 }, async () => {
  await journey(page, 'caps', async () => {
    await page.goto(`${base()}/settings`);
    await page.getByLabel('Transactional cap').fill('500');
    await page.getByRole('button', { name: 'Save caps' }).click();
    await page.getByText('Sending caps saved').waitFor();
    const limits = await server.api.get(`/users/@me/projects/${owner.project.id}/billing-limits`, { cookie: owner.cookie });
    assert.equal(limits.body.transactional.limit, 500);
    assert.equal(limits.body.campaigns.limit, null);
    await page
      .getByTestId('usage-transactional')
      .filter({ hasText: `${limits.body.transactional.usage} sent of 500` })
      .waitFor();

    await asMember('Mine', async (memberPage) => {
      await memberPage.goto(`${base()}/settings`);
      await memberPage.getByTestId('usage-transactional').filter({ hasText: 'of 500' }).waitFor();
      assert.equal(await memberPage.getByLabel('Transactional cap').isDisabled(), true);
      assert.equal(await memberPage.getByRole('button', { name: 'Save caps' }).count(), 0);
      assert.equal(await memberPage.getByRole('button', { name: 'Rotate keys…' }).count(), 0);
      await memberPage
        .getByText('Shown only when created or rotated, to the admin who did it. Ask an admin of the project for the key, or to rotate the keys.')
        .waitFor();
      assert.equal(await memberPage.getByText(/Rotate the keys to get a new one/).count(), 0);
      assert.equal(await memberPage.getByRole('button', { name: 'Invite' }).count(), 0);
    });
  });
});

test('domains: a MEMBER reads and checks the records but has no Add domain or Remove (both need ADMIN)', { timeout: 180_000 }, async () => {
  await journey(page, 'domains-member', async () => {
    const added = await owner.sk.post('/domains', { domain: 'member-view.example.test' });
    assert.equal(added.status, 201, added.text);
    await asMember('Reads domains', async (memberPage) => {
      await memberPage.goto(`${base()}/domains`);
      const card = memberPage.getByTestId('domain-member-view.example.test');
      await card.getByTestId('domain-status').filter({ hasText: 'pending' }).waitFor();
      assert.equal(await memberPage.getByRole('button', { name: 'Add domain' }).count(), 0);
      assert.equal(await memberPage.getByLabel('Sending domain').count(), 0);
      assert.equal(await card.getByRole('button', { name: 'Remove' }).count(), 0);
      // Checking the records is a read, which a MEMBER may do.
      await card.getByRole('button', { name: 'Verify now' }).click();
      await memberPage.getByText('member-view.example.test is not verified yet: some required records were not found').waitFor();
    });
    await page.goto(`${base()}/domains`);
    const card = page.getByTestId('domain-member-view.example.test');
    await card.getByRole('button', { name: 'Remove' }).waitFor();
    await page.getByRole('button', { name: 'Add domain' }).waitFor();
  });
});

test("a template's page says which workflows send it", { timeout: 180_000 }, async () => {
  await journey(page, 'template-usage', async () => {
    const template = await owner.sk.post('/templates', {
      name: 'Welcome mail',
      subject: 'Welcome',
      body: '<p>Hi</p>',
      from: 'hi@sandbox.herald.test',
      type: 'MARKETING',
    });
    assert.equal(template.status, 201, template.text);
    const unused = await owner.sk.post('/templates', {
      name: 'Unused mail',
      subject: 'x',
      body: '<p>x</p>',
      from: 'hi@sandbox.herald.test',
      type: 'MARKETING',
    });
    const flow = await owner.sk.post('/workflows', { name: 'Onboarding', eventName: 'joined' });
    assert.equal(flow.status, 201, flow.text);
    const step = await owner.sk.post(`/workflows/${flow.body.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: template.body.id } });
    assert.equal(step.status, 201, step.text);

    await page.goto(`${base()}/templates/${template.body.id}`);
    await page.getByTestId('template-usage').getByRole('link', { name: 'Onboarding' }).waitFor();
    await page.goto(`${base()}/templates/${unused.body.id}`);
    await page.getByTestId('template-usage').filter({ hasText: 'Not sent by any workflow' }).waitFor();
  });
});

test("the template editor's images: upload one, insert its tag at the cursor, delete it", { timeout: 180_000 }, async () => {
  await journey(page, 'images', async () => {
    const template = await owner.sk.post('/templates', {
      name: 'Newsletter',
      subject: 'News',
      body: '<p>Hello</p>\n<p>Bye</p>',
      from: 'hi@sandbox.herald.test',
      type: 'MARKETING',
    });
    assert.equal(template.status, 201, template.text);
    await page.goto(`${base()}/templates/${template.body.id}`);
    const editor = page.locator('.cm-content');
    await editor.waitFor();
    // The cursor after "<p>Hello</p>": the tag goes there, not at the end of the body.
    await editor.getByText('Hello').click();
    await page.keyboard.press('End');

    await page.getByRole('button', { name: 'Images…' }).click();
    const library = page.getByRole('dialog', { name: 'Images' });
    await library.getByText('No images yet.').waitFor();
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
    await library.locator('input[type=file]').setInputFiles({ name: 'logo.png', mimeType: 'image/png', buffer: png });
    const card = library.getByTestId('upload-card');
    await card.waitFor();
    await library.getByTestId('uploads-usage').filter({ hasText: '1 KB of 100.0 MB used · 1 of 10,000 images' }).waitFor();
    const listed = await owner.sk.get('/uploads');
    assert.equal(listed.body.data.length, 1);
    const { url, key } = listed.body.data[0];
    // The thumbnail is the image itself, served publicly.
    await card.locator('img').evaluate((img: LoadedImage) => (img.complete ? null : new Promise((r) => img.addEventListener('load', r))));
    assert.equal(await card.locator('img').evaluate((img: LoadedImage) => img.naturalWidth), 1);

    await card.getByRole('button', { name: 'Insert' }).click();
    await library.waitFor({ state: 'hidden' });
    const tag = `<img src="${url}" alt="" style="max-width: 100%; height: auto;">`;
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Template saved').waitFor();
    assert.equal((await owner.sk.get(`/templates/${template.body.id}`)).body.body, `<p>Hello</p>${tag}\n<p>Bye</p>`);

    await page.getByRole('button', { name: 'Images…' }).click();
    await card.getByRole('button', { name: 'Delete' }).click();
    await card.getByText('Delete it?').waitFor();
    await card.getByRole('button', { name: 'Delete' }).click();
    await library.getByText('No images yet.').waitFor();
    assert.equal((await owner.sk.get('/uploads')).body.data.length, 0);
    assert.equal((await fetch(`${server.url}/uploads/${key}`)).status, 404);
  });
});

test('settings: the danger zone resets a project after its name is typed, then deletes it', { timeout: 180_000 }, async () => {
  await journey(page, 'danger-zone', async () => {
    const created = await server.api.post('/users/@me/projects', { name: 'Scratch' }, { cookie: owner.cookie });
    assert.equal(created.status, 201, created.text);
    const scratch = server.api.as({ key: created.body.secretKey });
    assert.equal((await scratch.post('/contacts', { email: 'gone@example.org' })).status, 201);

    await page.goto(`${server.url}/app/p/${created.body.id}/settings`);
    await page.getByRole('button', { name: 'Reset data…' }).click();
    const resetDialog = page.getByRole('dialog', { name: 'Reset the project’s data?' });
    const confirmReset = resetDialog.getByRole('button', { name: 'Reset data' });
    assert.equal(await confirmReset.isDisabled(), true, 'not before the name is typed');
    await resetDialog.getByRole('textbox').fill('Scratch');
    await confirmReset.click();
    await page.getByText('Project reset: deleted 1 contacts').waitFor();
    assert.equal((await scratch.get('/contacts')).body.data.length, 0);
    assert.equal((await scratch.get('/contacts')).status, 200, 'the keys still work after a reset');

    await page.getByRole('button', { name: 'Delete project…' }).click();
    const deleteDialog = page.getByRole('dialog', { name: 'Delete the project?' });
    await deleteDialog.getByRole('textbox').fill('scratch');
    assert.equal(await deleteDialog.getByRole('button', { name: 'Delete project' }).isDisabled(), true, 'the name must match');
    await deleteDialog.getByRole('textbox').fill('Scratch');
    await deleteDialog.getByRole('button', { name: 'Delete project' }).click();
    await page.waitForURL(/\/app\/projects$/);
    await page.getByText('Project Scratch deleted').waitFor();
    assert.equal((await scratch.get('/contacts')).status, 401);
    const left = await server.api.get('/users/@me/projects', { cookie: owner.cookie });
    assert.equal(left.status, 200);
    assert.equal(
      left.body.some((p: { id: string }) => p.id === created.body.id),
      false,
      'out of the project list',
    );
    assert.equal(
      left.body.some((p: { id: string }) => p.id === owner.project.id),
      true,
    );
  });
});

test("a template's live preview waits while the project's previews are busy, and says so when they stay busy", { timeout: 180_000 }, async () => {
  await journey(page, 'preview-busy', async () => {
    // Two previews of this project under way (the per-project bound): the editor's preview is a 429.
    const releases = [server.ctx.previews.take(owner.project.id), server.ctx.previews.take(owner.project.id)];
    await page.goto(`${base()}/templates/new`);
    await page.getByRole('textbox', { name: 'Subject' }).fill('Busy {{ 1 | plus: 1 }}');
    await page.getByTestId('preview-waiting').waitFor();
    assert.equal(await page.getByTestId('preview-error').count(), 0, 'a 429 is retried before it is shown');
    // Still busy after the retries (about 5 s): the alert names the wait, not a broken template.
    const alert = page.getByTestId('preview-error');
    await alert.waitFor({ timeout: 20_000 });
    assert.equal(await alert.getByText('The server is busy rendering previews').count(), 1);
    assert.match(await alert.innerText(), /This project already has 2 previews rendering; try again in 1 second/);
    assert.match(await alert.innerText(), /The preview is tried again at your next change\./);
    assert.equal(await page.getByText('The template does not render').count(), 0);

    // Free again: the next edit renders.
    for (const release of releases) release();
    await page.getByRole('textbox', { name: 'Subject' }).fill('Free {{ 1 | plus: 1 }}');
    await page.getByTestId('preview-subject').filter({ hasText: 'Free 2' }).waitFor();
    assert.equal(await page.getByTestId('preview-error').count(), 0);

    // Busy for a moment only: the preview waits and then renders, with no alert in between.
    const held = [server.ctx.previews.take(owner.project.id), server.ctx.previews.take(owner.project.id)];
    await page.getByRole('textbox', { name: 'Subject' }).fill('Later {{ 1 | plus: 1 }}');
    await page.getByTestId('preview-waiting').waitFor();
    for (const release of held) release();
    await page.getByTestId('preview-subject').filter({ hasText: 'Later 2' }).waitFor();
    assert.equal(await page.getByTestId('preview-error').count(), 0);
  });
});
