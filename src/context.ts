import type { Resolver } from 'node:dns/promises';
import type { BusySlots } from './http/busy-slots.ts';
import type { HeavyReads } from './http/heavy-reads.ts';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Database } from './db/client.ts';
import type { Jobs } from './jobs/boss.ts';
import type { ProjectCaches } from './cache/project-caches.ts';
import type { KeyCache } from './http/key-cache.ts';
import type { Transport } from './mail/transport.ts';
import type { ComposePool } from './render/compose-pool.ts';
import type { Accepted } from './modules/emails/lifecycle.ts';
import type { EngagementRecorder } from './modules/tracking/engagement.ts';
import type { KeyTurns } from './modules/domains/key-slots.ts';
import type { ReputationChecks } from './modules/reputation/guard.ts';
import type { SlowAudienceLanes } from './modules/campaigns/turns.ts';
import type { SlowProjects } from './conditions/slow-projects.ts';
import type { DiskRoom } from './db/disk-room.ts';

export type Clock = { now: () => Date };

export const systemClock: Clock = { now: () => new Date() };

/** Everything a service needs, passed explicitly: no module-level singletons. */
export type AppContext = {
  config: Config;
  database: Database;
  jobs: Jobs;
  keys: KeyCache;
  /** Per-process caches about projects, evicted in every process through `keys.notifyChanged`. */
  caches: ProjectCaches;
  /** Where built messages go: the SMTP relay, or capture when SMTP_URL is unset. */
  mailer: Transport;
  /** Worker threads for the CPU-heavy steps of a message: rendering, MIME and DKIM signing, with a hard time limit. */
  threads: { compose: ComposePool };
  /** Previews under way on those threads, per project and in all (modules/templates/preview.ts). */
  previews: BusySlots;
  /** Downloads of captured sources under way, per project and in all (modules/emails/raw-source.ts). */
  rawDownloads: BusySlots;
  /** DELETE /contacts/fields/:field under way, per project and in all (modules/contacts/fields.ts). */
  fieldDeletes: BusySlots;
  /** DELETE /events/:eventName, and a contact delete of many events, under way per project and in all (modules/events/usage.ts). */
  eventDeletes: BusySlots;
  /** Counts over a project's stored contacts or events that requests wait for: under way per project and in all, and each project's time lately (http/heavy-reads.ts). */
  heavyReads: HeavyReads;
  /** POST /users/@me/projects/:id/reset under way, per project and in all (modules/projects/purge.ts). */
  projectPurges: BusySlots;
  /** DELETE /workflows/:id and DELETE /segments/:id of more than a batch of executions or members, under way per project and in all (modules/workflows/delete.ts). */
  cascadeDeletes: BusySlots;
  /** Campaign audience reads past the quick bound under way in this process, all projects together (modules/campaigns/turns.ts). */
  slowAudienceReads: SlowAudienceLanes;
  /** Projects whose contact re-evaluations outran the quick lane lately, in this process (conditions/slow-projects.ts). */
  slowReevaluations: SlowProjects;
  /** Turns at generating a new domain's DKIM key, one at a time, in rotation across projects (modules/domains/key-slots.ts). */
  dkimKeyTurns: KeyTurns;
  /** Reputation checks after bounces and complaints, running or due, per project (modules/reputation/guard.ts). */
  reputationChecks: ReputationChecks;
  /** Whether the database's disk is above DATABASE_MIN_FREE_MB: below it, writes that add data are refused (db/disk-room.ts). */
  diskRoom: DiskRoom;
  /**
   * Records a message the relay accepted; resolves once it is recorded. Shared by all delivery
   * batches running in this process, so their accepted messages are written together
   * (modules/emails/delivery/accepted.ts).
   */
  recordAccepted: (accepted: Accepted) => Promise<void>;
  /** Records opens and clicks, those of one email that arrive together in one transaction (modules/tracking/engagement.ts). */
  recordEngagement: EngagementRecorder;
  dns: Resolver;
  log: Logger;
  clock: Clock;
};
