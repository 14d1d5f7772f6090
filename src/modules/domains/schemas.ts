import { domainToASCII } from 'node:url';
import { z } from 'zod';
import { component } from '../../http/openapi.ts';
import type { DomainStatus, StoredDnsRecord } from '../../db/schema/domains.ts';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** The longest domain whose DKIM record name (`herald._domainkey.<domain>`) is still a valid DNS name. */
export const MAX_DOMAIN_LENGTH = 253 - 'herald._domainkey.'.length;

/**
 * A sender domain in canonical form: lower-case ASCII (IDNs as punycode), no trailing dot.
 * Null for anything that is not a registrable-looking host name (no dot, IP address, too long, bad labels).
 */
export function normaliseDomain(input: string): string | null {
  const trimmed = input.trim().toLowerCase().replace(/\.$/, '');
  if (trimmed === '' || trimmed.length > 253 || /[\s/@:[\]]/.test(trimmed)) return null;
  const ascii = /^[\x00-\x7f]*$/.test(trimmed) ? trimmed : domainToASCII(trimmed);
  if (!ascii || ascii.length > MAX_DOMAIN_LENGTH) return null;
  const labels = ascii.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) return null;
  // An all-numeric last label is an IPv4 address (or nonsense), never a public suffix.
  if (/^[0-9]+$/.test(labels[labels.length - 1])) return null;
  return ascii;
}

export const domainName = z.string().transform((value, ctx) => {
  const domain = normaliseDomain(value);
  if (domain === null) {
    ctx.addIssue({
      code: z.ZodIssueCode.invalid_string,
      validation: 'regex',
      message: 'Must be a domain name such as example.com (no scheme, path, IP address or wildcard)',
    });
    return z.NEVER;
  }
  return domain;
});

export const createDomainBody = z.object({ domain: domainName });

export const domainIdParams = z.object({ id: z.string().min(1).max(100) });

export const projectIdParams = z.object({ projectId: z.string().min(1).max(100) });

export type DomainRecord = {
  id: string;
  domain: string;
  status: DomainStatus;
  projectId: string;
  createdAt: string;
  verifiedAt: string | null;
  lastCheckedAt: string | null;
  records: StoredDnsRecord[];
};

// Responses (the document and the strict response check: src/http/openapi.ts)

export const domainSchema = component(
  'Domain',
  z.object({
    id: z.string(),
    domain: z.string(),
    status: z.enum(['pending', 'verified']),
    projectId: z.string(),
    createdAt: z.string(),
    verifiedAt: z.string().nullable(),
    lastCheckedAt: z.string().nullable(),
    records: z
      .array(
        z.object({
          type: z.enum(['TXT', 'CNAME', 'MX']),
          name: z.string(),
          value: z.string(),
          priority: z.number().int().optional(),
          purpose: z.enum(['dkim', 'verification', 'spf', 'dmarc', 'return-path']),
          required: z.boolean(),
          found: z.boolean().optional(),
        }),
      )
      .describe('The DNS records to publish, with the result of the last check'),
  }),
);
