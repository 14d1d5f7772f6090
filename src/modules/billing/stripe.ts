import Stripe from 'stripe';
import type { Config } from '../../config.ts';
import { ApiError } from '../../http/errors.ts';

/**
 * The official Stripe client, when STRIPE_SECRET_KEY is set. STRIPE_API_BASE points it elsewhere
 * (tests run it against a small fake Stripe on loopback).
 */
export function stripeClient(config: Config): Stripe {
  if (!config.stripeSecretKey) throw billingDisabled();
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
