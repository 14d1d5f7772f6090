import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { readEnv } from './env-file.ts';

/**
 * The only reader of process.env (through env-file.ts), apart from start-flags.ts, which picks
 * Node's flags before Herald starts. Every variable is documented in the README.
 */

const bool = z
  .string()
  .transform((v) => v.trim().toLowerCase())
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no', ''], { message: 'must be true or false' }))
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const url = (protocols: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `must be a URL with scheme ${protocols.map((p) => p.replace(':', '://')).join(' or ')}` },
  );

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

const MB = 1024 * 1024;

const BILLING_CATEGORIES = ['transactional', 'campaigns', 'workflows', 'inbound'] as const;
/** Monthly caps per billing category; null: no cap. */
export type CategoryCaps = Readonly<Record<(typeof BILLING_CATEGORIES)[number], number | null>>;

/**
 * `transactional=100,campaigns=0,…`: each category at most once, a whole number or `unlimited`;
 * a category not named is 0.
 */
const categoryCaps = z.string().transform((v, zctx): CategoryCaps => {
  const caps: Record<string, number | null> = { transactional: 0, campaigns: 0, workflows: 0, inbound: 0 };
  const seen = new Set<string>();
  for (const part of v.split(',').map((p) => p.trim())) {
    if (part === '') continue;
    const m = /^([a-z]+)\s*=\s*(\d{1,10}|unlimited)$/.exec(part);
    const name = m?.[1] ?? '';
    const bad = !m || !(BILLING_CATEGORIES as readonly string[]).includes(name) || seen.has(name) || (m[2] !== 'unlimited' && Number(m[2]) > 1_000_000_000);
    if (bad) {
      zctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: `must be category=cap pairs separated by commas (categories ${BILLING_CATEGORIES.join(', ')}, each at most once; cap a whole number up to 1000000000 or unlimited), not ${JSON.stringify(part)}`,
      });
      return z.NEVER;
    }
    seen.add(name);
    caps[name] = m[2] === 'unlimited' ? null : Number(m[2]);
  }
  return Object.freeze(caps as CategoryCaps);
});

const hostPort = z.string().regex(/^[0-9a-fA-F.:[\]]+$/, 'must be ip or ip:port');

export const envSchema = z.object({
  PORT: int(0, 65535).default('3000'),
  HOST: z.string().min(1).default('0.0.0.0'),
  PUBLIC_URL: url(['http:', 'https:']).optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  DATABASE_POOL_SIZE: int(2, 500).default('20'),
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  PROCESS_ROLE: z.enum(['api', 'worker', 'all']).default('all'),
  SMTP_URL: url(['smtp:', 'smtps:']).optional(),
  SMTP_POOL_SIZE: int(1, 100).default('5'),
  SEND_RATE_PER_SECOND: int(1, 100000).default('14'),
  DNS_SERVERS: z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    )
    .pipe(z.array(hostPort)),
  JWT_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  DISABLE_SIGNUP: bool.default('false'),
  API_RATE_LIMIT_PER_MINUTE: int(1, 10_000_000).default('1000'),
  HEAVY_READ_SECONDS_PER_MINUTE: int(1, 120).default('15'),
  TRUST_PROXY: z
    .string()
    .optional()
    .transform((v) => v ?? 'false')
    .pipe(z.string().regex(/^(true|false|\d{1,2}|[0-9a-fA-F.:/,\s]+)$/, 'must be true, false, a hop count or a list of proxy addresses/CIDRs')),
  MAX_PROJECTS_PER_USER: int(1, 100_000).default('10'),
  SIGNUPS_PER_IP_PER_HOUR: int(1, 1_000_000).default('10'),
  IDEMPOTENCY_KEY_TTL_HOURS: int(1, 24 * 365).default('24'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: bool.default('false'),
  WORKFLOW_BATCH_SIZE: int(1, 10_000).default('500'),
  DELIVERY_RETRY_BASE_SECONDS: int(1, 3600).default('30'),
  DELIVERY_MAX_ATTEMPTS: int(1, 50).default('8'),
  TRACKING_LINK_TTL_DAYS: int(1, 36500).default('365'),
  EVENT_RETENTION_DAYS: int(1, 36500).optional(),
  EMAIL_CONTENT_RETENTION_DAYS: int(1, 36500).optional(),
  SNS_TRUSTED_CERT_FILE: z.string().optional(),
  SNS_TOPIC_ARNS: z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    )
    .pipe(z.array(z.string().regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}$/, 'must be a comma-separated list of SNS topic ARNs'))),
  STRIPE_SECRET_KEY: z.string().optional(),
  STRIPE_WEBHOOK_SECRET: z.string().optional(),
  STRIPE_API_BASE: url(['http:', 'https:']).optional(),
  STRIPE_PRICE_ID: z.string().optional(),
  BILLING_FREE_PLAN_LIMITS: categoryCaps.default(''),
  S3_BUCKET: z.string().optional(),
  S3_ENDPOINT: url(['http:', 'https:']).optional(),
  S3_REGION: z
    .string()
    .regex(/^[a-z0-9-]+$/, 'must be a region name like us-east-1')
    .default('us-east-1'),
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  S3_FORCE_PATH_STYLE: bool.default('true'),
  UPLOAD_QUOTA_MB: int(1, 10_000_000).default('100'),
  UPLOAD_MIN_FREE_MB: int(0, 10_000_000).default('1024'),
  DATABASE_MIN_FREE_MB: int(0, 10_000_000).default('1024'),
  DATABASE_DISK_PATH: z.string().min(1).optional(),
  STRICT_RESPONSES: bool.default('false'),
});

