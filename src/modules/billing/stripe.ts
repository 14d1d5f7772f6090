import type Stripe from 'stripe';
import type { Config } from '../../config.ts';
import { ApiError } from '../../http/errors.ts';

/**
 * The official Stripe client, when STRIPE_SECRET_KEY is set. STRIPE_API_BASE points it elsewhere
 * (tests run it against a small fake Stripe on loopback). The library is loaded on first use: a
 * server without billing never holds it in memory (it is one of the largest modules).
 */
export async function stripeClient(config: Config): Promise<Stripe> {
  if (!config.stripeSecretKey) throw billingDisabled();
  const { default: Stripe } = await import('stripe');
  const base = config.stripe.apiBase ? new URL(config.stripe.apiBase) : null;
  return new Stripe(config.stripeSecretKey, {
    maxNetworkRetries: 1,
    timeout: 10_000,
    telemetry: false,
    ...(base && {
      host: base.hostname,
      port: base.port || (base.protocol === 'https:' ? 443 : 80),
      protocol: base.protocol === 'https:' ? ('https' as const) : ('http' as const),
    }),
  });
}

export const billingDisabled = () => new ApiError(404, 'BILLING_DISABLED', 'Billing is not enabled on this server (STRIPE_SECRET_KEY is not set)');

export function assertBillingEnabled(config: Config): void {
  if (!config.stripeSecretKey) throw billingDisabled();
}