export type Config = Readonly<{
  port: number;
  host: string;
  publicUrl: string;
  dataDir: string;
  databaseUrl: string | undefined;
  databasePoolSize: number;
  redisUrl: string | undefined;
  processRole: 'api' | 'worker' | 'all';
  smtpUrl: string | undefined;
  smtpPoolSize: number;
  sendRatePerSecond: number;
  dnsServers: string[];
  jwtSecret: string;
  /** JWT_SECRET was not set: the secret was generated into (or read from) DATA_DIR. */
  jwtSecretGenerated: boolean;
  disableSignup: boolean;
  apiRateLimitPerMinute: number;
  /** A project's share of heavy reads' time once its burst is spent (http/heavy-reads.ts). */
  heavyReadSecondsPerMinute: number;
  /** Fastify's trustProxy: false (default), true, a hop count, or the trusted proxy addresses. */
  trustProxy: boolean | number | string;
  maxProjectsPerUser: number;
  signupsPerIpPerHour: number;
  idempotencyKeyTtlHours: number;
  logLevel: string;
  /** Unset: pretty on a terminal, JSON otherwise. */
  logFormat: 'json' | 'pretty' | undefined;
  webhookAllowPrivateNetworks: boolean;
  /** Workflow executions a worker claims and advances per transaction. */
  workflowBatchSize: number;
  deliveryRetryBaseSeconds: number;
  deliveryMaxAttempts: number;
  /** Click and open links older than this show a page naming the destination instead of redirecting. */
  trackingLinkTtlDays: number;
  /** Events older than this are deleted (events/partitions.ts); unset: kept forever. */
  eventRetentionDays: number | undefined;
  /** Stored message sources older than this are cleared (emails/retention.ts); unset: kept forever. */
  emailContentRetentionDays: number | undefined;
  snsTrustedCertFile: string | undefined;
  /** The only SNS topics /webhooks/notifications accepts; empty: it refuses everything. */
  snsTopicArns: readonly string[];
  stripeSecretKey: string | undefined;
  /** Stripe settings, used only when stripeSecretKey is set. */
  stripe: Readonly<{ webhookSecret: string | undefined; apiBase: string | undefined; priceId: string | undefined }>;
  /** With Stripe on, the caps of a project without a live subscription (BILLING_FREE_PLAN_LIMITS; default 0 each). */
  billingFreePlanLimits: CategoryCaps;
  /** Set when S3_BUCKET is: uploads go to this bucket instead of DATA_DIR/uploads. */
  s3: S3Config | undefined;
  /** Total bytes of images one project may keep uploaded (UPLOAD_QUOTA_MB). */
  uploadQuotaBytes: number;
  /** Uploads to DATA_DIR/uploads are refused when they would leave less than this free (UPLOAD_MIN_FREE_MB); not for S3. */
  uploadMinFreeBytes: number;
  /**
   * The database's disk, watched so that writes adding data stop (507) before it fills
   * (db/disk-room.ts): DATABASE_DISK_PATH, else the embedded PostgreSQL's DATA_DIR; undefined with
   * an external DATABASE_URL and no path, or with DATABASE_MIN_FREE_MB=0.
   */
  databaseDisk: Readonly<{ path: string; minFreeBytes: number }> | undefined;
  /** Check every JSON response against its route's schema; a mismatch is a 500 (tests turn it on). */
  strictResponses: boolean;
}>;

export type S3Config = Readonly<{
  bucket: string;
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  forcePathStyle: boolean;
}>;

export class ConfigError extends Error {}

/** Parses an environment (process.env by default) into a frozen Config, or throws ConfigError naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = readEnv()): Config {
  const present: Record<string, string> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') present[key] = value;
  }
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue.path[0]);
    throw new ConfigError(`Invalid configuration: ${name} ${issue.message}${shownValue(name, present[name])}`);
  }
  const e = parsed.data;
  const publicUrl = (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, '');
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    publicUrl,
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    redisUrl: e.REDIS_URL,
    processRole: e.PROCESS_ROLE,
    smtpUrl: e.SMTP_URL,
    smtpPoolSize: e.SMTP_POOL_SIZE,
    sendRatePerSecond: e.SEND_RATE_PER_SECOND,
    dnsServers: e.DNS_SERVERS,
    jwtSecret: e.JWT_SECRET ?? generatedSecret(path.resolve(e.DATA_DIR)),
    jwtSecretGenerated: e.JWT_SECRET === undefined,
    disableSignup: e.DISABLE_SIGNUP,
    apiRateLimitPerMinute: e.API_RATE_LIMIT_PER_MINUTE,
    heavyReadSecondsPerMinute: e.HEAVY_READ_SECONDS_PER_MINUTE,
    trustProxy: e.TRUST_PROXY === 'true' ? true : e.TRUST_PROXY === 'false' ? false : /^\d+$/.test(e.TRUST_PROXY) ? Number(e.TRUST_PROXY) : e.TRUST_PROXY,
    maxProjectsPerUser: e.MAX_PROJECTS_PER_USER,
    signupsPerIpPerHour: e.SIGNUPS_PER_IP_PER_HOUR,
    idempotencyKeyTtlHours: e.IDEMPOTENCY_KEY_TTL_HOURS,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    webhookAllowPrivateNetworks: e.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
    workflowBatchSize: e.WORKFLOW_BATCH_SIZE,
    deliveryRetryBaseSeconds: e.DELIVERY_RETRY_BASE_SECONDS,
    deliveryMaxAttempts: e.DELIVERY_MAX_ATTEMPTS,
    trackingLinkTtlDays: e.TRACKING_LINK_TTL_DAYS,
    eventRetentionDays: e.EVENT_RETENTION_DAYS,
    emailContentRetentionDays: e.EMAIL_CONTENT_RETENTION_DAYS,
    snsTrustedCertFile: e.SNS_TRUSTED_CERT_FILE,
    snsTopicArns: Object.freeze(e.SNS_TOPIC_ARNS),
    stripeSecretKey: e.STRIPE_SECRET_KEY,
    stripe: { webhookSecret: e.STRIPE_WEBHOOK_SECRET, apiBase: e.STRIPE_API_BASE, priceId: e.STRIPE_PRICE_ID },
    billingFreePlanLimits: e.BILLING_FREE_PLAN_LIMITS,
    s3: s3Config(e),
    uploadQuotaBytes: e.UPLOAD_QUOTA_MB * MB,
    uploadMinFreeBytes: e.UPLOAD_MIN_FREE_MB * MB,
    databaseDisk: databaseDisk(e),
    strictResponses: e.STRICT_RESPONSES,
  });
}

// Never echo a secret: these values are left out of error messages, and URLs lose their password.
const SECRET_NAME = /SECRET|PASSWORD|TOKEN|PRIVATE|_KEY$|_KEY_ID$/;
const URL_NAME = /_URL$/;

function shownValue(name: string, value: string | undefined): string {
  if (value === undefined || SECRET_NAME.test(name)) return '';
  const shown = URL_NAME.test(name) ? maskUrlPassword(value) : value;
  return ` (got ${JSON.stringify(shown.length > 200 ? `${shown.slice(0, 200)}…` : shown)})`;
}

/** `smtp://user:pass@host` → `smtp://user:***@host`, also for values that do not parse as URLs. */
export function maskUrlPassword(value: string): string {
  const at = value.lastIndexOf('@');
  // The password starts after the first colon that is not the scheme's `://`.
  const colon = [...value.slice(0, at).matchAll(/:(?!\/\/)/g)][0]?.index;
  return at < 0 || colon === undefined ? value : `${value.slice(0, colon)}:***${value.slice(at)}`;
}

function databaseDisk(e: z.infer<typeof envSchema>): Config['databaseDisk'] {
  const dir = e.DATABASE_DISK_PATH ?? (e.DATABASE_URL ? undefined : e.DATA_DIR);
  return dir && e.DATABASE_MIN_FREE_MB > 0 ? { path: path.resolve(dir), minFreeBytes: e.DATABASE_MIN_FREE_MB * MB } : undefined;
}

function s3Config(e: z.infer<typeof envSchema>): S3Config | undefined {
  if (!e.S3_BUCKET) return undefined;
  const missing = (name: string) => new ConfigError(`Invalid configuration: ${name} is required when S3_BUCKET is set`);
  if (!e.S3_ACCESS_KEY_ID) throw missing('S3_ACCESS_KEY_ID');
  if (!e.S3_SECRET_ACCESS_KEY) throw missing('S3_SECRET_ACCESS_KEY');
  return Object.freeze({
    bucket: e.S3_BUCKET,
    endpoint: (e.S3_ENDPOINT ?? `https://s3.${e.S3_REGION}.amazonaws.com`).replace(/\/+$/, ''),
    region: e.S3_REGION,
    accessKeyId: e.S3_ACCESS_KEY_ID,
    secretAccessKey: e.S3_SECRET_ACCESS_KEY,
    forcePathStyle: e.S3_FORCE_PATH_STYLE,
  });
}

/** JWT_SECRET defaults to a random secret generated once into DATA_DIR, so sessions survive restarts. */
function generatedSecret(dataDir: string): string {
  const file = path.join(dataDir, 'jwt-secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  try {
    writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' });
    return secret;
  } catch {
    return readFileSync(file, 'utf8').trim(); // another process created it first
  }
}
